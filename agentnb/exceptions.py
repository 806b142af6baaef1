"""Errors raised to the programmer.

Errors a *model* should see (an unknown tool, malformed arguments, a tool that raised) are never exceptions:
they become error results sent back to the model. The exceptions below are for mistakes in how agentnb is
used, or for states a run cannot get out of by itself. Every one of them is defined in this module and drawn
here (``tests/test_exceptions.py`` checks the drawing against the classes)::

    AgentnbError
    ├── ToolDefinitionError    a Python function that cannot become a tool (bad signature, duplicate name)
    ├── RunNotPaused           approve/deny called when nothing waits for a person
    ├── ApprovalError          approve/deny naming an unknown call or one not waiting
    │   ├── ApprovalExpired    the approval's expiry passed: nothing runs
    │   └── DigestMismatch     the arguments are not the ones the approver saw
    ├── CheckpointError        a stored run that cannot be trusted (seal mismatch, truncated, missing), or a
    │                          store fault (locked, disk full, read-only) with the original error as its cause
    │   ├── RunNotFound        the store holds no run of that id
    │   └── StoreUnavailable   the store could not do it now (a connection lost, the server away, a lock or
    │                          statement timeout): nothing was done, and the same call may be made again
    ├── RunLocked              another driver holds the run's lease (or held it and its lease expired)
    ├── ResumeError            a stored run that cannot go on under the current loop (schema, policy)
    ├── TranscriptError        an event log that cannot be read back or folded: a line that is not an event,
    │   │                      or an event the run cannot have (an unknown call, a result before its start);
    │   │                      names the event's seq and type; also a trace document ``import_trace`` cannot
    │   │                      read at all (empty, not UTF-8 or JSON, no spans), naming why
    │   └── IllegalTransition  an event that the state machine does not allow in the current state
    │                          (defined in agentnb._states, beside the table it enforces)
    ├── MCPServerError         an MCP server that cannot be started or reached, that closed its connection,
    │                          or that answered with a protocol error (during a run: an error result)
    ├── MCPToolError           an MCP tool that reported a failure (``isError``; during a run: an error result)
    ├── ValueConversionError   a value that cannot enter a run (see agentnb._values); names the path inside it
    │   └── InvalidArguments   call arguments the boundary refuses (lone surrogate, too deep, non-finite)
    ├── ScanError              scanners that raised on runs, or runs a scan could not load (``anb.scan``);
    │                          names each, with its error; the other runs' results are cached
    ├── LabelError             a label that cannot be given (a call, turn or event the run does not have, nothing
    │                          said) or read back (naming the file and line)
    ├── CheckTimeout           a workshop check's call into a student's code passed its time limit (it is a
    │                          TimeoutError too)
    └── ModelError             a model call failed (carries the HTTP status and whether a retry may help)
        ├── ProviderError      a provider API call failed: the provider, its message and body, ``retry-after``
        ├── ReplayDiverged     a strict replay was asked something other than what the cassette recorded
        ├── WireFormatError    a response or stream event that does not have the provider's shape
        └── StreamInterrupted  a stream ended before the provider's done signal
            ├── ArgumentsTooLarge    one call's streamed arguments passed the adapter's byte cap
            └── StreamProtocolError  stream events that contradict each other (two ids for one call,
                                     a done event whose arguments differ from the merged fragments)

Warnings say that something is off while the run goes on; each is defined next to what warns it::

    UserWarning
    ├── UnpricedModelWarning      (agentnb._engine.guards) a budget's max_cost, but a model the run used has no price
    ├── ListenerWarning           (agentnb._driver.listeners) a run's listener raised on an event; the event is
    │                             stored, the other listeners got it, the run went on
    ├── ReplayDivergenceWarning   (agentnb.providers._scripted) a replayed cassette was asked something other than what
    │                             it recorded; its answer is played anyway
    ├── LabelsRecovered           (agentnb._label_books) a JSONL label book holds a line cut short by a crash; it
    │                             was left out (``agentnb._labels`` re-exports it)
    ├── ScanWarning               (agentnb.scanners._runner) ``anb.scan(on_error="skip")`` left out runs a scanner
    │                             raised on
    └── TranscriptRecovered       (agentnb._transcript) ``Transcript.load(recover=True)`` left out an
                                  incomplete last line
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentnbError", "ApprovalError", "ApprovalExpired", "ArgumentsTooLarge", "CheckTimeout", "CheckpointError",
    "DigestMismatch", "InvalidArguments", "LabelError", "MCPServerError", "MCPToolError", "ModelError",
    "ProviderError", "ReplayDiverged", "ResumeError", "RunLocked", "RunNotFound", "RunNotPaused", "ScanError",
    "StoreUnavailable", "StreamInterrupted", "StreamProtocolError", "ToolDefinitionError", "TranscriptError",
    "ValueConversionError", "WireFormatError"
]


class AgentnbError(Exception):
    """Base class of every agentnb error."""


class ToolDefinitionError(AgentnbError):
    """A Python callable could not be turned into a tool."""


class RunNotPaused(AgentnbError):
    """An approval was given while the run was not waiting for one."""


class ApprovalError(AgentnbError):
    """An approval or denial named a call that is not waiting for one."""


class ApprovalExpired(ApprovalError):
    """The approval's expiry passed; the call can still be denied."""


