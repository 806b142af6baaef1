"""FallbackModel: when a model fails before it produced anything, the next one answers.

Theory of operation. Each request goes to the first model; if it raises a
:class:`~agentnb.exceptions.ModelError` before yielding its first stream item (a 503, a rate limit, a
connection error, a 400 for a request that provider refuses), the same request goes to the next model, and
so on. Once a model has produced output, its answer is the turn: a stream that breaks after that is
INCOMPLETE and never re-run elsewhere, which could duplicate text already shown or tool calls already
parsed. When every model fails, the last error is raised (with the others in its message), so the loop's
retry policy applies to the whole chain.

Each model parses its own answer with its own adapter, so the turn records the provider that actually
answered (``ModelTurn.provider`` is its wire API tag, ``ModelTurn.model`` its model name). The next request
starts again from the first model. Continuation data (reasoning items, thinking and thought signatures) is
sent back only to the provider that produced it -- the adapters read only their own tag -- so when a turn
is answered by a provider other than the one whose continuation data is in the history, that data is
dropped. The turn records what happened in ``raw["fallback"]``: the models that failed and why, the model
that answered, and a note per provider whose continuation parts were not sent. The debugger shows ``raw``
on the turn's card, and the transcript keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._messages import ModelTurn, ReasoningPart, TextPart, ToolCallPart
from .._redact import HoldsCredentials
from .._request import ModelRequest, StreamItem
from ..exceptions import ModelError
from ._base import Model

__all__ = ["FallbackModel"]


def foreign_continuation(request: ModelRequest, provider: str) -> dict[str, int]:
    """How many continuation parts of each other provider the history holds (what ``provider`` will not get)."""
    counts: dict[str, int] = {}
    for m in request.messages:
        for p in m.parts:
            owners: list[str] = []
            if isinstance(p, ReasoningPart):
                owners = [p.provider]
            elif isinstance(p, TextPart | ToolCallPart) and p.provider_data:
                owners = list(p.provider_data)
            for owner in owners:
                if owner != provider and owner != "scripted":
                    counts[owner] = counts.get(owner, 0) + 1
    return counts


class FallbackModel:
    """Try models in order; the first that answers without failing gives the turn.

    Args:
        models: the primary first, then the backups (any :class:`~agentnb.Model`, of any provider).
        fallback_on: ``callable(error) -> bool``: whether an error moves on to the next model (default:
            every :class:`~agentnb.ModelError` raised before any output).

    Example:
        >>> import agentnb as anb
        >>> primary = anb.ScriptedModel([{"error": {"status": 503, "message": "overloaded"}}], name="primary")
        >>> backup = anb.ScriptedModel([{"text": "Backup here."}], name="backup")
        >>> run = anb.Loop(model=FallbackModel([primary, backup])).start("Hi").run()
        >>> run.output, run.events[-2].response.model
        ('Backup here.', 'backup')
        >>> run.events[-2].response.raw["fallback"]["failed"]
        [{'model': 'scripted:primary', 'status': 503, 'error': 'overloaded'}]
    """

    provider = "fallback"

    def __init__(self, models: Sequence[Model], *, fallback_on: Callable[[ModelError], bool] | None = None) -> None:
        if not models:
            raise ValueError("FallbackModel needs at least one model")
        self.models = list(models)
        self.fallback_on = fallback_on or (lambda exc: True)
        self.name = " | ".join(f"{getattr(m, 'provider', '?')}:{getattr(m, 'name', '?')}" for m in self.models)

    def __repr__(self) -> str:
        return f"FallbackModel([{self.name}])"

    def credentials(self) -> list[str]:
        """The credentials of every model in the chain (any of them may have its key echoed in an error)."""
        found: list[str] = []
        for model in self.models:
            if isinstance(model, HoldsCredentials):
                found.extend(model.credentials())
        return list(dict.fromkeys(found))

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Answer with the first model that does not fail before its first item."""
        failed: list[dict[str, Any]] = []
        last: ModelError | None = None
        for k, model in enumerate(self.models):
            label = f"{getattr(model, 'provider', '?')}:{getattr(model, 'name', '?')}"
            try:
                stream = iter(model.respond(request))
                first = next(stream)
            except StopIteration:
                last = ModelError(f"{label} answered with nothing", retryable=True)
                failed.append({"model": label, "status": None, "error": str(last)})
                continue
            except ModelError as exc:
                if not self.fallback_on(exc) or k == len(self.models) - 1:
                    if failed:
                        exc.args = (f"{exc} (after {'; '.join(f['model'] + ': ' + f['error'] for f in failed)})",)
                    raise
                failed.append({"model": label, "status": exc.status, "error": str(exc)})
                last = exc
                continue
            return self._answer(first, stream, request, model, label, failed)
        assert last is not None
        raise last

    def _answer(self, first: StreamItem, stream: Iterator[StreamItem], request: ModelRequest, model: Model,
                label: str, failed: list[dict[str, Any]]) -> Iterator[StreamItem]:
        item: StreamItem | None = first
        while item is not None:
            if isinstance(item, ModelTurn):
                yield self._note(item, request, model, label, failed)
            else:
                yield item
            item = next(stream, None)

    def _note(self, turn: ModelTurn, request: ModelRequest, model: Model, label: str,
              failed: list[dict[str, Any]]) -> ModelTurn:
        dropped = foreign_continuation(request, turn.provider)
        notes = [f"{n} continuation part(s) of {owner} were not sent to {turn.provider}"
                 for owner, n in sorted(dropped.items())]
        turn.raw = {"fallback": {"answered_by": label, "index": self.models.index(model), "failed": failed,
                                 "dropped_continuation": notes}, "response": turn.raw}
        return turn
