"""The fold half of the sans-IO core: events in, a run's state out.

Theory of operation. A run *is* its event log. :class:`RunState` is the fold of that log: applying events
one by one (each checked against the transition table in :mod:`agentnb._states`) rebuilds the conversation,
the calls of the current turn, the usage so far and the loop state. :func:`decide` looks at a ``RunState``
and says what happens next, without doing it:

- :class:`Emit` -- a decision that needs no I/O (a request is due, a call was parsed or validated, the
  results are bound, a guard tripped, the run is over): the driver appends the event as given;
- :class:`PullModel` -- read the next item of the model's answer (a fragment or the whole turn);
- :class:`RunTool` -- execute one validated call;
- :class:`Wait` -- a person has to approve or deny something; nothing happens until they do;
- :class:`Done` -- the run is in a terminal state.

Because the engine never performs I/O, each decision is testable in microseconds, and the same engine
serves live runs, replays of saved transcripts and time travel in the debugger (fold a prefix).

The fold has one function per event class (``@_rule(EventClass)``), dispatched on the event's class. What an
event means to everyone else -- the result it gives a call, how it changes the conversation -- is written once
in :mod:`.projection`; the fold applies those same answers, and the frames and the debugger read them, so no
reader interprets an event on its own.

Whatever a log holds, folding it raises one kind of error: an event the fold cannot apply -- out of order,
of another run, not allowed in the state it arrives in (:class:`~agentnb.exceptions.IllegalTransition`), about a
call the turn does not have, a result before its call started -- raises a
:class:`~agentnb.exceptions.TranscriptError` that names the event's ``seq`` and type and what was wrong
(``tests/test_fold_errors.py`` feeds the fold impossible logs to hold it to that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .._messages import Message, ModelTurn, ToolCallPart, ToolResultPart
from .._states import TRANSITIONS, LoopState, S, check_transition
from .._values import MAX_DEPTH
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallParsed,
    CallRejected,
    CallValidated,
    CompressionApplied,
    GuardTripped,
    Interjected,
    ModelRequested,
    ModelRetried,
    OutputValidated,
    ResultsBound,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolInfo,
    ToolStarted,
    TurnCompleted,
)
from ..exceptions import TranscriptError
from . import guards
from .memo import SeenIds
from .projection import (
    ANSWERS,
    CONVERSATION_STEPS,
    HEADLESS,
    Answer,
    ConversationStep,
    ResultFor,
    answer_of,
    conversation_step,
    denial_text,
    refused,
    result_from,
    result_of,
)

TOO_DEEP = f"the arguments are nested deeper than {MAX_DEPTH} levels"

APPROVAL_OVERRIDE = "approval_override"
"""The guard name of the event recorded each time a loop policy waives a tool's own approval."""


FINALIZE_PROMPT = (
    "You have reached the limit of tool calls for this request. Do not call any more tools. "
    "Answer the original request now, as well as you can, using only the information you already have; "
    "say plainly what you could not find out."
)
"""The instruction sent (as a user turn) for the tools-free finalization call."""

CallStatus = Literal[
    "unparsed", "parsed", "valid", "awaiting_approval", "approved", "running", "done"
]


@dataclass(slots=True)
class CallState:
    """One call of the current turn, as far as the log has taken it."""

    part: ToolCallPart
    status: CallStatus = "unparsed"
    arguments: dict[str, Any] | None = None
    parse_error: str | None = None
    needs_approval: bool = False
    approval_id: str | None = None
    decision: str | None = None
    result: ToolResultPart | None = None
    kind: str = "approval"
    """What the pending request asks: ``approval``, ``client_result``, ``outcome_unknown`` or ``fork_effect``."""
    idempotency_key: str | None = None
    retry_confirmed: bool = False
    """A person approved re-running a call whose outcome was unknown."""
    fork_confirmed: bool = False
    """A person approved a fork's write its parent never made (``effects="ask"``)."""
    binding: tuple[str, str, str] | None = None
    """(request, result, binding) hashes recorded when the tool finished."""
    expected_request: str | None = None
    """The request hash computed from trusted state when the call started (a cache; recomputed if absent)."""
    approval_note: str | None = None
    """Why a person must decide, when a rule could not say plainly (an approval policy raised)."""
    output_error: str | None = None
    """For a call of the output tool whose arguments did not fit: the correction the model will read."""
    waiver_recorded: bool = False
    """A loop policy waived the tool's own approval and the ``approval_override`` event is in the log."""
    request: ApprovalRequested | None = None
    """The request a person answers, while the call waits (its expiry and the digest it was asked with)."""

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.part.call_id

    @property
    def name(self) -> str:
        """The tool name the model asked for."""
        return self.part.name


