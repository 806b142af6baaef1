"""The engine's rules for one call of a turn: parse, validate, ask, start, and resolve an approval.

Each function reads a folded :class:`RunState` and returns the event that moves the call on; none writes to
the state. What a decision computes that a later step needs (the idempotency key a tool's own key function
names, the request hash a call starts with) travels in the event it emits, and the fold keeps it.

User code called on the way -- approval policies, idempotency-key functions, argument and output validators --
gets copies of the call and its arguments and a read-only view of the state (:mod:`.view`), so it can judge
a call but not change the one that runs, what the log records of it, or the budgets in force. The copies are
made only when such code is there: a call without a policy or key function costs nothing more.
"""

from __future__ import annotations

import json
from copy import deepcopy
from dataclasses import replace
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError

from .. import _binding as binding
from .._outcomes import describe_errors
from .._states import LoopState, S
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    CallParsed,
    CallRejected,
    CallValidated,
    GuardTripped,
    OutputValidated,
    ToolStarted,
)
from ..exceptions import InvalidArguments
from .actions import Emit, EngineConfig, ToolSpec
from .build import UNSTAMPED, finished
from .fold import APPROVAL_OVERRIDE, HEADLESS, TOO_DEEP, CallState, RunState
from .view import StateView

_FLAT = frozenset({str, int, float, bool, type(None)})