class DigestMismatch(ApprovalError):
    """The arguments waiting for approval are not the ones the approver saw."""


class CheckpointError(AgentnbError):
    """A stored run cannot be trusted: a seal does not match, an event is missing, or the run is truncated."""


class RunNotFound(CheckpointError):
    """The store holds no run of that id (nothing was ever stored for it)."""


class StoreUnavailable(CheckpointError):
    """The store could not do it now (a connection lost, the server away, a lock or statement timeout).

    Nothing was read or written, and unlike its parent it says nothing about the run: the same call may be
    made again once the store is back.
    """


class RunLocked(AgentnbError):
    """Another driver holds the run's lease: only one process (or ``Run`` object) may drive a run at a time.

    Attributes:
        run_id: the run.
        owner: who holds (or last held) the lease.
        expires: when the lease expires (epoch seconds).
        expired: True when the holder's lease has expired (it stopped without letting go): pass
            ``take_over=True`` to :meth:`agentnb.Run.resume` to take the run over.
    """

    def __init__(self, run_id: str, owner: str, expires: float, *, expired: bool) -> None:
        import datetime as _dt

        self.run_id, self.owner, self.expires, self.expired = run_id, owner, expires, expired
        when = _dt.datetime.fromtimestamp(expires, _dt.UTC).isoformat(timespec="seconds")
        if expired:
            msg = (f"run {run_id!r} was driven by {owner} whose lease expired at {when} without being released; "
                   "if that driver is gone, resume with take_over=True")
        else:
            msg = f"run {run_id!r} is being driven by {owner} (its lease expires at {when}); nothing was done"
        super().__init__(msg)


class ResumeError(AgentnbError):
    """A stored run cannot go on under the current loop (a tool's schema or the approval policy changed)."""


class TranscriptError(AgentnbError):
    """An event log could not be read back or folded: a line that is not an event, or an event the run cannot have.

    Whatever a hand-made or tampered log holds, reading it (:meth:`agentnb.Transcript.load`) or folding it
    (:meth:`agentnb.RunState.fold`, :meth:`agentnb.Transcript.at`) raises this error, never another one. So does
    :func:`agentnb.import_trace` for a trace document it cannot read at all (what it can read it imports, and
    says what it left out).

    Attributes:
        seq: the ``seq`` of the event at fault (None when the fault is not one event's, or the line had none).
        event_type: that event's type (``"ToolFinished"``), when it is known.
    """

    def __init__(self, message: str, *, seq: int | None = None, event_type: str | None = None) -> None:
        self.seq = seq
        self.event_type = event_type
        super().__init__(message)


class MCPServerError(AgentnbError):
    """An MCP server could not be started or reached, closed its connection, or answered with a protocol error.

    During a run it becomes the call's error result (the server is started again on the next call); outside a
    run (listing a server's tools) it is raised, with the server's last stderr lines when it has any.
    """


class MCPToolError(AgentnbError):
    """An MCP tool reported a failure (an ``isError`` result); its message is the server's text."""


class ScanError(AgentnbError):
    """Scanners raised on some runs, or some runs could not be loaded, during :func:`agentnb.scan`.

    Raised once every other run is scanned; with a cache, their results are kept, so the scan started again
    runs only what failed.

    Attributes:
        errors: one line per failure, naming the scanner and the run, with what it raised.
    """

    def __init__(self, message: str, *, errors: list[str] | None = None) -> None:
        self.errors = list(errors or [])
        super().__init__(message)


