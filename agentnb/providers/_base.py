"""What a model is to the loop: one I/O seam, :meth:`Model.respond`.

A model receives a :class:`~agentnb._request.ModelRequest` (the canonical conversation, the tools offered, the
typed options, the pass-through settings; see :mod:`agentnb._request`) and returns an iterator. A streaming model
yields :class:`~agentnb._request.TextDelta` and :class:`~agentnb._request.ArgumentsDelta` items as fragments
arrive, then the final :class:`~agentnb._messages.ModelTurn`; a non-streaming model yields only the final turn.
The driver pulls the iterator lazily, so one ``run.step()`` can be one merged fragment.

A model that holds a credential (an API key, a token) declares it with ``credentials() -> list[str]``
(:class:`~agentnb._redact.HoldsCredentials`); the loop registers what it returns, so a provider error that
echoes the key is masked whatever the key's shape.

Failures are exceptions: :class:`~agentnb.exceptions.ModelError` (with an HTTP status and whether a retry
may help) and :class:`~agentnb.exceptions.StreamInterrupted` for a stream that broke before its done signal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol, runtime_checkable

from .._request import ModelRequest, StreamItem


@runtime_checkable
class Model(Protocol):
    """Anything that answers a :class:`~agentnb._request.ModelRequest`.

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
