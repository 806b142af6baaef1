"""Asking the model: one request per turn, pulled one stream item per step.

The driver opens the model's answer lazily (the first pull of a turn sends the request, after any wait a
retry asked for) and turns each item into an event through the engine: text and argument fragments (masked
first: a fragment is shown as the secrets it may hold allow), the whole turn (its calls given ids unique in
the conversation by :class:`~agentnb.engine.CallIds`), or what the failure means
(:func:`~agentnb.engine.model_failed`: retry or fail, from the error, the time spent and a jitter draw).

An item whose event the store refused is kept and written on the next pull: the model is never asked twice
for an answer it gave.
"""

from __future__ import annotations

import random
import time
import traceback
import warnings
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..engine import (
    CallIds,
    arguments_merged,
    model_failed,
    model_raised,
    not_an_item,
    request_for,
    stream_broke,
    stream_ended,
    text_merged,
    turn_completed,
)
from ..engine.guards import UnpricedModelWarning, unpriced
from ..events import BaseEvent, ModelRetried
from ..exceptions import CheckpointError, ModelError, StreamInterrupted
from ..messages import ModelTurn
from ..providers.base import ArgumentsDelta, StreamItem, TextDelta

if TYPE_CHECKING:
    from ..run import Run


class ModelStream:
    """The model's answer to the current request of one run, as the run pulls it."""

    def __init__(self, run: Run) -> None:
        self.run: Run = weakref.proxy(run)  # the run owns this part: a strong reference back would be a cycle
        self.items: Iterator[StreamItem] | None = None
        self.held: StreamItem | None = None
        """A stream item pulled from the model whose event a store fault kept out (written next pull)."""
        self.ids = CallIds()
        self.t0 = 0.0
        self.retry_at = 0.0
        self.first_attempt = 0.0
        self.price_warned = False

    def close(self) -> None:
        """Close the open answer, if any (closing a broken stream must not mask what broke it)."""
        items, self.items = self.items, None
        close = getattr(items, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: S110 - what broke the stream is reported, not the close
                pass

    def pull(self) -> BaseEvent:
        """The event of the next item of the answer (sending the request first when none is open)."""
        item = self.held
        if item is None:
            return self._pull_new()
        self.held = None
        return self._record(item)

    def _record(self, item: StreamItem) -> BaseEvent:
        try:
            return self._item_event(item)
        except CheckpointError:
            self.held = item  # the model's answer is not lost: the next step writes it (never asks again)
            raise

    def _pull_new(self) -> BaseEvent:
        run = self.run
        rs = run._rs
        try:
            if self.items is None:
                if rs.retries == 0:
                    self.first_attempt = time.monotonic()
                wait = self.retry_at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self.t0 = time.perf_counter()
                self.items = iter(run.loop.model.respond(request_for(rs, run.loop.config, run.run_id)))
            item = next(self.items)
        except StopIteration:
            self.items = None
            return run._append(stream_ended())
        except StreamInterrupted as exc:
            self.close()
            return run._append(stream_broke(str(exc)))
        except ModelError as exc:
            self.close()
            retry_after = getattr(exc, "retry_after", None)
            event = model_failed(rs, run.loop.config.retry, str(exc), status=exc.status, retryable=exc.retryable,
                                 retry_after=retry_after if isinstance(retry_after, int | float) else None,
                                 spent=time.monotonic() - self.first_attempt, jitter=0.5 + random.random() / 2)
            if isinstance(event, ModelRetried):
                self.retry_at = time.monotonic() + event.delay_s
            return run._append(event)
        except Exception as exc:  # a bug in a model or a script turn: keep the run consistent, keep the cause
            self.close()
            return run._append(model_raised(traceback.format_exception_only(type(exc), exc)[-1].strip()))
        return self._record(item)

    def _item_event(self, item: StreamItem) -> BaseEvent:
        run = self.run
        rs = run._rs
        if isinstance(item, ModelTurn):
            self.close()
            latency = round(time.perf_counter() - self.t0, 6)
            event = run._append(turn_completed(self.ids.assign(rs, item), latency))
            budget = run.loop.config.budget
            if budget.max_cost is not None and not self.price_warned and unpriced(budget, item.model):
                self.price_warned = True
                warnings.warn(f"Budget(max_cost={budget.max_cost:g}) cannot be checked: no price for model "
                              f"{item.model!r} (priced: {', '.join(map(repr, budget.prices)) or 'none'}). Prices are "
                              "US dollars per million tokens, keyed by the model name the provider reports.",
                              UnpricedModelWarning, stacklevel=5)
            return event
        if isinstance(item, ArgumentsDelta):
            shown = run._secrets.fragment(item.index, item.name, item.fragment)
            return run._append(arguments_merged(rs, item.index, shown, item.call_id, item.name))
        if isinstance(item, TextDelta):
            return run._append(text_merged(rs, run._secrets.fragment("text", None, item.fragment)))
        self.close()
        return run._append(not_an_item(item))
