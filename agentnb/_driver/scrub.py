"""Masking credentials at the source: an engine-built event is scrubbed before it is stamped and stored.

The engine builds events from what the run holds, and what the run holds may carry a secret: a secret
parameter's value in a call's arguments, a credential a provider echoed in an error, a key in the request
settings. The driver owns the secrets (:class:`~agentnb._redact.RunSecrets`: the real values live in memory
only), so it masks each event before it exists in any store, listener or frame (see :mod:`agentnb._redact`).
Fragments of a streamed answer are masked before the engine sees them (their lengths count what is shown).

Each event class says which of its fields are scrubbed (:data:`TEXT_FIELDS`); the classes not listed carry
nothing a person or a model could have typed a secret into, apart from what was masked upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .._redact import RunSecrets, redact, redact_text, redact_wire
from ..events import (
    ApprovalResolved,
    BaseEvent,
    CallRejected,
    CallValidated,
    ModelRequested,
    ModelRetried,
    RunFinished,
    RunStarted,
    TurnCompleted,
)

TEXT_FIELDS: dict[type[BaseEvent], tuple[str, ...]] = {
    RunStarted: (),
    ModelRequested: (),
    ModelRetried: ("error",),
    TurnCompleted: (),
    CallValidated: (),
    CallRejected: ("message",),
    ApprovalResolved: ("note", "content"),
    RunFinished: ("reason",),
}
"""The event classes that are scrubbed, and their free-text fields (masked with ``redact_text``)."""


def scrub(event: BaseEvent, secrets: RunSecrets, settings: dict[str, Any], event_settings: dict[str, Any],
          calls: Mapping[str, Any]) -> None:
    """Mask ``event`` in place (it is not stored yet).

    ``settings`` are the loop's request settings and ``event_settings`` their redacted copy (made once per
    loop); ``calls`` are the turn's calls by id (a ``CallValidated``'s or ``ApprovalResolved``'s tool name).
    """
    cls = type(event)
    if cls is ModelRequested:
        assert isinstance(event, ModelRequested)
        secrets.restart_streams()
        event.settings = event_settings if event.settings is settings else redact(event.settings)
        return
    if cls is ModelRetried or cls is RunFinished:
        assert isinstance(event, ModelRetried | RunFinished)
        if cls is ModelRetried:
            secrets.restart_streams()
        if event.wire is not None:  # a failed or broken request's exchange: rare, so every piece is masked
            event.wire = redact_wire(event.wire, secrets.names(None), split=True)
    elif cls is RunStarted:
        assert isinstance(event, RunStarted)
        event.settings = redact(event.settings)
    elif cls is TurnCompleted:
        assert isinstance(event, TurnCompleted)
        resp = event.response
        message = secrets.turn(resp.message)
        raw = resp.raw
        if raw is not None and (resp.provider != "scripted" or message is not resp.message):
            raw = redact(raw, secrets.names(None))  # a script's raw turn is its spec: secret only if the turn is
        wire = resp.wire if resp.wire is None else redact_wire(resp.wire, secrets.names(None), _texts(resp.message),
                                                               split=message is not resp.message)
        if message is not resp.message or raw is not resp.raw or wire is not resp.wire:  # copy only if masked
            event.response = replace(resp, message=message, raw=raw, wire=wire)
    elif cls is CallValidated or cls is ApprovalResolved:
        assert isinstance(event, CallValidated | ApprovalResolved)
        call = calls.get(event.call_id)
        event.arguments = secrets.arguments(
            event.call_id, call.name if call is not None else "", event.arguments, edited=cls is ApprovalResolved)
        if isinstance(event, ApprovalResolved) and event.value is not None:
            event.value = redact(event.value)
    for name in TEXT_FIELDS[cls]:
        text = getattr(event, name)
        if isinstance(text, str):
            setattr(event, name, redact_text(text))


def _texts(message: Any) -> list[str]:
    """The parts of an answer that can carry a secret by its shape (text, refusals, call arguments), whole."""
    return [str(getattr(p, "text", None) or getattr(p, "arguments_raw", None) or "") for p in message.parts
            if getattr(p, "kind", "") in ("text", "refusal", "tool_call")]
