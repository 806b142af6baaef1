"""Many runs of one loop: :func:`batch` runs a list of prompts (or a DataFrame) and returns the collection.

Theory of operation. Every item of a batch is one run whose run id *is* its operation id: ``<name>-<index>``
(the batch's ``name`` defaults to a digest of its prompts, so running the same batch again names the same
runs), or the ``operation_id`` column of a DataFrame. Before it starts anything the batch checks every row
(:mod:`agentnb._batch_items`: a prompt that is no prompt, an id that is empty, NaN, blank, a number or a
duplicate is refused, naming the row) and asks the store which of its runs exist and in what state (one
``store.runs()``); a stored run that began from another prompt than its row's is refused too, naming the row,
rather than handed back as that row's transcript. So a batch run again -- after a crash, a ^C, or to pick up
runs paused for approval -- only does what is left:

============================  ============================================================================
the run in the store is ...   the batch ...
============================  ============================================================================
missing                       starts it
finished (any terminal state) loads it; nothing runs again
waiting for approval          loads it and leaves it paused: it is in the store's inbox
                              (``store.runs(state="WAITING_APPROVAL")``) and blocks no other run
anything else (interrupted)   resumes it (``Run.resume(..., take_over=True)``: a live lease of another
                              process is never taken; that run is reported as failed with ``RunLocked``)
============================  ============================================================================

A failure of one run (an exception escaping it: a store fault, a bug in a tool factory) is recorded in
:attr:`BatchResult.table` (``error``) and never stops the others. Runs whose model failed end in a terminal
state like any run and are counted as failed.

Concurrency. :class:`~agentnb.Run` is a synchronous driver; ``concurrency`` runs are driven at once on a
bounded thread pool. A sync model's requests block their thread (so at most ``concurrency`` are in flight);
an async model's requests (``openai.AsyncOpenAI`` ...) are awaited on agentnb's one event loop
(:mod:`agentnb._aio`), so they share its connection pool and the threads only wait. With
``executor=dask_client`` each run is a task on the cluster instead: the loop must then be a function that
builds it on the worker (``loop(**row)``), and the store a :class:`~agentnb.PostgresStore`, which every worker
opens for itself; the transcripts are read back from the store.

Progress: a ``tqdm`` bar (``tqdm.auto``: an ipywidgets bar in a notebook, text in a terminal) with done,
failed, paused, tokens and (given ``prices``) cost.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._batch_items import Item, check_stored, read_items
from ._collection import TranscriptCollection
from ._driver.history import run_tags
from ._engine.prices import cost as price_tokens
from ._loop import Loop
from ._run import Run
from ._states import PAUSED, TERMINAL, LoopState
from ._transcript import Transcript
from .events import BaseEvent, RunStarted, ToolFinished
from .exceptions import AgentnbError
from .store import PostgresStore, Store, as_store

if TYPE_CHECKING:
    import pandas as pd

LoopLike = Loop | Callable[..., Loop]


@dataclass
class _Outcome:
    operation_id: str
    state: str | None = None
    action: str = "started"
    """What the batch did: started, resumed, skipped (finished before), paused (left waiting), failed."""
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    events: list[BaseEvent] | None = None


class BatchResult(TranscriptCollection):
    """The runs of a batch: a :class:`~agentnb.TranscriptCollection`, plus one row per item in :attr:`table`.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> result = anb.batch(loop, ["Paris?", "Rome?"], progress=False)
        >>> result.table[["operation_id", "state", "action"]].values.tolist()  # doctest: +SKIP
        [['b...-0', 'COMPLETED', 'started'], ['b...-1', 'COMPLETED', 'started']]
        >>> result.counts()
        {'done': 2, 'failed': 0, 'paused': 0}
    """

    table: pd.DataFrame
    """One row per item: ``operation_id`` (= run id), ``state``, ``action``, ``error``, tokens, ``cost_usd``,
    ``seconds``, and the item's DataFrame columns."""

    _outcomes: list[_Outcome]

    def counts(self) -> dict[str, int]:
        """How many runs completed, failed (an error, or a terminal state other than COMPLETED) or are paused."""
        done = sum(o.error is None and o.state == LoopState.COMPLETED.value for o in self._outcomes)
        paused = len(self.paused)
        return {"done": done, "failed": len(self._outcomes) - done - paused, "paused": paused}

    @property
    def paused(self) -> list[str]:
        """Run ids waiting for a person (approve them from the store's inbox, then run the batch again)."""
        waiting = {p.value for p in PAUSED}
        return [o.operation_id for o in self._outcomes if o.error is None and o.state in waiting]

    @property
    def errors(self) -> dict[str, str]:
        """``{run_id: error}`` of the runs an exception stopped."""
        return {o.operation_id: o.error for o in self._outcomes if o.error is not None}


