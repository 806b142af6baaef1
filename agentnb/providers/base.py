"""What a model is to the loop: one I/O seam, :meth:`Model.respond`.

A model receives a :class:`ModelRequest` (the canonical conversation, the tools offered, the settings) and
returns an iterator. A streaming model yields :class:`TextDelta` and :class:`ArgumentsDelta` items as
fragments arrive, then the final :class:`~agentnb.messages.ModelTurn`; a non-streaming model yields only the
final turn. The driver pulls the iterator lazily, so one ``run.step()`` can be one merged fragment.

A model that holds a credential (an API key, a token) declares it with ``credentials() -> list[str]``
(:class:`~agentnb.redact.HoldsCredentials`); the loop registers what it returns, so a provider error that
echoes the key is masked whatever the key's shape.

Failures are exceptions: :class:`~agentnb.exceptions.ModelError` (with an HTTP status and whether a retry
may help) and :class:`~agentnb.exceptions.StreamInterrupted` for a stream that broke before its done signal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..events import ToolInfo
from ..messages import Message, ModelTurn


@dataclass(slots=True)
class ModelRequest:
    """Everything a model needs for one turn."""

    messages: Sequence[Message]
    """The conversation; a read-only view, valid after the call too (agentnb only appends)."""
    tools: Sequence[ToolInfo]
    """The tools offered (empty when finalizing)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Request settings: temperature, max_tokens, tool_choice, parallel_tool_calls, ..."""
    finalize: bool = False
    run_id: str = ""
    turn: int = 0


# Stream items are made once per fragment (a 1 MB argument in 8-byte fragments is 131,072 of them) and never
# changed after; a non-frozen slotted dataclass is built in about a quarter of the time of a frozen one
# (bench/stream_assembly.py), so they skip the cost of frozen __init__ like the per-turn records do.


@dataclass(slots=True)
class TextDelta:
    """A fragment of answer text."""

    fragment: str


@dataclass(slots=True)
class ArgumentsDelta:
    """A fragment of one call's argument text; ``index`` tells parallel calls apart."""

    index: int
    fragment: str
    call_id: str | None = None
    name: str | None = None


StreamItem = TextDelta | ArgumentsDelta | ModelTurn


@runtime_checkable
class Model(Protocol):
    """Anything that answers a :class:`ModelRequest`.

    Attributes:
        provider: the wire API tag, as on the turns it makes (``"scripted"``, ``"openai_chat"``,
            ``"openai_responses"``, ``"anthropic"``, ``"gemini"``; ``"fallback"`` for a chain of models).
        name: the model name.
    """

    provider: str
    name: str

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Yield stream items and end with the final turn; raise ``ModelError`` on failure."""
        ...


@runtime_checkable
class Seekable(Protocol):
    """A model whose answers are a sequence it can be moved along (a script, a replayed cassette).

    A resumed run, or a fork of a run (``Run.fork``), calls ``seek(run_id, position)`` so that the model's
    next answer for ``run_id`` is its ``position``-th (0-based, counting every request of the run, retried
    ones included). Models that answer live need nothing of the kind and do not implement it.

    Example:
        >>> import agentnb as anb
        >>> isinstance(anb.ScriptedModel([{"text": "hi"}]), Seekable)
        True
    """

    def seek(self, run_id: str, position: int) -> None:
        """Answer ``run_id``'s next request with the answer at ``position``."""
        ...


WireKind = Literal["request", "response", "event"]
"""What a wire callback receives: the request ``body`` sent, a whole ``response``, or one raw stream ``event``."""


@runtime_checkable
class WireObservable(Protocol):
    """A model that sends wire requests itself (an SDK-backed provider model) and reports them to callbacks.

    ``on_wire(callback)`` registers ``callback(kind, payload)`` (see :data:`WireKind`) and returns a function
    that removes it. The recorder uses it to write ``wire_*`` lines next to the canonical ones.
    """

    def on_wire(self, callback: Callable[[WireKind, Any], None]) -> Callable[[], None]:
        """Call ``callback`` with what goes over the wire; returns the function that stops it."""
        ...


class HistoryView(Sequence[Message]):
    """A fixed-length, read-only view of an append-only message list (O(1) to make, no copy)."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Message], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._items[: self._n][i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("history index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._n):
            yield items[i]

    def __repr__(self) -> str:
        return f"HistoryView({self._n} messages)"
