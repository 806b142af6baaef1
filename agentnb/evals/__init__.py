"""Evaluations: a dataset of cases run by one or more loops, each run scored; the scores are a tidy table.

Theory of operation. :func:`evaluate` runs every case of a :class:`Dataset` (:mod:`.dataset`: a DataFrame, a
list of dicts, a file, or runs a person labelled) with each target loop through :func:`agentnb.batch`
(concurrent, resumable on a durable store: the same ids name the same runs), then scores each run with each
scorer (:mod:`.scorers`: the output, :mod:`.trajectory`: the calls, budgets, :mod:`.rubric`: a model's grade,
or a function of your own). The :class:`Evaluation` is one row per case x target x scorer, summarised per
target, compared across targets or models, and each row's run opens in the debugger.

Example:
    >>> import agentnb as anb
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    >>> cases = [{"id": "paris", "prompt": "Weather in Paris?", "calls": [{"tool": "get_weather"}]}]
    >>> result = anb.evaluate(loop, cases, [anb.scorers.calls(mode="superset")], progress=False)
    >>> result.table[["id", "scorer", "passed"]].values.tolist()
    [['paris', 'calls_superset', True]]
"""

from __future__ import annotations

from ._dataset import Case, Dataset
from ._evaluate import COLUMNS, Evaluation, ScoreComparison, evaluate
from ._kit import ScorerKit
from ._rubric import Grade
from ._trajectory import Call
from .scorers import Score, Scorer, Trial

scorers = ScorerKit()
"""``anb.scorers``: the built-in scorers and the decorator (see :class:`ScorerKit`)."""

__all__ = ["COLUMNS", "Call", "Case", "ScoreComparison", "Dataset", "Evaluation", "Grade", "Score", "Scorer",
           "ScorerKit", "Trial", "evaluate", "scorers"]