@dataclass(slots=True)
class RunState:
    """The fold of a run's events. Apply events in order with :meth:`apply`; read anything off it."""

    run_id: str = ""
    state: LoopState = S.NEW
    seq: int = 0
    """The ``seq`` the next event must have."""
    turn: int = 0
    """The number of model requests so far (the current turn's number)."""
    messages: list[Message] = field(default_factory=list)
    model: str = ""
    tools: list[ToolInfo] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    response: ModelTurn | None = None
    calls: dict[str, CallState] = field(default_factory=dict)
    finalizing: bool = False
    turns_completed: int = 0
    tool_calls: int = 0
    """Calls answered so far (executed, rejected or denied)."""
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    """Retries of the current request."""
    text_length: int = 0
    argument_lengths: dict[int, int] = field(default_factory=dict)
    text_fragments: list[str] = field(default_factory=list)
    """The streamed text of the current attempt, fragment by fragment (a new list for each attempt)."""
    argument_fragments: dict[int, list[str]] = field(default_factory=dict)
    """The streamed argument text of each call of the current attempt, by index (new lists each attempt)."""
    guards: list[GuardTripped] = field(default_factory=list)
    output: str | None = None
    reason: str | None = None
    last: BaseEvent | None = None
    started_at: float | None = None
    """The run's start (epoch seconds), for the deadline."""
    now: float | None = None
    """The clock reading the driver hands the engine before it decides (the engine reads no clock)."""
    tokens_by_model: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """``{(provider, model): [input tokens, output tokens]}``, for costs (a price may name the provider)."""
    tripped: dict[str, str] = field(default_factory=dict)
    """Guards that ran out and the action in force (``finalize``, ``stop``, ``escalate``, ``note``)."""
    extensions: dict[str, int] = field(default_factory=dict)
    """Extra allowances granted by approving an escalation, per guard."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """(call signature, result digest) of every result, in order: what repetition detection reads."""
    seen: set[str] = field(default_factory=set)
    """Result digests and answer texts seen so far (what counts as new information)."""
    no_progress: int = 0
    """Turns in a row that brought no new result and no new text."""
    repeat_mark: int = 0
    """History length when repetition last tripped (a new trip needs new repeats after it)."""
    compressed_turn: int = -1
    final_output: Any = None
    """The validated final output (JSON-safe) once an ``OutputValidated`` passed (``output_type`` runs)."""
    output_ok: bool = False
    output_attempts: int = 0
    """Final answers checked against ``output_type`` so far."""
    output_failure: list[dict[str, Any]] | None = None
    """The errors of the last check when it was final (no correction owed): the run fails next."""
    tool_choice: Any = None
    """The tool choice of the current request when a per-turn policy chose it (None: the loop's settings)."""
    output_note: str | None = None
    """A correction to send with the next request (a text answer that did not fit ``output_type``)."""
    interjections: list[Message] = field(default_factory=list)
    """What a person told the model since the last request: user messages the next request sends."""
    call_ids: SeenIds = field(default_factory=SeenIds, compare=False, repr=False)
    """The ids of the calls in the conversation (a memo for giving new calls unique ids)."""

    def apply(self, event: BaseEvent, *, checked: bool = False) -> None:
        """Apply one event: check it against the transition table, then fold it in.

        ``checked=True`` skips the transition check, for a driver that made it already (before storing the
        event: see ``agentnb._driver.journal.Journal.write``); the ``seq`` and ``run_id`` checks always run.

        Raises:
            IllegalTransition: when the event is not allowed in the current state.
            TranscriptError: when the event's ``seq`` or ``run_id`` does not continue this run, or the event
                cannot be applied (a call the turn does not have, a result before its call started, ...).
                Either names the event's ``seq`` and type.
        """
        if event.seq != self.seq:
            raise refused(event, f"expected seq {self.seq} (events are numbered 0, 1, 2, ... in the order of the run)")
        if self.run_id and event.run_id != self.run_id:
            raise refused(event, f"it is an event of run {event.run_id!r}, in run {self.run_id!r}")
        if not checked:
            etype = event.type
            allowed = TRANSITIONS[self.state].get(etype)
            if allowed is None or event.state not in allowed:
                check_transition(self.state, etype, event.state, seq=event.seq)  # raises, naming both
        try:
            _FOLD[type(event)](self, event)
        except TranscriptError:
            raise
        except (AttributeError, AssertionError, IndexError, KeyError, TypeError, ValueError) as exc:
            # The rules refuse what a log can get wrong by name; this is the net under them, so that a log
            # made by hand with fields of the wrong type still gives an error that names the event.
            raise refused(event, f"it cannot be folded ({type(exc).__name__}: {exc})") from exc
        self.state = event.state
        self.seq += 1
        self.last = event

    @classmethod
    def fold(cls, events: Iterable[BaseEvent]) -> RunState:
        """The state after applying ``events`` from the start.

        Raises:
            TranscriptError: naming the first event that cannot be applied (see :meth:`apply`).

        Example:
            >>> import agentnb as anb
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> events = loop.start("Paris?").run().events
            >>> RunState.fold(events).state
            <LoopState.COMPLETED: 'COMPLETED'>
            >>> try:
            ...     RunState.fold([events[0], events[0]])
            ... except anb.TranscriptError as exc:
            ...     print(exc.seq, exc.event_type)
            0 RunStarted
        """
        rs = cls()
        for ev in events:
            rs.apply(ev)
        return rs

    # -- queries ---------------------------------------------------------------------------------------

    def result_for(self, call_id: str) -> ToolResultPart | None:
        """The result bound to a call of the current turn so far (None: none yet, or no such call)."""
        c = self.calls.get(call_id)
        return c.result if c is not None else None

    def pending_approvals(self) -> list[CallState]:
        """Calls waiting for a person, in the model's order."""
        return [c for c in self.calls.values() if c.status == "awaiting_approval"]

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens so far."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class FoldRule:
    """Everything the engine says about one event class: how it folds, and what it means to readers."""

    apply: Callable[[RunState, Any], None]
    """Fold the event into the state (the transition is checked before)."""
    conversation: Callable[[Any, ResultFor], ConversationStep | None] | None = None
    """How the event changes the conversation (None: it never does)."""
    answer: Callable[[Any], Answer | None] | None = None
    """The result the event gives its call (None: it never answers one)."""


FOLD_RULES: dict[type[BaseEvent], FoldRule] = {}
"""The fold rule of every event class (filled by :func:`_rule`; a test checks every class of the union has one)."""


def _rule(cls: type[Any]) -> Callable[[Callable[[RunState, Any], None]], Callable[[RunState, Any], None]]:
    """Register the fold function of ``cls``, with what the projection says the class means."""

    def register(fn: Callable[[RunState, Any], None]) -> Callable[[RunState, Any], None]:
        FOLD_RULES[cls] = FoldRule(fn, CONVERSATION_STEPS.get(cls), ANSWERS.get(cls))
        return fn

    return register


def _call(rs: RunState, ev: BaseEvent, call_id: str) -> CallState:
    """The call of the current turn that ``ev`` is about; refused when the turn has no such call."""
    c = rs.calls.get(call_id)
    if c is None:
        known = ", ".join(repr(k) for k in rs.calls) or "none"
        raise refused(ev, f"call {call_id!r} is not a call of this turn (turn {rs.turn}; its calls: {known})")
    return c


def _converse(rs: RunState, ev: BaseEvent) -> None:
    """Apply the event's conversation step (a replacement starts a new list: time travel keeps the old one)."""
    step = conversation_step(ev, rs.result_for)
    if step is None:
        return
    if step.replaces:
        rs.messages = list(step.messages)
    else:
        rs.messages.extend(step.messages)


# -- the fold, one function per event class -----------------------------------------------------------


@_rule(RunStarted)
def _f_run_started(rs: RunState, ev: RunStarted) -> None:
    rs.run_id = ev.run_id
    _converse(rs, ev)
    rs.model = ev.model
    rs.tools = list(ev.tools)
    rs.tool_names = [t.name for t in ev.tools]
    rs.settings = dict(ev.settings)
    rs.started_at = ev.ts.timestamp()


@_rule(ModelRequested)
def _f_model_requested(rs: RunState, ev: ModelRequested) -> None:
    rs.output_note = None
    rs.interjections = []  # they went out with this request (its new_messages)
    rs.tool_choice = ev.tool_choice
    _converse(rs, ev)
    for guard in [g for g, action in rs.tripped.items() if action == "note"]:
        del rs.tripped[guard]  # the note went out with this request
    rs.turn = ev.turn
    rs.finalizing = ev.finalize
    rs.response = None
    rs.calls = {}
    rs.retries = 0
    _new_attempt(rs)


def _new_attempt(rs: RunState) -> None:
    """A request (or its retry) starts: the streamed text and arguments start again, in new lists."""
    rs.text_length = 0
    rs.argument_lengths = {}
    rs.text_fragments = []
    rs.argument_fragments = {}


@_rule(TextMerged)
def _f_text_merged(rs: RunState, ev: TextMerged) -> None:
    rs.text_length = ev.length
    rs.text_fragments.append(ev.fragment)


@_rule(ArgumentsMerged)
def _f_arguments_merged(rs: RunState, ev: ArgumentsMerged) -> None:
    rs.argument_lengths[ev.index] = ev.length
    frags = rs.argument_fragments.get(ev.index)
    if frags is None:
        frags = rs.argument_fragments[ev.index] = []
    frags.append(ev.fragment)


@_rule(ModelRetried)
def _f_model_retried(rs: RunState, ev: ModelRetried) -> None:
    rs.retries = ev.attempt
    _new_attempt(rs)


@_rule(TurnCompleted)
def _f_turn_completed(rs: RunState, ev: TurnCompleted) -> None:
    resp: ModelTurn = ev.response
    rs.response = resp
    _converse(rs, ev)
    rs.turns_completed += 1
    rs.input_tokens += resp.usage.input_tokens
    rs.output_tokens += resp.usage.output_tokens
    used = rs.tokens_by_model.setdefault((resp.provider, resp.model), [0, 0])
    used[0] += resp.usage.input_tokens
    used[1] += resp.usage.output_tokens
    rs.calls = {p.call_id: CallState(part=p) for p in resp.message.tool_calls}
    text = resp.message.text
    if text and text not in rs.seen:
        rs.seen.add(text)
        rs.no_progress = -1  # this turn brought something new; ResultsBound settles the count


@_rule(CallParsed)
def _f_call_parsed(rs: RunState, ev: CallParsed) -> None:
    c = _call(rs, ev, ev.call_id)
    c.status = "parsed"
    c.arguments = ev.arguments
    c.parse_error = ev.error


@_rule(CallValidated)
def _f_call_validated(rs: RunState, ev: CallValidated) -> None:
    c = _call(rs, ev, ev.call_id)
    c.status = "valid"
    c.arguments = ev.arguments
    c.needs_approval = ev.needs_approval
    c.approval_note = ev.approval_note
    c.idempotency_key = ev.idempotency_key


def _answer(rs: RunState, c: CallState, ev: BaseEvent) -> None:
    c.status = "done"
    c.result = result_of(ev, c.part)
    rs.tool_calls += 1


@_rule(CallRejected)
def _f_call_rejected(rs: RunState, ev: CallRejected) -> None:
    _answer(rs, _call(rs, ev, ev.call_id), ev)


@_rule(ApprovalRequested)
def _f_approval_requested(rs: RunState, ev: ApprovalRequested) -> None:
    if ev.kind == "escalation":  # a guard asks a person, not a call: track it as a pseudo-call
        rs.calls[ev.call_id] = CallState(
            part=ToolCallPart(call_id=ev.call_id, name=ev.name, arguments_raw="{}", arguments=ev.arguments),
            status="parsed", arguments=ev.arguments,
        )
    c = _call(rs, ev, ev.call_id)
    c.status = "awaiting_approval"
    c.approval_id = ev.approval_id
    c.request = ev
    c.kind = ev.kind
    if ev.idempotency_key:
        c.idempotency_key = ev.idempotency_key


@_rule(ApprovalResolved)
def _f_approval_resolved(rs: RunState, ev: ApprovalResolved) -> None:
    c = _call(rs, ev, ev.call_id)
    if c.status != "awaiting_approval":
        raise refused(ev, f"call {ev.call_id!r} is not waiting for approval (it is {c.status})")
    c.decision = ev.decision
    if c.kind == "escalation":
        c.status = "done"
        guard = c.name
        if ev.decision == "approved":
            rs.extensions[guard] = rs.extensions.get(guard, 0) + 1
            rs.tripped.pop(guard, None)
            if guard in ("repetition", "no_progress"):
                rs.repeat_mark = len(rs.history)
        else:
            rs.tripped[guard] = "finalize"
        return
    if answer_of(ev) is not None:  # denied, or a result submitted: that is the call's answer
        _answer(rs, c, ev)
        return
    c.status = "approved"
    if c.kind == "outcome_unknown":
        c.retry_confirmed = True
    elif c.kind == "fork_effect":
        c.fork_confirmed = True
    if ev.arguments is not None:
        c.arguments = ev.arguments
        if c.kind != "outcome_unknown":  # new arguments, new intent: the key is made again when it starts
            c.idempotency_key = None


@_rule(ToolStarted)
def _f_tool_started(rs: RunState, ev: ToolStarted) -> None:
    c = _call(rs, ev, ev.call_id)
    c.status = "running"
    c.idempotency_key = ev.idempotency_key
    c.expected_request = ev.request_sha256


@_rule(ToolFinished)
def _f_tool_finished(rs: RunState, ev: ToolFinished) -> None:
    c = _call(rs, ev, ev.call_id)
    if c.status == "done":
        raise refused(ev, f"a second result for call {ev.call_id!r} (it has one already)")
    if c.status != "running":
        raise refused(ev, f"a result for call {ev.call_id!r}, which has not started (it is {c.status}; "
                          "a ToolStarted comes first)")
    if ev.call_binding_sha256:  # a missing half reads as "" and fails the check, as a wrong one does
        c.binding = (ev.request_sha256 or "", ev.result_sha256 or "", ev.call_binding_sha256)
    _answer(rs, c, ev)


@_rule(ResultsBound)
def _f_results_bound(rs: RunState, ev: ResultsBound) -> None:
    if not ev.call_ids:  # a paused turn sent back as it is: no result message, no progress counted
        return
    _converse(rs, ev)
    new = rs.no_progress < 0
    for cid in ev.call_ids:
        c = rs.calls[cid]
        content = c.result.content if c.result is not None else ""
        dg = guards.digest(content)
        rs.history.append((guards.signature(c.name, c.arguments, c.part.arguments_raw), dg))
        if dg not in rs.seen:
            rs.seen.add(dg)
            new = True
    rs.no_progress = 0 if new else max(0, rs.no_progress) + 1


@_rule(GuardTripped)
def _f_guard_tripped(rs: RunState, ev: GuardTripped) -> None:
    rs.guards.append(ev)
    if ev.guard == APPROVAL_OVERRIDE:  # a record, not a limit: nothing to tell the model, nothing to stop
        _call(rs, ev, ev.call_id or "").waiver_recorded = True
        return
    rs.tripped[ev.guard] = ev.action
    if ev.guard in ("repetition", "no_progress"):
        rs.repeat_mark = len(rs.history)
        if ev.guard == "no_progress":
            rs.no_progress = 0


@_rule(OutputValidated)
def _f_output_validated(rs: RunState, ev: OutputValidated) -> None:
    rs.output_attempts = ev.attempt
    if ev.ok:
        rs.final_output, rs.output_ok = ev.output, True
    elif ev.final:  # no correction turn follows: the run ends FAILED on the next decision
        rs.output_failure = list(ev.errors) or [{"loc": "", "msg": "no answer"}]
    elif ev.call_id is None:  # a text answer: the correction goes out with the next request
        rs.output_note = output_correction(ev.errors)
    else:
        _call(rs, ev, ev.call_id).output_error = output_correction(ev.errors)


def output_correction(errors: list[dict[str, Any]]) -> str:
    """What the model reads when its final answer does not fit the output type."""
    lines = "\n".join(f"- {e.get('loc') or '(answer)'}: {e.get('msg')}" for e in errors)
    return f"The final answer does not match the required output schema:\n{lines}\nFix these and answer again."


@_rule(CompressionApplied)
def _f_compression_applied(rs: RunState, ev: CompressionApplied) -> None:
    _converse(rs, ev)
    rs.compressed_turn = rs.turn


@_rule(Interjected)
def _f_interjected(rs: RunState, ev: Interjected) -> None:
    rs.interjections = [*rs.interjections, Message.user(ev.text)]


@_rule(RunFinished)
def _f_run_finished(rs: RunState, ev: RunFinished) -> None:
    rs.output = ev.output
    rs.reason = ev.reason


_FOLD: dict[type[BaseEvent], Callable[[RunState, Any], None]] = {cls: r.apply for cls, r in FOLD_RULES.items()}
"""The fold function of each event class (what :meth:`RunState.apply` dispatches on)."""


__all__ = ["ANSWERS", "APPROVAL_OVERRIDE", "CONVERSATION_STEPS", "FINALIZE_PROMPT", "FOLD_RULES", "HEADLESS",
           "TOO_DEEP", "Answer", "CallState", "ConversationStep", "FoldRule", "RunState", "answer_of",
           "conversation_step", "denial_text", "output_correction", "result_from", "result_of"]
