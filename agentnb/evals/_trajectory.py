"""The trajectory scorer: whether the run made the expected tool calls (in order, any order, subset, superset).

Theory of operation. An expected call is ``{"tool": name, "arguments": {...}}`` (or a :class:`Call`); its
arguments are *partial*: only the arguments it names are checked, each against a value (equal as JSON data) or a
predicate (a function of the argument's value that returns true; one that raises is a mismatch). A call whose
arguments were not a JSON object (the model wrote bad JSON) matches only an expected call that names no argument.
Then the run's calls (read from the log, in the order the model made them) are matched against the expected
ones, each run call used at most once:

==============  ===========================================================================================
``mode``        passes when ...
==============  ===========================================================================================
``"order"``     the run made exactly the expected calls, in that order (score: matched positions / the longer)
``"any_order"`` the run made exactly the expected calls, in any order (score: matched / the more numerous)
``"superset"``  the run made every expected call (in any order), and perhaps others (score: matched / expected)
``"subset"``    every call the run made is an expected one; it may leave some out (score: matched / made)
==============  ===========================================================================================

Any-order matching is a bipartite matching (augmenting paths), not first-come: with predicates, a greedy
pairing can use up the one run call a later expected call needed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._values import to_json_safe
from ..scanners._views import ScanCall
from .scorers import Score, Scorer, Trial

Mode = Literal["order", "any_order", "superset", "subset"]
MODES: tuple[Mode, ...] = ("order", "any_order", "superset", "subset")


@dataclass(frozen=True, slots=True)
class Call:
    """An expected call: a tool and some of its arguments, each a value or a predicate of the value.

    Example:
        >>> Call("add", {"a": 2, "b": lambda b: b > 0}).tool
        'add'
    """

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, call: ScanCall) -> tuple[bool, str]:
        """Whether ``call`` is this call, and if not, why not."""
        if call.tool != self.tool:
            return False, f"{call.tool} is not {self.tool}"
        if not self.arguments:
            return True, ""
        if call.arguments is None:
            return False, f"{call.tool}'s arguments were not a JSON object"
        for key, want in self.arguments.items():
            if key not in call.arguments:
                return False, f"{call.tool} has no argument {key!r}"
            got = call.arguments[key]
            if callable(want):
                try:
                    ok = bool(want(got))
                except Exception as exc:
                    return False, f"{call.tool}.{key}: the predicate raised {type(exc).__name__}: {exc}"
                if not ok:
                    return False, f"{call.tool}.{key} = {_short(got)} fails its predicate"
            elif not _same(got, want):
                return False, f"{call.tool}.{key} = {_short(got)}, expected {_short(want)}"
        return True, ""

    def __str__(self) -> str:
        args = ", ".join(f"{k}={'<predicate>' if callable(v) else _short(v)}" for k, v in self.arguments.items())
        return f"{self.tool}({args})"


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:60] + "..."


def _same(got: Any, want: Any) -> bool:
    try:
        a, b = to_json_safe(got), to_json_safe(want)
    except Exception:
        return bool(got == want)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):  # True is not 1 to a tool's schema
        return type(a) is type(b) and a == b
    return bool(a == b)


def as_calls(expected: Sequence[Any]) -> list[Call]:
    """Expected calls from :class:`Call` objects and ``{"tool": ..., "arguments": {...}}`` dicts."""
    out = []
    for i, c in enumerate(expected):
        if isinstance(c, Call):
            out.append(c)
        elif isinstance(c, Mapping) and isinstance(c.get("tool"), str):
            args = c.get("arguments") or {}
            if not isinstance(args, Mapping):
                raise ValueError(f"expected call {i}: arguments are not a mapping ({args!r})")
            out.append(Call(c["tool"], dict(args)))
        else:
            raise ValueError(f"expected call {i} is not a Call or {{\"tool\": ..., \"arguments\": {{...}}}}: {c!r}")
    return out


def _matching(want: list[Call], got: list[ScanCall]) -> dict[int, int]:
    """A largest pairing expected index -> run call index (Kuhn's augmenting paths; lists are short)."""
    ok = [[j for j, g in enumerate(got) if w.matches(g)[0]] for w in want]
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in ok[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(want)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def score_calls(want: list[Call], got: list[ScanCall], mode: Mode) -> Score:
    """The score of the run's calls ``got`` against ``want`` (see the module docs)."""
    made = ", ".join(c.tool for c in got) or "no call"
    if mode == "order":
        pairs = list(zip(want, got, strict=False))
        good = sum(w.matches(g)[0] for w, g in pairs)
        longer = max(len(want), len(got))
        first = next((f"call {i}: {w.matches(g)[1]}" for i, (w, g) in enumerate(pairs) if not w.matches(g)[0]),
                     None)
        if first is None and len(want) != len(got):
            first = f"{len(got)} calls made, {len(want)} expected"
        score = good / longer if longer else 1.0
        return Score(score=score, passed=first is None,
                     explanation=f"calls in order: {made}" if first is None else f"{first} (made: {made})")
    pairing = _matching(want, got)
    n = len(pairing)
    missing = [str(want[i]) for i in range(len(want)) if i not in pairing]
    extra = [got[j].tool for j in range(len(got)) if j not in pairing.values()]
    if mode == "any_order":
        ok, denom = not missing and not extra, max(len(want), len(got))
    elif mode == "superset":
        ok, denom = not missing, len(want)
    else:
        ok, denom = not extra, len(got)
    why = []
    if missing and mode != "subset":
        why.append("not made: " + ", ".join(missing))
    if extra and mode != "superset":
        why.append("not expected: " + ", ".join(extra))
    return Score(score=n / denom if denom else 1.0, passed=ok,
                 explanation=f"{n} of {len(want)} expected calls made (made: {made})" + ("; " + "; ".join(why)
                                                                                         if why else ""))


def calls(expected: Sequence[Any] | None = None, *, mode: Mode = "order", name: str | None = None) -> Scorer:
    """The run's tool calls match the expected ones (the scorer's ``expected``, or the case's ``calls``).

    Args:
        expected: :class:`Call` objects or ``{"tool": ..., "arguments": {...}}`` dicts, whose argument
            values may be predicates; None: each case's ``calls``.
        mode: ``"order"``, ``"any_order"``, ``"superset"`` or ``"subset"`` (see the module docs).
        name: the scorer's name (default: ``calls_<mode>``).

    Example:
        >>> from agentnb.evals._dataset import Case
        >>> made = [ScanCall(run_id="r", call_id="c1", tool="add", arguments={"a": 2, "b": 3}, status="ok",
        ...                  content="5", seq=3, turn=1, transcript=None)]
        >>> trial = Trial(case=Case(id="q", prompt="?"), target="a", calls=made)
        >>> calls([Call("add", {"a": 2, "b": lambda b: b > 0})])(trial)
        Score(score=1.0, passed=True, explanation='calls in order: add')
    """
    if mode not in MODES:
        raise ValueError(f"calls scorer: mode is one of {', '.join(MODES)}; got {mode!r}")
    fixed = None if expected is None else as_calls(expected)

    def fn(t: Trial) -> Score:
        if fixed is not None:
            want = fixed
        elif t.case.calls is None:
            return Score.skip("the case has no expected calls")
        else:
            want = as_calls(t.case.calls)
        if t.transcript is None and t.error is not None:
            return Score.of(False, f"the run did not start: {t.error}")
        return score_calls(want, list(t.calls), mode)

    return Scorer(name or f"calls_{mode}", fn)


Predicate = Callable[[Any], bool]

__all__ = ["MODES", "Call", "Mode", "Predicate", "as_calls", "calls", "score_calls"]
