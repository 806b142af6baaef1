"""``anb.evaluate``: every case of a dataset run by each target loop through the batch machinery, then scored.

Theory of operation. Each target (a :class:`~agentnb.Loop`, or several by name to compare models or prompts)
runs the dataset as one :func:`agentnb.batch`: the run of case ``q7`` by target ``gpt`` is named
``<name>:gpt:q7``, so the same evaluation run again on a durable store finds its runs and runs only what is
missing, interrupted or new (a run stored under that id that began from another prompt is refused, naming the
row, rather than scored as that row's run). The batch brings its concurrency, its progress bar and its rule
that one failing run never stops the others. The dataset is checked before anything runs
(:mod:`.dataset`). Then every scorer scores every run (:mod:`.scorers`), ``concurrency`` at a time (a
model-graded scorer asks a model per row); a scorer that raises scores 0 on that row with the error as the
explanation.

The :class:`Evaluation` is a tidy table, one row per case x target x scorer, a summary per target, a comparison
between targets or models, and each run (:meth:`Evaluation.run`, a :class:`~agentnb.Transcript` whose display
is the debugger).
"""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._batch import batch
from .._loop import Loop
from .._states import LoopState
from .._transcript import Transcript
from ..events import RunStarted, TurnCompleted
from ..exceptions import AgentnbError
from ..scanners._views import prime, release, view
from ..store import Store
from ._dataset import Case, Dataset, as_dataset
from .scorers import Score, Scorer, Trial, as_scorers

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("target", "category", "the target loop's name (categories: the targets, in order)"),
    ("model", "string", "the run's model, ``provider:model``"),
    ("id", "string", "the case's id"),
    ("scorer", "category", "the scorer (categories: the scorers, in order)"),
    ("score", "float64", "the score, 1 the best (NaN: not scored: the case lacks what the scorer needs)"),
    ("passed", "boolean", "whether the run passed (<NA>: not scored)"),
    ("explanation", "string", "why, in a sentence"),
    ("run_id", "string", "the run (``result.run(id, target)`` opens it)"),
    ("state", "string", "how the run ended (null: it did not start; ``error`` says why)"),
    ("error", "string", "what stopped the run, if anything"),
)
"""The columns of :attr:`Evaluation.table`: ``(name, dtype, doc)``."""


@dataclass(frozen=True)
class ScoreComparison:
    """Targets (or models) side by side: per-scorer means, and the rows where their verdicts differ.

    Attributes:
        means: one row per scorer, one column per group: the mean score (not-scored rows left out).
        passed: the same for the share of runs that passed.
        differ: one row per (case, scorer) whose ``passed`` differs between the groups, a column per group.
    """

    means: pd.DataFrame
    passed: pd.DataFrame
    differ: pd.DataFrame

    def _repr_html_(self) -> str:
        return (f"<b>mean score</b>{self.means.to_html()}<b>passed</b>{self.passed.to_html()}"
                f"<b>{len(self.differ)} rows differ</b>{self.differ.head(20).to_html()}")


class Evaluation:
    """The scores of an evaluation: one row per case x target x scorer (:attr:`table`, see :data:`COLUMNS`).

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel([{"text": "5"}, {"text": "4"}]))
        >>> result = anb.evaluate(loop, [{"id": "q1", "prompt": "2 + 3?", "expected": "5"},
        ...                              {"id": "q2", "prompt": "2 + 1?", "expected": "3"}],
        ...                       [anb.scorers.exact()], concurrency=1, progress=False)
        >>> result.table[["id", "scorer", "score", "passed"]]
           id scorer  score  passed
        0  q1  exact    1.0    True
        1  q2  exact    0.0   False
        >>> result.run("q2").run_id
        'eval:loop:q2'
    """

    def __init__(self, table: pd.DataFrame, runs: Mapping[tuple[str, str], Transcript], targets: Sequence[str],
                 dataset: Dataset) -> None:
        self.table = table
        """One row per case x target x scorer (:data:`COLUMNS`)."""
        self.dataset = dataset
        """The cases."""
        self.targets = list(targets)
        """The targets' names, in order."""
        self._runs = dict(runs)

    def __repr__(self) -> str:
        return (f"<agentnb.Evaluation {len(self.dataset)} cases x {len(self.targets)} targets x "
                f"{self.table['scorer'].nunique()} scorers>")

    def _repr_html_(self) -> str:
        return self.summary().to_html()

    def summary(self) -> pd.DataFrame:
        """Per target and scorer: ``mean`` score, ``passed`` share, ``scored`` rows and ``rows``."""
        t = self.table
        g = t.groupby(["target", "scorer"], observed=True, sort=False)
        out = g.agg(mean=("score", "mean"), scored=("passed", "count"), rows=("id", "size"))
        out["passed"] = g["passed"].mean().astype("Float64")
        return out[["mean", "passed", "scored", "rows"]]

    def compare(self, by: str = "target") -> ScoreComparison:
        """Groups side by side (``by="target"`` or ``"model"``): means per scorer and the rows that differ.

        Raises:
            ValueError: ``by`` is neither, or there is one group only.
        """
        if by not in ("target", "model"):
            raise ValueError(f"compare by 'target' or 'model', got {by!r}")
        t = self.table.copy()
        t[by] = t[by].astype(str)
        groups = list(dict.fromkeys(t[by]))
        if len(groups) < 2:
            raise ValueError(f"compare needs two {by}s or more; this evaluation has {groups}")
        scorers = list(t["scorer"].cat.categories)  # every scorer, a row of NaN where none scored
        means = t.pivot_table(index="scorer", columns=by, values="score", aggfunc="mean", observed=True,
                              sort=False).reindex(index=scorers, columns=groups)
        passed = t.assign(passed=t["passed"].astype("Float64")).pivot_table(
            index="scorer", columns=by, values="passed", aggfunc="mean", observed=True, sort=False
        ).reindex(index=scorers, columns=groups)
        verdicts = t.pivot_table(index=["id", "scorer"], columns=by, values="passed", aggfunc="first",
                                 observed=True, sort=False, dropna=False)
        verdicts = verdicts.reindex(columns=groups)
        as_obj = verdicts.astype(object).where(verdicts.notna(), None)
        differ = verdicts[as_obj.apply(lambda row: len(set(row)) > 1, axis=1)]
        return ScoreComparison(means=means, passed=passed, differ=differ)

    def run(self, case_id: str, target: str | None = None) -> Transcript:
        """The run of one case by one target (default: the only target); its display is the debugger.

        Raises:
            KeyError: no such case or target, or several targets and none named.
        """
        if target is None:
            if len(self.targets) != 1:
                raise KeyError(f"this evaluation has targets {self.targets}: name one, run({case_id!r}, target=...)")
            target = self.targets[0]
        if (target, case_id) not in self._runs:
            if target not in self.targets:
                raise KeyError(f"no target {target!r} (the targets: {self.targets})")
            raise KeyError(f"no run of case {case_id!r} by {target!r} (an unknown case, or a run that never "
                           "started: see the table's error column)")
        return self._runs[(target, case_id)]


