"""Scorers: plain, typed functions of one run of one case, each answering with a :class:`Score`.

Theory of operation. A scorer gets a :class:`Trial` -- the case, the run's transcript, its output (the typed
object of an ``output_type`` loop, else the final text), its calls, tokens, turns and cost -- and answers a
:class:`Score` (a number in ``[0, 1]``, whether it passed, and why). A plain function of a trial is a scorer too:
it may answer a ``Score``, a bool (passed or not), a number (the score; passed when it is 1) or a
``(score, explanation)`` pair; a function that raises is a score of 0 whose explanation is the error, never a
stopped evaluation. A scorer that needs what the case does not give (an expected output, expected calls, a
rubric) answers "not scored" (``score`` NaN, ``passed`` None) with the reason, so one row without an expected
output does not count as a failure of the model.

The built-ins: :func:`exact`, :func:`regex` and :func:`json_schema` (the output), :func:`calls` (the
trajectory: :mod:`.trajectory`), :func:`budget` (tokens, turns, cost), and :func:`rubric` (a model grades
the run: :mod:`.rubric`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._transcript import Transcript
from .._values import to_json_safe
from ..scanners._views import ScanCall
from ._dataset import Case

if TYPE_CHECKING:
    from .._states import LoopState


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """What a scorer says of one run.

    Attributes:
        score: a number, 1 the best (NaN: not scored).
        passed: whether the run passes (None: not scored).
        explanation: why, in a sentence.

    Example:
        >>> Score(score=1.0, passed=True, explanation="the output is '5'").passed
        True
    """

    score: float
    passed: bool | None
    explanation: str = ""

    @classmethod
    def skip(cls, why: str) -> Score:
        """Not scored, and why (the case lacks what the scorer needs)."""
        return cls(score=math.nan, passed=None, explanation=why)

    @classmethod
    def of(cls, ok: bool, explanation: str) -> Score:
        """1 and passed, or 0 and failed."""
        return cls(score=1.0 if ok else 0.0, passed=bool(ok), explanation=explanation)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trial:
    """One run of one case, as a scorer reads it.

    Attributes:
        case: the dataset's row.
        target: the name of the loop that ran it.
        model: the run's model, ``provider:model``.
        transcript: the run (None when it did not start: ``error`` says why).
        state: how the run ended.
        output: the output of a completed run: the typed object of an ``output_type`` loop, else the final
            text (None for a run that did not complete: a refusal's text is no answer).
        calls: the run's tool calls, in order (:class:`~agentnb.ScanCall`: ``tool``, ``arguments`` -- None when
            they were not a JSON object -- ``status``, ``content``).
        input_tokens: tokens sent.
        output_tokens: tokens received.
        turns: model turns.
        cost_usd: what the run cost (None: a model without a price).
        error: what stopped the run before it ended, if anything.
    """

    case: Case
    target: str
    model: str | None = None
    transcript: Transcript | None = field(default=None, repr=False)
    state: LoopState | None = None
    output: Any = None
    calls: list[ScanCall] = field(default_factory=list, repr=False)
    input_tokens: int = 0
    output_tokens: int = 0
    turns: int = 0
    cost_usd: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Scorer:
    """A named function of a :class:`Trial` that answers a :class:`Score` (or a bool, a number, a pair).

    Args:
        name: the ``scorer`` column of the evaluation.
        fn: the function.

    Example:
        >>> short = Scorer("short", lambda trial: len(str(trial.output)) < 20)
        >>> short.name
        'short'
    """

    name: str
    fn: Callable[[Trial], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a scorer's name is a non-empty string, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"scorer {self.name!r}: fn must be callable, got {type(self.fn).__name__}")

    def __call__(self, trial: Trial) -> Score:
        """The score of one trial; a function that raises scores 0 with the error as the explanation."""
        try:
            return _as_score(self.fn(trial))
        except Exception as exc:
            return Score(score=0.0, passed=False, explanation=f"the scorer raised {type(exc).__name__}: {exc}")


def _as_score(v: Any) -> Score:
    if isinstance(v, Score):
        return v
    if isinstance(v, bool):
        return Score.of(v, "passed" if v else "failed")
    if isinstance(v, int | float):
        return Score(score=float(v), passed=None if math.isnan(v) else v >= 1, explanation="")
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], bool | int | float) and isinstance(v[1], str):
        s = _as_score(v[0])
        return Score(score=s.score, passed=s.passed, explanation=v[1])
    raise TypeError(f"a scorer answers a Score, a bool, a number or (score, explanation); got {type(v).__name__}")


def as_scorers(scorers: Scorer | Callable[[Trial], Any] | Sequence[Any]) -> list[Scorer]:
    """Scorers from scorers and plain functions (named by ``__name__``); refuses duplicates by name."""
    items = [scorers] if isinstance(scorers, Scorer) or callable(scorers) else list(scorers)
    if not items:
        raise ValueError("evaluate needs at least one scorer")
    out: list[Scorer] = []
    for s in items:
        if isinstance(s, Scorer):
            out.append(s)
        elif callable(s):
            out.append(Scorer(getattr(s, "__name__", "") or type(s).__name__, s))
        else:
            raise TypeError(f"a scorer is an agentnb Scorer or a function of a Trial, got {type(s).__name__}")
    names = [s.name for s in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two scorers are named {', '.join(map(repr, twice))}: give one another name "
                         "(Scorer(name, fn))")
    return out


def scorer(fn: Callable[[Trial], Any] | None = None, *, name: str | None = None) -> Any:
    """Make a scorer of a function of a :class:`Trial` (bare, or with ``name=``).

    Example:
        >>> @scorer
        ... def polite(trial):
        ...     return "please" in str(trial.output).lower()
        >>> polite.name
        'polite'
    """
    def wrap(f: Callable[[Trial], Any]) -> Scorer:
        return Scorer(name or f.__name__, f)

    return wrap if fn is None else wrap(fn)


def _shown(v: Any, limit: int = 80) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=repr)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _json(v: Any) -> Any:
    """An output as JSON data (a pydantic model's fields, a dataclass's ...); text stays text."""
    try:
        return to_json_safe(v)
    except Exception:
        return repr(v)


def exact(*, strip: bool = True, case_sensitive: bool = True, name: str = "exact") -> Scorer:
    r"""The output equals the case's ``expected`` (text; or, for a typed output, its JSON data equals it).

    Args:
        strip: ignore surrounding whitespace of text.
        case_sensitive: compare text as it is (False: casefolded).
        name: the scorer's name.

    Example:
        >>> trial = Trial(case=Case(id="q", prompt="2 + 3?", expected="5"), target="a", output=" 5\n")
        >>> exact()(trial)
        Score(score=1.0, passed=True, explanation="the output is '5'")
        >>> exact()(Trial(case=Case(id="q", prompt="?", expected='{"n":1}'), target="a", output={"n": 1})).passed
        True
    """
    def norm(v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip() if strip else v
            return v if case_sensitive else v.casefold()
        return _json(v)

    def fn(t: Trial) -> Score:
        if t.case.expected is None:
            return Score.skip("the case has no expected output")
        if t.output is None:
            return Score.of(False, f"the run has no output (it ended {_state(t)})")
        got, want = norm(t.output), norm(t.case.expected)
        if isinstance(want, str) != isinstance(got, str):  # text against data: the text read as JSON, if it is
            got, want = _as_data(got), _as_data(want)
        if got == want:
            return Score.of(True, f"the output is {_shown(got)}")
        return Score.of(False, f"the output is {_shown(got)}, expected {_shown(want)}")

    return Scorer(name, fn)


def _as_data(v: Any) -> Any:
    """Text that is JSON as its data (``'{"n":1}'`` is ``{"n": 1}``); other text as it is; data as its JSON text."""
    if isinstance(v, str):
        try:
            return json.dumps(json.loads(v), ensure_ascii=False, sort_keys=True)
        except ValueError:
            return v
    return json.dumps(v, ensure_ascii=False, sort_keys=True)


def _state(t: Trial) -> str:
    return t.state.value if t.state is not None else f"before it started: {t.error}"


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(_json(v), ensure_ascii=False, sort_keys=True)


def regex(pattern: str | None = None, *, flags: int = 0, name: str = "regex") -> Scorer:
    r"""The output matches a regular expression (``re.search``): ``pattern``, or the case's ``expected``.

    A typed output is matched as its JSON text.

    Raises:
        ValueError: a pattern that does not compile.

    Example:
        >>> trial = Trial(case=Case(id="q", prompt="2 + 3?"), target="a", output="It is 5.")
        >>> regex(r"\b5\b")(trial).passed
        True
    """
    compiled = None
    if pattern is not None:
        try:
            compiled = re.compile(pattern, flags)
        except re.error as exc:
            raise ValueError(f"regex scorer: {pattern!r} is not a regular expression ({exc})") from None

    def fn(t: Trial) -> Score:
        rx = compiled
        if rx is None:
            if not isinstance(t.case.expected, str):
                return Score.skip("the case has no expected pattern (a text `expected`)")
            try:
                rx = re.compile(t.case.expected, flags)
            except re.error as exc:
                return Score.skip(f"the case's expected {t.case.expected!r} is not a regular expression ({exc})")
        if t.output is None:
            return Score.of(False, f"the run has no output (it ended {_state(t)})")
        text = _text(t.output)
        m = rx.search(text)
        return Score.of(m is not None, f"{rx.pattern!r} {'matches ' + _shown(m.group(0)) if m else 'is not in'} "
                        f"the output")

    return Scorer(name, fn)


def json_schema(schema: Mapping[str, Any] | type | None = None, *, name: str = "json_schema") -> Scorer:
    """The output (a typed output's JSON data, or text that parses as JSON) fits a JSON schema.

    Args:
        schema: a JSON schema, or a type pydantic makes one of (a pydantic model); None: the case's
            ``expected`` is the schema.
        name: the scorer's name.

    Example:
        >>> trial = Trial(case=Case(id="q", prompt="?"), target="a", output='{"city": "Paris"}')
        >>> json_schema({"type": "object", "required": ["city"]})(trial).passed
        True
    """
    try:
        import jsonschema
    except ImportError:
        raise ImportError("the json_schema scorer needs jsonschema: pip install 'agentnb[analysis]'") from None
    fixed: Mapping[str, Any] | None = None
    if isinstance(schema, type):
        from pydantic import TypeAdapter

        fixed = TypeAdapter(schema).json_schema()
    elif schema is not None:
        fixed = schema
    if fixed is not None:
        jsonschema.Draft202012Validator.check_schema(fixed)

    def fn(t: Trial) -> Score:
        s = fixed if fixed is not None else t.case.expected
        if isinstance(s, str):
            try:
                s = json.loads(s)
            except ValueError:
                s = None
        if not isinstance(s, Mapping):
            return Score.skip("the case has no schema (`expected` as a JSON schema)")
        if t.output is None:
            return Score.of(False, f"the run has no output (it ended {_state(t)})")
        data = t.output
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as exc:
                return Score.of(False, f"the output is not JSON ({exc})")
        else:
            data = _json(data)
        try:
            errors = sorted(jsonschema.Draft202012Validator(s).iter_errors(data), key=lambda e: list(e.path))
        except jsonschema.SchemaError as exc:
            return Score.skip(f"the case's schema is not a JSON schema ({exc.message})")
        if not errors:
            return Score.of(True, "the output fits the schema")
        first = errors[0]
        where = "/".join(map(str, first.path)) or "the output"
        return Score.of(False, f"{where}: {first.message}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1
                                                               else ""))

    return Scorer(name, fn)


def budget(*, max_tokens: int | None = None, max_turns: int | None = None, max_cost_usd: float | None = None,
           name: str = "budget") -> Scorer:
    """The run stayed within limits: total tokens, model turns, cost in dollars (each optional).

    A run without a price (``cost_usd`` None) fails a cost limit: its cost is not known to be under it.

    Example:
        >>> trial = Trial(case=Case(id="q", prompt="?"), target="a", input_tokens=90, output_tokens=20, turns=2)
        >>> budget(max_tokens=100, max_turns=3)(trial)
        Score(score=0.0, passed=False, explanation='110 tokens > 100; 2 turns <= 3')
    """
    if max_tokens is None and max_turns is None and max_cost_usd is None:
        raise ValueError("budget scorer: give max_tokens, max_turns or max_cost_usd")

    def fn(t: Trial) -> Score:
        parts: list[str] = []
        ok = True
        if max_tokens is not None:
            tokens = t.input_tokens + t.output_tokens
            ok &= tokens <= max_tokens
            parts.append(f"{tokens} tokens {'<=' if tokens <= max_tokens else '>'} {max_tokens}")
        if max_turns is not None:
            ok &= t.turns <= max_turns
            parts.append(f"{t.turns} turns {'<=' if t.turns <= max_turns else '>'} {max_turns}")
        if max_cost_usd is not None:
            if t.cost_usd is None:
                ok = False
                parts.append("the cost is not known (a model without a price)")
            else:
                ok &= t.cost_usd <= max_cost_usd
                parts.append(f"${t.cost_usd:.6f} {'<=' if t.cost_usd <= max_cost_usd else '>'} ${max_cost_usd}")
        return Score.of(ok, "; ".join(parts))

    return Scorer(name, fn)


__all__ = ["Score", "Scorer", "Trial", "as_scorers", "budget", "exact", "json_schema", "regex", "scorer"]
