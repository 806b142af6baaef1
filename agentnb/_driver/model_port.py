"""The model port: asks the model, one request per turn, and brings back one I/O result per pull.

The port opens the model's answer lazily (the first pull of a turn sends the request, after any wait a retry
asked for) and returns what came back as a record of :mod:`agentnb._engine.results` -- a masked fragment, the
whole turn with its latency, a failure with the time spent and a jitter draw, the end or the break of the
stream -- never an event: what a record means is :func:`~agentnb._engine.receive`'s. It holds no run.

Each request carries the port's ``renders`` (:mod:`agentnb.providers._render`): a model's wire adapter keeps
there what it rendered of the run's history, so a turn renders only what is new; it lives and dies with the run.

Fragments are masked here, before anything sees them (:class:`~agentnb._redact.RunSecrets`: a fragment is
shown as the secrets it may hold allow), so their lengths count what is shown.
"""

from __future__ import annotations

import random
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from .._engine.actions import Done
from .._engine.guards import Budget, UnpricedModelWarning, unpriced
from .._engine.results import ModelFailed, ModelRaised, NotAnItem, StreamBroke, StreamEnded, TurnReceived
from .._messages import ModelTurn
from .._redact import RunSecrets
from .._request import ArgumentsDelta, ModelRequest, StreamItem, TextDelta
from ..events import BaseEvent
from ..exceptions import ModelError, StreamInterrupted
from .lease import LeaseKeeper

PullResult = (TextDelta | ArgumentsDelta | TurnReceived | ModelFailed | StreamEnded | StreamBroke | ModelRaised
              | NotAnItem)


class ModelPort:
    """One run's open answer from its model (see the module docstring)."""

    __slots__ = ("budget", "first_attempt", "items", "leases", "model", "price_warned", "renders", "retry_at",
                 "secrets", "t0")

    def __init__(self, model: Any, secrets: RunSecrets, budget: Budget, leases: LeaseKeeper | None = None) -> None:
        self.model = model
        self.leases = leases
        """The run's lease, kept alive while the port waits on the model (one that thinks for minutes must not look
        like a dead driver)."""
        self.secrets = secrets
        self.budget = budget
        self.items: Iterator[StreamItem] | None = None
        self.t0 = 0.0
        self.retry_at = 0.0
        self.first_attempt = 0.0
        self.price_warned = False
        self.renders: dict[str, Any] = {}
        """What the model's wire adapter rendered of this run's requests (``ModelRequest.renders``): the run's own,
        so it goes with the run (and :meth:`idle` drops it when the run ends)."""

    def idle(self, action: object) -> BaseEvent | None:
        """Nothing to pull (the engine waits or is done): returns None, the step's event.

        A run that is done drops what its model rendered (one that goes on renders its history again, once).
        """
        if isinstance(action, Done) and self.renders:
            self.renders = {}
        return None

    def close(self) -> None:
        """Close the open answer, if any (closing a broken stream must not mask what broke it)."""
        items, self.items = self.items, None
        close = getattr(items, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: S110 - what broke the stream is reported, not the close
                pass

    def back_off(self, delay_s: float) -> None:
        """The next request waits ``delay_s`` seconds (a retry the engine decided on)."""
        self.retry_at = time.monotonic() + delay_s

    def pull(self, request: Callable[[], ModelRequest], first_attempt: bool, seq: int = 0) -> PullResult:
        """The next item of the answer; ``request`` makes the request when none is open (sent after any wait).

        ``seq`` is the run's length now: while the port waits, the heartbeat keeps the lease taken at it alive.
        """
        leases = self.leases
        if leases is None:
            return self._pull(request, first_attempt)
        leases.waiting(seq)
        try:
            return self._pull(request, first_attempt)
        finally:
            leases.done_waiting()

    def _pull(self, request: Callable[[], ModelRequest], first_attempt: bool) -> PullResult:
        try:
            if self.items is None:
                if first_attempt:
                    self.first_attempt = time.monotonic()
                wait = self.retry_at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self.t0 = time.perf_counter()
                asked = request()
                asked.renders = self.renders
                self.items = iter(self.model.respond(asked))
            item = next(self.items)
        except StopIteration:
            self.items = None
            return StreamEnded()
        except StreamInterrupted as exc:
            self.close()
            return StreamBroke(str(exc), exc.wire)
        except ModelError as exc:
            self.close()
            retry_after = getattr(exc, "retry_after", None)
            return ModelFailed(str(exc), exc.status, exc.retryable,
                               retry_after if isinstance(retry_after, int | float) else None,
                               time.monotonic() - self.first_attempt, 0.5 + random.random() / 2, exc.wire)
        except Exception as exc:  # a bug in a model or a script turn: keep the run consistent, keep the cause
            self.close()
            return ModelRaised(traceback.format_exception_only(type(exc), exc)[-1].strip())
        return self._item(item)

    def _item(self, item: object) -> PullResult:
        if isinstance(item, ModelTurn):
            self.close()
            self._check_price(item.provider, item.model)
            return TurnReceived(item, round(time.perf_counter() - self.t0, 6))
        if isinstance(item, ArgumentsDelta):
            return ArgumentsDelta(item.index, self.secrets.fragment(item.index, item.name, item.fragment),
                                  item.call_id, item.name)
        if isinstance(item, TextDelta):
            return TextDelta(self.secrets.fragment("text", None, item.fragment))
        self.close()
        return NotAnItem(type(item).__name__)

    def _check_price(self, provider: str, model: str) -> None:
        if self.budget.max_cost is not None and not self.price_warned:
            text = unpriced(self.budget, provider, model)
            if text is not None:
                self.price_warned = True
                warnings.warn(text, UnpricedModelWarning, stacklevel=6)