def _targets(target: Any, dask: bool) -> dict[str, Any]:
    """``{name: loop}``; on a Dask cluster each loop is a function that builds it (as the batch runs it there)."""
    def ok(v: Any) -> bool:
        return callable(v) and not isinstance(v, Loop) if dask else isinstance(v, Loop)

    what = "a function that builds an agentnb.Loop (on a Dask cluster)" if dask else "an agentnb.Loop"
    if ok(target):
        return {"loop": target}
    if isinstance(target, Mapping) and target:
        bad = [k for k, v in target.items() if not isinstance(k, str) or not k or not ok(v)
               or k != k.strip() or any(ch.isspace() or ch == ":" for ch in k)]
        if bad:
            raise AgentnbError(f"targets are {{name: {what}}} with names of letters, digits, _ . -; bad: {bad}")
        return dict(target)
    raise AgentnbError(f"evaluate's target is {what} or a mapping name -> {'function' if dask else 'Loop'}, got "
                       f"{type(target).__name__}")


def _built(loop: Any) -> Loop:
    """The loop a target's function builds (read here for its output type; the cluster builds its own)."""
    if isinstance(loop, Loop):
        return loop
    built = loop()
    if not isinstance(built, Loop):
        raise AgentnbError(f"a target's function returned {type(built).__name__}, not an agentnb.Loop")
    return built


def _trial(case: Case, target: str, loop: Loop, t: Transcript | None, error: str | None,
           cost: float | None) -> Trial:
    if t is None or not t.events:
        return Trial(case=case, target=target, error=error or "the run did not start")
    rs = t.fold()
    spec = loop.config.output
    if spec is not None:
        output = spec.typed(rs.final_output) if rs.output_ok and rs.state is LoopState.COMPLETED else None
    else:  # a refusal's text, a cut-off answer: not an output (only an explicit stop is COMPLETED)
        output = rs.output if rs.state is LoopState.COMPLETED else None
    first = t.events[0]
    return Trial(case=case, target=target, model=first.model if isinstance(first, RunStarted) else None,
                 transcript=t, state=rs.state, output=output, calls=view(t).scan_calls,
                 input_tokens=rs.input_tokens, output_tokens=rs.output_tokens,
                 turns=sum(isinstance(e, TurnCompleted) for e in t.events), cost_usd=cost, error=error)


def _trials(cases: list[Case], ids: list[str], result: Any, by_id: Mapping[str | None, Transcript], tname: str,
            loop: Loop, runs: dict[tuple[str, str], Transcript]) -> list[Trial]:
    out = []
    for case, rid, (_, row) in zip(cases, ids, result.table.iterrows(), strict=True):
        t = by_id.get(rid)
        if t is not None:
            runs[(tname, case.id)] = t
        cost = row["cost_usd"]
        out.append(_trial(case, tname, loop, t, row["error"] if isinstance(row["error"], str) else None,
                          None if cost is None or (isinstance(cost, float) and math.isnan(cost)) else float(cost)))
    return out


