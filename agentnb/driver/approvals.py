"""What a person's answer is checked against before it is recorded: the request it answers.

An approval names the call it approves and, optionally, the arguments digest the approver saw. The answer
is refused (nothing is recorded, nothing runs) when the request expired, when the call's arguments changed
since the request was made, or when they are not the ones the approver saw.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..engine import CallState, arguments_digest
from ..events import ApprovalRequested
from ..exceptions import ApprovalError, ApprovalExpired, DigestMismatch

if TYPE_CHECKING:
    from ..run import Run


def request_for(run: Run, call: CallState) -> ApprovalRequested:
    """The ``ApprovalRequested`` that ``call`` waits on (the last one for it)."""
    for ev in reversed(run.events):
        if isinstance(ev, ApprovalRequested) and ev.call_id == call.call_id:
            return ev
    raise ApprovalError(f"no approval request for call {call.call_id!r}")  # pragma: no cover - fold invariant

def check_request(run: Run, call: CallState, digest: str | None, *, for_approval: bool) -> ApprovalRequested:
    """The request ``call`` waits on, if an answer to it may be recorded now.

    Raises:
        ApprovalExpired: ``for_approval`` and the request's expiry passed.
        DigestMismatch: the arguments changed since the request, or ``digest`` is not theirs.
    """
    req = request_for(run, call)
    expires = req.expires_at
    if for_approval and expires is not None and datetime.now(UTC) > expires:
        raise ApprovalExpired(
            f"the approval request for call {call.call_id!r} expired at {expires.isoformat(timespec='seconds')}; "
            "nothing ran. Deny it (run.deny) or start again."
        )
    current = arguments_digest(call.name, call.arguments)
    if current != req.arguments_digest:
        raise DigestMismatch(f"call {call.call_id!r}: its arguments changed since approval was requested")
    if digest is not None and digest != current:
        raise DigestMismatch(
            f"call {call.call_id!r}: the arguments you approved (digest {digest[:12]}…) are not the ones "
            f"waiting (digest {current[:12]}…); nothing ran"
        )
    return req