def batch(
    loop: LoopLike,
    prompts: Iterable[Any] | pd.DataFrame,
    *,
    concurrency: int = 8,
    store: Store | str | Path | None = None,
    progress: bool | None = None,
    name: str | None = None,
    prompt_column: str = "prompt",
    prices: Mapping[str, Sequence[float]] | None = None,
    executor: Any = None,
    tags: tuple[str, ...] | list[str] = (),
) -> BatchResult:
    """Run one loop over many prompts, ``concurrency`` at a time; resumable; one failure never stops the rest.

    Args:
        loop: a :class:`~agentnb.Loop`, or a function returning one. A function gets the item's extra
            DataFrame columns as keyword arguments (per-row settings: ``loop(temperature=0.2)``).
        prompts: prompts (strings, messages or message lists, or :class:`~agentnb.Fork` rows that fork a stored
            run: counterfactuals under a fork's effect policy), or a DataFrame with a ``prompt_column``
            column, an optional ``operation_id`` column (a string in every row: the run's id), and any other
            columns (passed to a ``loop`` function, and kept in :attr:`BatchResult.table`).
        concurrency: runs driven at once (threads; see the module docs for async models). On a Dask
            cluster the workers' threads set it instead.
        store: where the runs go (default: the loop's store). Use a durable store to resume a batch.
        progress: show a progress bar (default: when ``tqdm`` is installed).
        name: the batch's name, the prefix of its operation ids (default: a digest of the prompts).
        prompt_column: the DataFrame column holding the prompts.
        prices: ``{model: (usd per million input tokens, usd per million output tokens)}`` for the cost
            (default: the loop's budget prices); the models they leave out cost what the loop's budget's
            price table says (:meth:`~agentnb.Budget.price`).
        executor: a ``dask.distributed.Client``: run each item as a task on its cluster (needs a
            :class:`~agentnb.PostgresStore` and a ``loop`` function).
        tags: non-blank strings stored with every run the batch starts (``RunStarted.settings["tags"]``):
            the approvals inbox shows, groups and filters its paused runs by them. A resumed run keeps its own.

    Returns:
        A :class:`BatchResult` (a TranscriptCollection of the runs that have events, in item order).

    Raises:
        AgentnbError: before anything runs or is written, naming each bad row (its position, and its index
            label in a DataFrame): a prompt that is empty (None, NaN), blank, a number or no list of messages;
            an ``operation_id`` that is empty, blank, padded with whitespace, not a string, or a duplicate; a
            ``run_id`` column; a run in the store under a row's id that began from another prompt; ``tags``
            that are not a tuple of non-blank strings.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
        >>> result = anb.batch(loop, ["Refund order 42", "Refund order 43"], progress=False)
        >>> result.counts(), len(result.paused)  # both wait for an approval; nothing blocked
        ({'done': 0, 'failed': 0, 'paused': 2}, 2)
    """
    if concurrency < 1:
        raise AgentnbError(f"concurrency must be at least 1 (got {concurrency})")
    checked = run_tags(tags)
    items = [replace(i, tags=checked) for i in read_items(prompts, prompt_column, name)]
    store_: Store
    if executor is not None:
        store_ = _dask_store(loop, store)
    elif store is not None:
        store_ = as_store(store)
    else:
        store_ = loop.store if isinstance(loop, Loop) else as_store(None)
    known = dict(store_.runs())
    finished = check_stored(items, store_, known)
    if executor is not None:
        outcomes = _on_dask(executor, loop, items, store_, known, progress, prices)
    else:
        outcomes = _local(loop, items, store_, known, finished, concurrency, progress, prices)
    return _result(items, outcomes, store_ if executor is not None else None, finished)


# -- loops --------------------------------------------------------------------------------------------------


def _build_loop(loop: LoopLike, settings: dict[str, Any]) -> Loop:
    if isinstance(loop, Loop):
        return loop
    built = loop(**settings)
    if not isinstance(built, Loop):
        raise AgentnbError(f"the batch's loop function returned {type(built).__name__}, not an agentnb.Loop")
    return built


