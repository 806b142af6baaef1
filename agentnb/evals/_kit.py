"""``anb.scorers``: the one name for the scorers -- the built-ins, the decorator, and the records they use."""

from __future__ import annotations

from ._dataset import Case, Dataset
from ._rubric import Grade, rubric
from ._trajectory import Call, calls
from .scorers import Score, Scorer, Trial, budget, exact, json_schema, regex, scorer


class ScorerKit:
    """``anb.scorers``: the built-in scorers, the decorator for your own, and the records they read and answer.

    Built-ins: ``exact()``, ``regex(pattern)``, ``json_schema(schema)`` (the output); ``calls(expected, mode=...)``
    with ``Call(tool, {arg: value or predicate})`` (the trajectory); ``budget(max_tokens=, max_turns=,
    max_cost_usd=)``; ``rubric(text, model=...)`` (a model's :class:`Grade`). Your own: ``@anb.scorers.scorer``
    over a function of a :class:`Trial`, or the plain function itself. ``Dataset`` and ``Case`` are the data.

    Example:
        >>> import agentnb as anb
        >>> @anb.scorers.scorer
        ... def short(trial):
        ...     return len(str(trial.output)) < 80
        >>> [s.name for s in (anb.scorers.exact(), anb.scorers.calls(mode="any_order"), short)]
        ['exact', 'calls_any_order', 'short']
    """

    exact = staticmethod(exact)
    regex = staticmethod(regex)
    json_schema = staticmethod(json_schema)
    calls = staticmethod(calls)
    budget = staticmethod(budget)
    rubric = staticmethod(rubric)
    scorer = staticmethod(scorer)
    Call = Call
    Case = Case
    Dataset = Dataset
    Grade = Grade
    Score = Score
    Scorer = Scorer
    Trial = Trial

    def __repr__(self) -> str:
        return "<agentnb.scorers: exact, regex, json_schema, calls, budget, rubric, scorer>"


__all__ = ["ScorerKit"]