def isolated(arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` as user code may receive them: the dict itself when no value can be changed in place.

    A validator receives the values of the arguments it checks, and one that changes a list or a dict in place
    would change the call the log recorded (``CallParsed``: what the model sent); a key function receives the
    whole dict, which becomes ``CallValidated.arguments``. Flat arguments (text, numbers, booleans, nulls)
    cannot be changed through their values; a key function, which receives the dict itself, gets a new dict
    of them (``dict(isolated(arguments))``).
    """
    for value in arguments.values():
        if type(value) not in _FLAT:
            return deepcopy(arguments)
    return arguments


def arguments_digest(name: str, arguments: dict[str, Any] | None) -> str:
    """SHA-256 of a call's tool name and canonical arguments (key order and spacing do not matter)."""
    return binding.sha256(binding.canonical([name, arguments]))


def operation_id(rs: RunState) -> str:
    """The run's operation id (its run id unless the run was started with another)."""
    return str(rs.settings.get("operation_id") or rs.run_id)


def fork_of(rs: RunState) -> dict[str, Any] | None:
    """A fork's lineage and effect policy (``parent``, ``at``, ``effects``, ``reads``, ``rerun``); None: no fork."""
    fork = rs.settings.get("fork")
    return fork if isinstance(fork, dict) else None


def reruns(rs: RunState, name: str) -> bool:
    """Whether this run is a fork told to do tool ``name``'s effects again (``Run.fork(rerun=[...])``)."""
    fork = fork_of(rs)
    return fork is not None and name in fork.get("rerun", ())


def call_key(rs: RunState, cfg: EngineConfig, c: CallState, arguments: dict[str, Any] | None = None) -> str | None:
    """The idempotency key of a call: the tool's own key function, or operation id + tool + arguments.

    Keys serve the effect ledger, so they are made for side-effecting tools and for tools that ask for a
    context (to hand the key downstream); a read-only tool's calls go without. ``arguments`` default to the
    call's own.
    """
    if c.idempotency_key:
        return c.idempotency_key  # a retry keeps its key; a key function named it at validation
    tool = cfg.registry.get(c.name)
    if tool is None or not (tool.side_effects or tool.context_param or tool.key_fn):
        return None
    arguments = c.arguments if arguments is None else arguments
    if reruns(rs, c.name):  # a fork told to do this tool's effects again: keys of its own
        if tool.key_fn is not None:
            return f"{tool.key_for(dict(isolated(arguments or {})))}~rerun~{rs.run_id}"
        return binding.idempotency_key(f"{operation_id(rs)}~rerun~{rs.run_id}", c.name, arguments)
    if tool.key_fn is not None:
        return tool.key_for(dict(isolated(arguments or {})))
    if tool.idempotency == "call":  # identical calls are distinct effects: the call is the intent
        return binding.idempotency_key(operation_id(rs), c.name, {"call_id": c.call_id})
    return binding.idempotency_key(operation_id(rs), c.name, arguments)


def request_hash(rs: RunState, cfg: EngineConfig, c: CallState, key: str | None = None) -> str:
    """The request hash of a call, from trusted state (the model's turn, the arguments, the loop's tools)."""
    tool = cfg.registry.get(c.name)
    resp = rs.response
    return binding.request_sha256(
        provider=resp.provider if resp else "", response_id=resp.response_id if resp else None,
        call_id=c.call_id, operation_id=operation_id(rs), idempotency_key=key or c.idempotency_key, tool=c.name,
        schema_version=tool.schema_version if tool else "", policy_revision=str(rs.settings.get("policy_revision", "")),
        arguments=c.arguments,
    )


@lru_cache(maxsize=64)
def bound_hashes(call_id: str, status: str, content: str, request: str) -> tuple[str, str]:
    """The result hash of a call's result and the binding of it to ``request`` (see :mod:`agentnb._binding`).

    A pure function, memoized: the hashes made when a result is recorded are the ones checked before the
    results are bound, so the check of a live turn costs a lookup, not two hashes.
    """
    result = binding.result_sha256(call_id, status, content)
    return result, binding.binding_sha256(request, result)


def verify_bindings(rs: RunState, cfg: EngineConfig, *, recompute: bool = False) -> str | None:
    """Recompute every recorded binding of the turn; a description of the first mismatch, or None.

    A result's request hash is checked against the one its ``ToolStarted`` recorded (made from trusted state
    when the call started); ``recompute=True`` (a resumed run) makes it again from the state instead.
    """
    for c in rs.calls.values():
        if c.binding is None or c.result is None:
            continue
        request, result, bound = c.binding
        expected = request_hash(rs, cfg, c) if recompute or not c.expected_request else c.expected_request
        if request != expected:
            return f"the result recorded for call {c.call_id!r} was made for a different call (request hash)"
        result_now, bound_now = bound_hashes(c.call_id, c.result.status, c.result.content, request)
        if result != result_now:
            return f"the result of call {c.call_id!r} changed after it was recorded (result hash)"
        if bound != bound_now:
            return f"the binding of call {c.call_id!r} does not match its request and result"
    return None


# -- parse and validate --------------------------------------------------------------------------------


def parse(c: CallState, position: int) -> Emit:
    """Read a call's arguments as a JSON object, or say why they are not one (they are never repaired)."""
    error = None
    if c.part.arguments is None:
        try:
            value = json.loads(c.part.arguments_raw)
            error = f"expected a JSON object, got {type(value).__name__}" if not isinstance(value, dict) else TOO_DEEP
        except RecursionError:
            error = TOO_DEEP
        except ValueError as exc:
            error = str(exc)
    return Emit(CallParsed(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                           state=S.VALIDATING, call_id=c.call_id, name=c.name, index=position,
                           arguments=c.part.arguments, error=error))


def _rejected(c: CallState, reason: Any, message: str, errors: list[dict[str, Any]] | None = None,
              state: LoopState = S.VALIDATING) -> Emit:
    return Emit(CallRejected(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                             state=state, call_id=c.call_id, name=c.name, reason=reason, message=message,
                             errors=errors or []))


def output_failed(attempt: int, errors: list[dict[str, Any]], budget: str | None = None) -> Emit:
    """The run ends: its final answer did not fit the output type within the retries.

    ``FAILED``, unless the failed answer was the finalization turn's: then a budget (or another guard) ended
    the run before an answer fitted, so it is ``BUDGET_EXHAUSTED`` and ``budget`` (the guard's message) leads
    the reason.
    """
    first = errors[0] if errors else {"loc": "", "msg": "no answer"}
    last = f"last error: {first.get('loc') or '(answer)'}: {first.get('msg')}"
    if budget is not None:
        return Emit(finished(S.BUDGET_EXHAUSTED, f"{budget}; the finalization turn's answer did not fit the output "
                                                 f"type either ({attempt} attempts; {last})"))
    return Emit(finished(S.FAILED, f"the final answer did not fit the output type after {attempt} attempts ({last})"))


def _validate_output(rs: RunState, c: CallState, cfg: EngineConfig) -> Emit:
    spec = cfg.output
    assert spec is not None
    if c.output_error is not None:
        return _rejected(c, "output", c.output_error)
    attempt = rs.output_attempts + 1
    ok, value, errors = spec.check(isolated(c.arguments) if c.arguments is not None else None)
    return Emit(OutputValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                state=S.VALIDATING, ok=ok, call_id=c.call_id, output=value, errors=errors,
                                attempt=attempt, final=not ok and attempt > spec.retries))


def _check_arguments(c: CallState, tool: ToolSpec, cfg: EngineConfig) -> Emit | BaseModel:
    """The call's validated arguments object, or the rejection the model reads."""
    if c.parse_error == TOO_DEEP:  # a JSON object the value boundary refused (agentnb._messages.ToolCallPart)
        return _rejected(c, "invalid_arguments",
                         f"Invalid arguments for tool '{c.name}': {TOO_DEEP}. Send flatter arguments.",
                         [{"loc": "(arguments)", "msg": TOO_DEEP, "type": "too_deep"}])
    if c.arguments is None:
        return _rejected(c, "invalid_json", f"The arguments for tool '{c.name}' are not a valid JSON object "
                                            f"({c.parse_error}). Call the tool again with the arguments as one JSON "
                                            "object.")
    try:
        return tool.validate(isolated(c.arguments))
    except InvalidArguments as exc:  # the value boundary refused them before the schema (see agentnb._values)
        return _rejected(c, "invalid_arguments", f"Invalid arguments for tool '{c.name}':\n" + "\n".join(
            f"- {e['loc']}: {e['msg']}" for e in exc.errors), exc.errors)
    except ValidationError as exc:
        message, errors = describe_errors(c.name, exc)
        return _rejected(c, "schema", message, errors)
    except Exception as exc:  # a user validator that raised something else: still the arguments' fault
        return _rejected(c, "schema", f"Invalid arguments for tool '{c.name}': a validator raised "
                                      f"{type(exc).__name__}: {exc}",
                         [{"loc": "(arguments)", "msg": f"{type(exc).__name__}: {exc}", "type": "validator_error"}])


def validate(rs: RunState, c: CallState, cfg: EngineConfig) -> Emit:
    """Check a parsed call: a known tool, arguments that fit its schema and name its effect, who must approve."""
    if cfg.output is not None and c.name == cfg.output.name:
        if c.arguments is None:
            return _rejected(c, "invalid_json", f"The arguments for '{c.name}' are not a valid JSON object "
                                                f"({c.parse_error}). Call it again with the answer as one JSON object.")
        return _validate_output(rs, c, cfg)
    tool = cfg.registry.get(c.name)
    if tool is None:
        return _rejected(c, "unknown_tool", cfg.registry.unknown_message(c.name))
    validated = _check_arguments(c, tool, cfg)
    if isinstance(validated, Emit):
        return validated
    arguments = tool.dump(validated)
    key = None
    if tool.key_fn is not None:  # named once, here; the call starts with this key (see call_key)
        try:
            key = tool.key_for(dict(isolated(arguments)))  # a copy: these arguments are what CallValidated records
        except Exception as exc:
            return _rejected(c, "idempotency_key", f"Tool '{c.name}' could not name this call's effect (its "
                                                   f"idempotency key function raised {type(exc).__name__}: {exc}), "
                                                   "so it was not run.")
    needs, note, waived = approval_needed(tool, cfg, c, rs)
    if waived and not c.waiver_recorded:
        return Emit(GuardTripped(
            seq=-1, ts=UNSTAMPED, run_id="", turn=0,
            state=S.VALIDATING, guard=APPROVAL_OVERRIDE, limit=0.0, value=1.0, action="note",
            call_id=c.call_id,
            message=(f"the loop's approval policy waived the approval that tool {c.name!r} requires "
                     f"(risk {tool.risk!r}) for call {c.call_id!r} (override_tool_approval=True)"),
        ))
    return Emit(CallValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                              state=S.VALIDATING, call_id=c.call_id, name=c.name, arguments=arguments,
                              needs_approval=needs, approval_note=note, idempotency_key=key))


def _ask_policy(policy: Any, c: CallState, rs: RunState, who: str) -> tuple[bool, str | None]:
    """Evaluate an approval policy, failing closed: a policy that raises means a person must decide.

    The policy gets a copy of the call (its arguments deep-copied) and a read-only view of the state: what it
    writes to either changes neither what runs nor the budgets (a write to the view raises, so it asks a person).
    """
    if policy is None or isinstance(policy, bool):
        return bool(policy), None
    try:
        return bool(policy(deepcopy(c.part), StateView(rs))), None
    except Exception as exc:
        return True, f"the {who} approval policy raised {type(exc).__name__}: {exc}"


def approval_needed(tool: ToolSpec, cfg: EngineConfig, c: CallState, rs: RunState) -> tuple[bool, str | None, bool]:
    """Whether a call waits for a person: ``(needs, note, waived)``. See the precedence table in the README.

    A client-side tool always waits (the client must answer). Otherwise the tool's own rule (its ``approval``,
    or by risk: ``write``/``dangerous`` ask) and the loop's policy are both asked, and **either one** asking is
    enough: a loop policy can raise approval, never lower it. Only ``override_tool_approval=True`` lets the
    loop policy decide alone; when it then waives what the tool asked for, ``waived`` is True (and the engine
    records an ``approval_override`` event). A policy that raises counts as "ask a person", with its error in
    ``note``.
    """
    if tool.client:
        return True, None, False
    own = tool.approval if tool.approval is not None else tool.risk != "read"
    tool_needs, tool_note = _ask_policy(own, c, rs, "tool's")
    if cfg.approval is None:
        return tool_needs, tool_note, False
    loop_needs, loop_note = _ask_policy(cfg.approval, c, rs, "loop's")
    if cfg.override_tool_approval:
        return loop_needs, loop_note, tool_needs and not loop_needs
    return tool_needs or loop_needs, tool_note or loop_note, False


# -- ask, start, resolve ----------------------------------------------------------------------------------


def ask(rs: RunState, cfg: EngineConfig, c: CallState) -> Emit:
    """Ask a person about a validated call (or the client, for a client-side tool)."""
    assert c.arguments is not None
    tool = cfg.registry.get(c.name)
    return Emit(ApprovalRequested(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0,
        state=S.WAITING_APPROVAL, approval_id=f"apr_{rs.run_id}_{c.call_id}", call_id=c.call_id,
        name=c.name, arguments=c.arguments, arguments_digest=arguments_digest(c.name, c.arguments),
        risk=tool.risk if tool else "read", kind="client_result" if tool is not None and tool.client else "approval",
        ttl_s=cfg.approval_ttl, note=c.approval_note,
    ))


def start(rs: RunState, cfg: EngineConfig, c: CallState) -> Emit:
    """Start a call: its idempotency key and the request hash its result will be bound to."""
    key = call_key(rs, cfg, c)
    return Emit(ToolStarted(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                            state=S.EXECUTING, call_id=c.call_id, name=c.name, idempotency_key=key,
                            request_sha256=request_hash(rs, cfg, c, key)))


def resolved_state(rs: RunState, c: CallState) -> LoopState:
    """The loop state after a person answers ``c``.

    Still waiting while other calls wait; else back to work: an escalation's answer goes back to the next
    request, a call's to executing.
    """
    for o in rs.calls.values():
        if o.status == "awaiting_approval" and o is not c:
            return S.WAITING_APPROVAL
    return S.RESULTS_READY if c.kind == "escalation" else S.EXECUTING


def resolution(
    rs: RunState, c: CallState, decision: Any, *, by: str | None = None, note: str | None = None,
    arguments: dict[str, Any] | None = None, content: str | None = None, value: Any = None,
) -> ApprovalResolved:
    """The answer to a waiting call, with its next state (see :func:`resolved_state`)."""
    return ApprovalResolved(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                            state=resolved_state(rs, c), approval_id=c.approval_id or "", call_id=c.call_id,
                            decision=decision, by=by, note=note, arguments=arguments, content=content, value=value)


def resolve_headless(rs: RunState, c: CallState) -> Emit:
    """Nobody can answer (``headless=True``): the waiting call is denied, saying why."""
    what = {"client_result": "nobody is available to run this client-side tool",
            "outcome_unknown": "nobody is available to reconcile this call's unknown outcome",
            "fork_effect": "nobody is available to approve a new effect in this fork"}.get(
        c.kind, "nobody is available to approve it")
    if c.approval_note:
        what = f"{what} ({c.approval_note})"
    return Emit(resolution(rs, c, "denied", by=HEADLESS, note=what))




def resume_problem(rs: RunState, cfg: EngineConfig) -> str | None:
    """Why a stored run cannot go on under ``cfg`` (None: it can).

    Every call still to run must name a tool of the loop and fit its current schema, and every recorded result
    binding must match the one recomputed from the state.
    """
    for call in rs.calls.values():
        if call.status in ("valid", "approved", "running", "awaiting_approval") and call.arguments is not None:
            tool = cfg.registry.get(call.name)
            if tool is None:
                return f"call {call.call_id!r} names tool {call.name!r}, which this loop does not have"
            try:
                tool.validate(isolated(call.arguments))
            except Exception as exc:
                return f"call {call.call_id!r} no longer fits the schema of {call.name!r}: {exc}"
    return verify_bindings(rs, cfg, recompute=True) if rs.calls else None


def owed_approval(rs: RunState, cfg: EngineConfig) -> Emit | None:
    """The approval a resumed run asks for before anything runs, or None when it owes none.

    A log records what the rules said when each call was validated (``CallValidated.needs_approval``), and a
    log sealed again by whoever holds the key, or a loop resumed with ``allow_policy_change=True``, may say a
    call needs nobody where this loop's tools and approval policy now ask for a person. So every call
    validated but not started is asked about again (:func:`approval_needed`, on the state as it stands): one
    that needs a person now gets its ``ApprovalRequested``, whose ``note`` says why. A requirement is only
    ever added: a call recorded as needing approval still waits for it. A call that had started is left to
    the effect ledger (it started under the rules of its time, and whether it ran is the ledger's to say), and
    a call a person answered keeps that answer.
    """
    for c in rs.calls.values():
        if c.status != "valid" or c.needs_approval:
            continue
        tool = cfg.registry.get(c.name)
        if tool is None:  # resume_problem refuses the run before this is asked
            continue
        needs, note, _ = approval_needed(tool, cfg, c, rs)
        if needs:
            why = (f"the log recorded no approval requirement for call {c.call_id!r}, but tool {c.name!r} requires "
                   "one under this loop's tools and approval policy: asked on resume, before it runs")
            asked = ask(rs, cfg, c).event
            assert isinstance(asked, ApprovalRequested)
            return Emit(replace(asked, note=f"{why} ({note})" if note else why))
    return None


__all__ = ["approval_needed", "arguments_digest", "ask", "bound_hashes", "call_key", "fork_of", "isolated",
           "operation_id", "owed_approval", "parse", "request_hash", "reruns", "resolution", "resolve_headless",
           "resolved_state", "resume_problem", "start", "validate", "verify_bindings"]