# -- one run ------------------------------------------------------------------------------------------------


def run_item(loop: Loop, store: Store, item: Item, known: str | None,
             prices: Mapping[str, Sequence[float]] | None, keep_events: bool = True,
             stored: list[BaseEvent] | None = None) -> _Outcome:
    """Start, resume or skip one item (see the module docs); never raises.

    ``stored``: the events of the item's finished run when the batch has them already (read when it checked
    the store), so a skipped run is not read twice.
    """
    out = _Outcome(item.operation_id)
    t0 = time.perf_counter()
    run: Run | None = None
    try:
        if known is None and item.fork is not None:
            parent = Run.resume(item.fork.parent, loop=loop, store=store, allow_policy_change=True)
            run = parent.fork(**item.fork.plan(list(parent.events)), run_id=item.operation_id)
            run.run()
        elif known is None:
            # the store goes in at the start: the run's lease and ledger are bound to it there (a store set
            # afterwards left them on the loop's own store, which may hold an older run of this id)
            run = loop.start(item.prompt, run_id=item.operation_id, operation_id=item.operation_id, store=store,
                             tags=item.tags)
            run.run()
        elif LoopState(known) in TERMINAL:
            out.action = "skipped"
            events = stored if stored is not None else store.load(item.operation_id)
            _fill(out, events, loop, prices, keep_events)
            return out
        else:
            run = Run.resume(item.operation_id, loop=loop, store=store, take_over=True)
            out.action = "resumed"
            if not run.paused:
                run.run()
        if run.paused and out.action != "started":
            out.action = "paused"
    except Exception as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, AgentnbError):
            out.error += "\n" + "".join(traceback.format_exception(exc)[-3:])
    finally:
        out.seconds = time.perf_counter() - t0
    if run is not None:
        _fill(out, list(run.events), loop, prices, keep_events)
    return out


def _fill(out: _Outcome, events: list[BaseEvent], loop: Loop, prices: Mapping[str, Sequence[float]] | None,
          keep_events: bool) -> None:
    if not events:
        return
    t = Transcript(events)
    rs = t.fold()
    out.state = rs.state.value
    out.input_tokens, out.output_tokens = rs.input_tokens, rs.output_tokens
    budget = loop.config.budget
    out.cost_usd = price_tokens(rs.tokens_by_model.items(), budget.prices if prices is None else prices, budget.table)
    out.events = events if keep_events else None


# -- local: a bounded pool -----------------------------------------------------------------------------------


class _Progress:
    """done / failed / paused / tokens / cost on a tqdm bar (a notebook widget or terminal text)."""

    def __init__(self, total: int, show: bool | None) -> None:
        self.bar: Any = None
        self.counts = {"done": 0, "failed": 0, "paused": 0}
        self.tokens = 0
        self.cost = 0.0
        self._lock = threading.Lock()
        if show is False:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            if show:
                raise ImportError("progress=True needs tqdm: pip install tqdm") from None
            return
        self.bar = tqdm(total=total, desc="runs", unit="run", dynamic_ncols=True)

    def update(self, out: _Outcome) -> None:
        with self._lock:
            if out.error is None and out.state == LoopState.COMPLETED.value:
                self.counts["done"] += 1
            elif out.error is None and out.state is not None and LoopState(out.state) in PAUSED:
                self.counts["paused"] += 1
            else:
                self.counts["failed"] += 1
            self.tokens += out.input_tokens + out.output_tokens
            self.cost += out.cost_usd or 0.0
            if self.bar is not None:
                self.bar.set_postfix(**self.counts, tokens=self.tokens,
                                     **({"cost": f"${self.cost:.4f}"} if self.cost else {}), refresh=False)
                self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _local(loop: LoopLike, items: list[Item], store: Store, known: Mapping[str, str],
           finished: dict[str, list[BaseEvent]], concurrency: int, progress: bool | None,
           prices: Mapping[str, Sequence[float]] | None) -> dict[str, _Outcome]:
    bar = _Progress(len(items), progress)
    outcomes: dict[str, _Outcome] = {}

    def one(item: Item) -> _Outcome:
        try:
            built = _build_loop(loop, item.settings)
        except Exception as exc:
            out = _Outcome(item.operation_id, error=f"{type(exc).__name__}: {exc}", action="failed")
        else:
            out = run_item(built, store, item, known.get(item.operation_id), prices,
                           stored=finished.pop(item.operation_id, None))
        bar.update(out)
        return out

    try:
        if concurrency == 1:
            for item in items:
                outcomes[item.operation_id] = one(item)
        else:
            with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="agentnb-batch") as pool:
                for out in pool.map(one, items):
                    outcomes[out.operation_id] = out
    finally:
        bar.close()
    return outcomes


