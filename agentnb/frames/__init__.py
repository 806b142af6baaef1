"""Transcripts as tidy pandas DataFrames.

Theory of operation. A frame is a flat projection of the event log, declared as data: each column of each
frame is a :class:`Column` (name, dtype, source) in :mod:`._columns`. Building a frame takes two steps:

1. a *row builder* (:mod:`._rows`) walks each run's events once and lines up, for every row, the objects the
   columns read -- the row's own event, the events joined to it (a call's ``ToolFinished``), a part of the
   conversation, or a value that needs several events (a call's ``status``);
2. the *column builder* (:mod:`._build`) reads each declared source over those lists and turns it straight into a
   typed pandas array: nullable integers and floats, categoricals over fixed vocabularies, strings, and
   timestamps as ``datetime64[us, UTC]``.

Every frame starts with ``run_id``, ``seq`` and ``turn``: ``seq`` is the position in the run's log of the event
the row comes from (documented per frame), so any frame joins the events frame on ``(run_id, seq)``, and turns
and calls join on ``(run_id, turn)``. ``run_id`` is a categorical whose categories are every run of the
collection, in order, the same in all frames.

The frames of one transcript and of many are the same methods (:class:`Frames`): ``transcript.frames.calls()``,
``collection.frames.calls()``.

Example:
    >>> import agentnb as anb
    >>> run = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
    >>> calls = run.start("Weather?", run_id="r1").run().transcript.frames.calls()
    >>> calls[["call_id", "tool", "status"]]
      call_id         tool status
    0  call_1_1  get_weather     ok
    1  call_1_2  get_weather     ok
    2  call_1_3  get_weather     ok
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._engine.prices import PriceTable, resolve
from ..providers._prices import price_table
from ._builder import build, conform, empty, events_with_payload
from ._columns import FRAME_NAMES, FRAMES, Column, Dtype

if TYPE_CHECKING:
    import pandas as pd

    from ..events import BaseEvent

Prices = Mapping[str, Sequence[float]]
"""``{model: (usd per million input tokens, usd per million output tokens)}``; keys are a model name or
``provider:model`` (see :mod:`agentnb._engine.prices`)."""


class LabelBook(Protocol):
    """Where labels live (an :class:`agentnb.Labels`): what :meth:`Frames.labels` reads."""

    def frame(self, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """The labels of ``run_ids`` as a DataFrame keyed like the frames."""
        ...


class Frames:
    """The frames of one run or of many.

    ``events``, ``turns``, ``calls``, ``messages``, ``approvals``, ``guards``, ``compressions``; each call builds
    a fresh DataFrame (a live run may still be growing).

    Args:
        get: ``get(name, payload)`` returns the base frame ``name`` (see :func:`build`).

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> frames = run.start("Paris?").run().transcript.frames
        >>> len(frames.turns()), frames.turns()["finish_reason"].tolist()
        (2, ['tool_calls', 'stop'])
    """

    def __init__(self, get: Callable[[str, bool], pd.DataFrame]) -> None:
        self._get = get

    @classmethod
    def of_runs(cls, runs: Callable[[], Sequence[Sequence[BaseEvent]]],
                run_ids: Callable[[], Sequence[str]] | None = None) -> Frames:
        """Frames built from event lists (``runs()`` is called on every frame, so live runs are current)."""

        def get(name: str, payload: bool) -> pd.DataFrame:
            ids = run_ids() if run_ids is not None else None
            if payload:
                return events_with_payload(runs(), ids)
            return build(name, runs(), run_ids=ids)

        return cls(get)

    def __repr__(self) -> str:
        return f"<agentnb.Frames {', '.join(FRAME_NAMES)}>"

    def events(self, *, payload: bool = False) -> pd.DataFrame:
        """One row per event: ``run_id, seq, turn, ts, type, state, call_id, name`` (+ ``payload``).

        Args:
            payload: add ``payload``, each event's own fields as JSON text (slower: it serializes every event).
                HTTP captures (a turn's ``response.wire``, a failed request's ``wire`` on ``ModelRetried`` and
                ``RunFinished``) are left out; ``events_with_payload(runs, wire=True)`` keeps them.
        """
        return self._get("events", payload)

    def turns(self, *, prices: Prices | None = None, price_table: PriceTable | bool = True) -> pd.DataFrame:
        """One row per model request: answer, latency, tokens, finish reason, calls, retries, cost.

        ``cost_usd`` is priced as :class:`~agentnb.Budget` prices a turn for ``max_cost`` (one rule,
        :func:`agentnb._engine.prices.resolve`): pass the budget's ``prices`` (and ``price_table``) to see the
        dollars the run counted. A turn nothing prices keeps a null cost.

        Args:
            prices: ``{model: (dollars per million input tokens, dollars per million output tokens)}``, the
                unit providers publish and :class:`~agentnb.Budget` takes; keys are a model name or
                ``provider:model``, and a dated snapshot finds its alias's price. They win over the table.
            price_table: True (agentnb's maintained table, as a ``Loop`` uses by default), False (``prices``
                alone) or a :class:`~agentnb._engine.prices.PriceTable`.

        Example:
            >>> import agentnb as anb
            >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> turns = run.start("Paris?").run().transcript.frames.turns(prices={"story:weather": (1.0, 4.0)})
            >>> bool((turns["cost_usd"] > 0).all())
            True
        """
        df = self._get("turns", False)
        df["cost_usd"] = cost(df, prices or {}, price_table)
        return df

    def calls(self, *, flatten_arguments: bool = False) -> pd.DataFrame:
        """One row per tool call: tool, arguments, status, approval, timing, error, result size.

        Args:
            flatten_arguments: add one ``arg_<key>`` column per top-level argument key (object dtype).
        """
        df = self._get("calls", False)
        if flatten_arguments:
            df = flatten(df)
        return df

    def messages(self) -> pd.DataFrame:
        """One row per part of every message that joined the conversation."""
        return self._get("messages", False)

    def approvals(self) -> pd.DataFrame:
        """One row per approval request, with the decision, who made it and how long it took."""
        return self._get("approvals", False)

    def guards(self) -> pd.DataFrame:
        """One row per guard trip."""
        return self._get("guards", False)

    def compressions(self) -> pd.DataFrame:
        """One row per compression of the history."""
        return self._get("compressions", False)

    def labels(self, book: LabelBook) -> pd.DataFrame:
        """The labels ``book`` holds for these runs, keyed like the frames (see :mod:`agentnb._labels`).

        Example:
            >>> import agentnb as anb, tempfile, os
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> t = loop.start("Paris?", run_id="r1").run().transcript
            >>> book = anb.Labels(os.path.join(tempfile.mkdtemp(), "labels.jsonl"))
            >>> _ = book.add(t, call_id="call_1_1", tag="good")
            >>> t.frames.labels(book).merge(t.frames.calls(), on=["run_id", "call_id"])[["tag", "tool"]]
                tag         tool
            0  good  get_weather
        """
        run_ids = [str(r) for r in self._get("events", False)["run_id"].cat.categories]
        return book.frame(run_ids)

    def frame(self, name: str) -> pd.DataFrame:
        """A frame by name (``"calls"`` ...)."""
        if name not in FRAMES:
            raise KeyError(f"no frame {name!r}; frames: {', '.join(FRAMES)}")
        return self._get(name, False)


def cost(turns: pd.DataFrame, prices: Prices, table: PriceTable | bool = True) -> Any:
    """``cost_usd`` of each turn: ``prices`` first, then ``table``, by the rule the run's cost limit applies.

    Each turn is priced by :func:`agentnb._engine.prices.resolve`, as ``Budget.price`` prices it for
    ``max_cost``: the same ``prices`` and table give the same dollars. Null for a turn nothing prices.
    """
    import numpy as np
    import pandas as pd

    found = price_table(table)
    # a few (provider, model) pairs over many turns: resolve each pair once, then spread by its code (C loops)
    pcodes, providers = pd.factorize(turns["provider"])
    mcodes, models = pd.factorize(turns["model"])
    pair = pcodes.astype(np.int64) * (len(models) + 1) + mcodes
    pair[(pcodes < 0) | (mcodes < 0)] = -1  # a request that got no answer has no provider or model
    uniq, where = np.unique(pair, return_inverse=True)
    rates = np.full((len(uniq), 2), np.nan)
    for k, code in enumerate(uniq.tolist()):
        if code >= 0:
            price = resolve(prices, str(providers[code // (len(models) + 1)]), str(models[code % (len(models) + 1)]),
                            found)
            if price is not None:
                rates[k] = price
    per_turn = rates[where.reshape(-1)] if len(uniq) else np.empty((0, 2))
    p_in = pd.Series(per_turn[:, 0], index=turns.index, dtype="Float64")
    p_out = pd.Series(per_turn[:, 1], index=turns.index, dtype="Float64")
    out = (turns["input_tokens"].astype("Float64") * p_in + turns["output_tokens"].astype("Float64") * p_out) / 1e6
    return out.astype(pd.Float64Dtype())


def flatten(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` with one ``arg_<key>`` column per top-level key of the arguments."""
    import pandas as pd

    parsed = [json.loads(a) if isinstance(a, str) else {} for a in calls["arguments"].tolist()]
    keys = sorted({k for a in parsed if isinstance(a, dict) for k in a})
    extra = {f"arg_{k}": pd.Series([a.get(k) if isinstance(a, dict) else None for a in parsed],
                                   index=calls.index, dtype=object) for k in keys}
    return pd.concat([calls, pd.DataFrame(extra, index=calls.index)], axis=1) if extra else calls


__all__ = [
    "FRAMES", "FRAME_NAMES", "Column", "Dtype", "Frames", "LabelBook", "Prices", "build", "conform", "cost", "empty",
    "events_with_payload", "flatten",
]