class LabelError(AgentnbError):
    """A label that cannot be given or read (see :mod:`agentnb._labels`); the message names what is wrong."""


class CheckTimeout(AgentnbError, TimeoutError):
    """A workshop check's call into the student's code ran past its time limit (an endless loop, a long sleep).

    See :mod:`agentnb.workshop`; it is also a :class:`TimeoutError`.
    """


class ModelError(AgentnbError):
    """A model call failed.

    Attributes:
        status: the HTTP status, when there is one (429, 500, ...).
        retryable: whether another attempt may help (rate limits, server errors, connection errors).
        wire: the HTTP exchange of the failed request when an SDK model captured it (the keys of a turn's
            ``wire``, see :mod:`agentnb.providers._capture`, plus ``provider``), else None. The loop keeps it,
            masked, on the ``ModelRetried`` or ``RunFinished`` event the failure led to.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool | None = None) -> None:
        self.status = status
        self.wire: dict[str, Any] | None = None
        self.retryable = retryable if retryable is not None else (status in (408, 409, 429) or (status or 0) >= 500)
        super().__init__(message)


class ProviderError(ModelError):
    """A provider API call failed: the HTTP status, the provider's message and body, and ``retry-after``.

    Attributes:
        provider: the wire API tag (``openai_chat``, ``anthropic``, ...).
        retry_after: seconds the server asked to wait before the next attempt (``retry-after`` header),
            or None.
        body: the provider's error body as received (a dict when it was JSON).

    Example:
        >>> err = ProviderError("Rate limit reached", status=429, provider="openai_chat", retry_after=2.0)
        >>> err.retryable, err.retry_after
        (True, 2.0)
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool | None = None,
                 provider: str = "", retry_after: float | None = None, body: Any = None) -> None:
        super().__init__(message, status=status, retryable=retryable)
        self.provider = provider
        self.retry_after = retry_after
        self.body = body


class ReplayDiverged(ModelError):
    """``ScriptedModel.replay(path, strict=True)``: the run asked something other than what the cassette recorded."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None, retryable=False)


class StreamInterrupted(ModelError):
    """A stream ended or broke before the provider's done signal; nothing in it may be executed."""

    def __init__(self, message: str = "the stream ended before the provider's done signal") -> None:
        super().__init__(message, status=None, retryable=False)


class WireFormatError(ModelError):
    """A response body or stream event that does not have the shape of the provider's wire API.

    Raised by the adapters in :mod:`agentnb.providers` for input they cannot read at all (not a JSON
    object, no ``choices``/``content``/``candidates``, a ``data:`` line that is not JSON mid-stream).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None, retryable=False)


class ArgumentsTooLarge(StreamInterrupted):
    """One call's streamed arguments grew past the adapter's byte cap; the stream is abandoned.

    Attributes:
        call_id: the call's id (may be empty when the provider has not sent one yet).
        name: the tool name.
        limit: the cap in bytes (``max_argument_bytes``).
    """

    def __init__(self, *, call_id: str, name: str, limit: int) -> None:
        self.call_id = call_id
        self.name = name
        self.limit = limit
        super().__init__(
            f"the arguments of call {call_id or '?'} ({name or '?'}) passed {limit} bytes; the stream was "
            f"abandoned (raise max_argument_bytes if such calls are expected)"
        )


class StreamProtocolError(StreamInterrupted):
    """Stream events contradicted each other, so the turn cannot be trusted (nothing in it is executed)."""


class ValueConversionError(AgentnbError):
    """A value cannot enter a run: it has no JSON form that reads back exactly (see :mod:`agentnb._values`).

    Attributes:
        path: where inside the value the problem is, as a JSON path (``$``, ``$.items[3].name``).
        problem: what is wrong there, without the path.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{problem} at {path}")


class InvalidArguments(ValueConversionError):
    """Call arguments the value boundary refuses before schema validation.

    Attributes:
        errors: one ``{"loc", "msg", "type"}`` entry per problem, in the form of schema errors.
    """

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        first = errors[0]
        loc = first["loc"]
        path = "$" if loc == "(arguments)" else "$" + loc if loc.startswith("[") else "$." + loc
        super().__init__(path, first["msg"])