# -- dask ---------------------------------------------------------------------------------------------------


def _dask_task(loop: Callable[..., Loop], store: Store, item: Item, known: str | None,
               prices: Mapping[str, Sequence[float]] | None) -> _Outcome:
    """One item on a Dask worker: the loop is built there, the store opened there; no events travel back."""
    return run_item(_build_loop(loop, item.settings), store, item, known, prices, keep_events=False)


def _dask_store(loop: LoopLike, store: Store | str | Path | None) -> PostgresStore:
    """The store of a batch on a Dask cluster: a PostgresStore, and ``loop`` a function (else refused)."""
    store_ = as_store(store) if store is not None else None
    if not isinstance(store_, PostgresStore):
        raise AgentnbError("a batch on a Dask cluster needs store=anb.PostgresStore(...): every worker writes its "
                           "runs there, and the batch reads them back from it")
    if isinstance(loop, Loop):
        raise AgentnbError("a batch on a Dask cluster needs `loop` as a function that builds the Loop on the "
                           "worker (a Loop holds locks, threads and clients that cannot be sent): "
                           "batch(lambda: anb.Loop(...), prompts, executor=client, store=...)")
    return store_


def _on_dask(client: Any, loop: LoopLike, items: list[Item], store: Store, known: Mapping[str, str],
             progress: bool | None, prices: Mapping[str, Sequence[float]] | None) -> dict[str, _Outcome]:
    from distributed import as_completed

    bar = _Progress(len(items), progress)
    futures = [client.submit(_dask_task, loop, store, item, known.get(item.operation_id), prices,
                             key=f"agentnb-{item.operation_id}-{time.time_ns()}", pure=False) for item in items]
    outcomes: dict[str, _Outcome] = {}
    try:
        for future in as_completed(futures):  # type: ignore[no-untyped-call]
            try:
                out = future.result()
            except Exception as exc:  # the task itself failed (a worker died, a loop that cannot be sent)
                item = items[futures.index(future)]
                out = _Outcome(item.operation_id, action="failed", error=f"{type(exc).__name__}: {exc}")
            outcomes[out.operation_id] = out
            bar.update(out)
    finally:
        bar.close()
    return outcomes


# -- the result ---------------------------------------------------------------------------------------------


def _result(items: list[Item], outcomes: dict[str, _Outcome], store: Store | None,
            finished: dict[str, list[BaseEvent]]) -> BatchResult:
    import pandas as pd

    transcripts: list[Transcript] = []
    rows: list[dict[str, Any]] = []
    for item in items:
        out = outcomes[item.operation_id]
        events = out.events
        if events is None and store is not None and out.state is not None:  # a Dask run: its events are stored
            events = finished.get(item.operation_id) if out.action == "skipped" else None  # read when checked
            events = events if events is not None else store.load(item.operation_id)
        if events:
            transcripts.append(Transcript(events))
        rows.append({"operation_id": item.operation_id, "state": out.state, "action": out.action,
                     "error": out.error, "input_tokens": out.input_tokens, "output_tokens": out.output_tokens,
                     "cost_usd": out.cost_usd, "seconds": out.seconds, **_lineage(item, events), **item.settings})
    result = BatchResult(transcripts)
    result.table = pd.DataFrame(rows)
    result._outcomes = [outcomes[item.operation_id] for item in items]
    for out in result._outcomes:
        out.events = None  # the collection holds them
    return result


def _lineage(item: Item, events: list[BaseEvent] | None) -> dict[str, Any]:
    """A fork row's columns: its parent, the event it forked after, and its calls' effect marks."""
    if item.fork is None:
        return {}
    first = events[0] if events else None
    lineage = first.settings.get("fork", {}) if isinstance(first, RunStarted) else {}
    marks = [e.effect for e in events or () if isinstance(e, ToolFinished) and e.effect is not None]
    return {"forked_from": item.fork.parent, "fork_at": lineage.get("at"), "effects": item.fork.effects,
            "inherited": marks.count("inherited"), "new_effects": marks.count("happened") + marks.count("rerun"),
            "simulated": marks.count("simulated")}


__all__ = ["BatchResult", "batch"]