def evaluate(target: Loop | Mapping[str, Loop] | Any, dataset: Any, scorers: Scorer | Sequence[Any] | Any, *,
             store: Store | str | Path | None = None, concurrency: int = 8, progress: bool | None = None,
             name: str = "eval", prices: Mapping[str, Sequence[float]] | None = None,
             executor: Any = None) -> Evaluation:
    """Run every case of ``dataset`` with each target loop and score each run with each scorer.

    Args:
        target: a :class:`~agentnb.Loop`, or ``{name: Loop}`` to compare models or prompts.
        dataset: a :class:`~agentnb.evals.Dataset`, a DataFrame, a list of dicts, or a ``.jsonl``/``.csv``/
            ``.parquet`` file (see :mod:`agentnb.evals._dataset`).
        scorers: a scorer or a list of them (``anb.scorers.exact()`` ..., or functions of a
            :class:`~agentnb.evals.Trial`).
        store: where the runs go (default: each loop's store); a durable store makes the evaluation resumable.
        concurrency: runs (and then scorings) at once.
        progress: a progress bar per target (default: when tqdm is installed).
        name: the evaluation's name, the first part of its run ids.
        prices: as for :func:`agentnb.batch`, for the cost.
        executor: a ``dask.distributed.Client``: the runs are tasks on its cluster, as :func:`agentnb.batch`
            runs them (each target is then a function that builds its Loop, and ``store`` a PostgresStore).

    Returns:
        An :class:`Evaluation`.

    Raises:
        AgentnbError: before anything runs: bad rows (naming each), a bad target, two scorers of one name.

    Example:
        >>> import agentnb as anb
        >>> loops = {"good": anb.Loop(model=anb.ScriptedModel([{"text": "5"}])),
        ...          "bad": anb.Loop(model=anb.ScriptedModel([{"text": "6"}]))}
        >>> result = anb.evaluate(loops, [{"id": "q1", "prompt": "2 + 3?", "expected": "5"}],
        ...                       [anb.scorers.exact()], progress=False)
        >>> result.compare().means
        target  good  bad
        scorer
        exact    1.0  0.0
    """
    import pandas as pd

    loops = _targets(target, executor is not None)
    ds = as_dataset(dataset)
    if not len(ds):
        raise AgentnbError("the dataset has no cases")
    try:
        checked = as_scorers(scorers)
    except (TypeError, ValueError) as exc:
        raise AgentnbError(str(exc)) from None
    if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
        raise AgentnbError(f"an evaluation's name is a string without whitespace, got {name!r}")
    cases = list(ds)
    trials: list[Trial] = []
    runs: dict[tuple[str, str], Transcript] = {}
    for tname, loop in loops.items():
        ids = [f"{name}:{tname}:{c.id}" for c in cases]
        rows = pd.DataFrame({"prompt": [c.prompt for c in cases], "operation_id": ids})
        result = batch(loop, rows, concurrency=concurrency, store=store, progress=progress,
                       name=f"{name}:{tname}", prices=prices, executor=executor)
        by_id = {t.run_id: t for t in result}
        prime(list(result))  # the calls of every run read from one build of the frames, not one per run
        try:
            trials.extend(_trials(cases, ids, result, by_id, tname, _built(loop), runs))
        finally:
            release(list(result))

    def score(trial: Trial) -> list[Score]:
        return [s(trial) for s in checked]

    if concurrency == 1:
        scores = [score(tr) for tr in trials]
    else:
        with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="agentnb-eval") as pool:
            scores = list(pool.map(score, trials))
    rows_out = [{"target": tr.target, "model": tr.model, "id": tr.case.id, "scorer": s.name, "score": sc.score,
                 "passed": sc.passed, "explanation": sc.explanation,
                 "run_id": f"{name}:{tr.target}:{tr.case.id}" if tr.transcript is not None else None,
                 "state": tr.state.value if tr.state is not None else None, "error": tr.error}
                for tr, per in zip(trials, scores, strict=True) for s, sc in zip(checked, per, strict=True)]
    return Evaluation(_table(rows_out, list(loops), [s.name for s in checked]), runs, list(loops), ds)


def _table(rows: list[dict[str, Any]], targets: list[str], scorers: list[str]) -> pd.DataFrame:
    import pandas as pd

    text = pd.StringDtype("python")
    col = {k: [r[k] for r in rows] for k, _, _ in COLUMNS}
    return pd.DataFrame({
        "target": pd.Categorical(col["target"], categories=targets),
        "model": pd.array(col["model"], dtype=text),
        "id": pd.array(col["id"], dtype=text),
        "scorer": pd.Categorical(col["scorer"], categories=scorers),
        "score": pd.array(col["score"], dtype="float64"),
        "passed": pd.array(col["passed"], dtype="boolean"),
        "explanation": pd.array(col["explanation"], dtype=text),
        "run_id": pd.array(col["run_id"], dtype=text),
        "state": pd.array(col["state"], dtype=text),
        "error": pd.array(col["error"], dtype=text),
    })


__all__ = ["COLUMNS", "ScoreComparison", "Evaluation", "evaluate"]
