"""Built-in scanners: what goes wrong in tool-calling loops, found from the frames of each run.

Each is a factory returning a :class:`~agentnb.Scanner` whose version names its settings (so a cached result
is never reused for other settings). Each reads what the fold produced -- the calls, messages and turns frames
as column lists of the run's :class:`~agentnb.scanners._views.ScanView`, its calls as
:class:`~agentnb.scanners._views.ScanCall`, the final answer its ``RunFinished`` event recorded -- never the
events' fields interpreted again. Their precision and recall, measured on generated runs whose truth is known,
are in ``tests/test_scan_builtins.py`` and ``docs/scanners.md``.

- :func:`ignored_errors` -- a call that ended ``error`` or ``timeout`` and that the model went past: no later
  call of the same tool (a retry), and a final answer with no word of a failure.
- :func:`repeated_calls` -- a call made again (same tool, same canonical arguments) after the same call had
  succeeded: the model already had the answer.
- :func:`ungrounded_arguments` -- argument values (strings, numbers of two digits or more) that appear nowhere
  in the system, user and tool messages before the call: the model made them up.
- :func:`~agentnb.scanners._injection.injection` -- instruction-like text inside tool results.
- :func:`refusals` -- turns that ended in a refusal or a content filter, and answers that are refusals in words.
- :func:`slow_turns` / :func:`costly_turns` -- turns slower, or using more tokens, than ``factor`` times the
  run's median (with three turns or more), or than an absolute limit.
"""

from __future__ import annotations

import json
import re
from statistics import median
from typing import TYPE_CHECKING, Any

from ._core import Hit, Scanner, calls_of
from ._injection import injection
from ._views import view

if TYPE_CHECKING:
    from .._transcript import Transcript

_FAILED = ("error", "timeout")

_ACKNOWLEDGES = re.compile(
    r"\b(error|errors|fail|failed|fails|failing|failure|could ?n[o']?t|can ?not|can'?t|unable|unavailable|"
    r"(not|is ?n'?t|was ?n'?t) available|unfortunately|problem|issue|sorry|apologi[sz]e|timed? ?out|"
    r"did ?n[o']?t (work|succeed|respond|return)|"
    r"was ?n[o']?t able|went wrong|try again|retry|no (data|result|response|answer)|not (get|retrieve|reach|"
    r"load|find|access)|down|broken|outage)\b",
    re.IGNORECASE,
)
"""Words a final answer uses when it tells the user that something failed."""


def builtins() -> tuple[Scanner, ...]:
    """Every built-in scanner with its default settings."""
    return (ignored_errors(), repeated_calls(), ungrounded_arguments(), injection(), refusals(), slow_turns(),
            costly_turns())


def ignored_errors() -> Scanner:
    """A tool error the model went past: no retry of the tool after it, and a final answer that says nothing of it.

    Example:
        >>> import agentnb as anb
        >>> @anb.tool
        ... def weather(city: str) -> str:
        ...     '''The weather.'''
        ...     raise RuntimeError("service down")
        >>> model = anb.ScriptedModel([{"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
        ...                            {"text": "It is sunny in Oslo."}])
        >>> t = anb.Loop(model=model, tools=[weather]).start("Weather in Oslo?").run().transcript
        >>> anb.scan(t, anb.scanner.ignored_errors())["message"].tolist()
        ['weather returned error (call_1_1); no retry followed and the final answer does not mention a failure']
    """

    def find(t: Transcript) -> list[Hit]:
        answer = view(t).final_text
        if answer is None or _ACKNOWLEDGES.search(answer):
            return []
        calls = calls_of(t)
        hits = []
        for i, c in enumerate(calls):
            if c.status in _FAILED and not any(later.tool == c.tool for later in calls[i + 1:]):
                hits.append(Hit(message=f"{c.tool} returned {c.status} ({c.call_id}); no retry followed and the "
                                        "final answer does not mention a failure", call_id=c.call_id, seq=c.seq))
        return hits

    return Scanner("ignored_errors", find, version="1")


def _canonical(arguments: dict[str, Any] | None) -> str | None:
    return None if arguments is None else json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


def repeated_calls() -> Scanner:
    """A call made again, same tool and same canonical arguments, after that call had already succeeded.

    A retry after an error is not a repeat. ``score`` counts the earlier identical calls.
    """

    def find(t: Transcript) -> list[Hit]:
        seen: dict[tuple[str, str], list[str]] = {}
        hits = []
        for c in calls_of(t):
            key = _canonical(c.arguments)
            if key is None:
                continue
            before = seen.get((c.tool, key), [])
            if before:
                hits.append(Hit(message=f"{c.tool} called again with the arguments of {before[0]}, which succeeded",
                                call_id=c.call_id, seq=c.seq, score=float(len(before))))
            if c.status == "ok":
                seen.setdefault((c.tool, key), []).append(c.call_id)
        return hits

    return Scanner("repeated_calls", find, version="1")


_SPACE = re.compile(r"\s+")


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text.casefold()).replace(",", "")


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    return [(path, value)]


def _checkable(value: Any, min_chars: int) -> str | None:
    """The text of a value worth looking for (not a flag, a null, a small number or a short word)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        text = repr(value) if isinstance(value, float) else str(value)
        digits = sum(ch.isdigit() for ch in text)
        return text if digits >= 2 else None
    if isinstance(value, str):
        text = value.strip()
        return text if len(text) >= min_chars else None
    return None


def ungrounded_arguments(min_chars: int = 3) -> Scanner:
    """Argument values that appear nowhere earlier in the system, user or tool messages.

    Strings of at least ``min_chars`` characters and numbers of two digits or more are looked for, ignoring
    case, runs of white space and thousands separators; ``value`` lists the ungrounded ``(path, value)`` pairs.
    """
    if min_chars < 1:
        raise ValueError(f"min_chars must be at least 1, got {min_chars}")

    def find(t: Transcript) -> list[Hit]:
        rv = view(t)
        said = [(s, _fold(text if isinstance(text, str) else content if isinstance(content, str) else ""))
                for role, s, text, content in zip(rv.column("messages", "role"), rv.column("messages", "seq"),
                                                  rv.column("messages", "text"), rv.column("messages", "content"),
                                                  strict=True)
                if role in ("system", "user", "tool")]
        hits = []
        for c in calls_of(t):
            if not c.arguments:
                continue
            context = " ".join(text for s, text in said if s < c.seq)
            missing = [(path, v) for path, v in _leaves(c.arguments)
                       if (text := _checkable(v, min_chars)) is not None and _fold(text) not in context]
            if missing:
                shown = ", ".join(f"{p}={v!r}" for p, v in missing[:5])
                hits.append(Hit(message=f"{c.tool} ({c.call_id}): {shown} appear(s) nowhere earlier in the "
                                        "conversation", call_id=c.call_id, seq=c.seq,
                                value=[[p, v] for p, v in missing], score=float(len(missing))))
        return hits

    return Scanner("ungrounded_arguments", find, version=f"1:min_chars={min_chars}")


_REFUSAL_TEXT = re.compile(
    r"^\W*(i'?m sorry,? but |sorry,? but |unfortunately,? )?(i|we) (can ?not|can'?t|won'?t|will not|am unable to|"
    r"'?m unable to|am not able to|'?m not able to) (help|assist|comply|do that|provide|answer|continue|support)",
    re.IGNORECASE,
)
"""An answer that opens with a refusal in words ("I'm sorry, but I can't help with that")."""


def refusals() -> Scanner:
    """Turns that ended in a refusal or a content filter, or whose answer opens with a refusal in words.

    One hit per turn, at its ``seq`` in ``frames.turns()``; ``value`` is ``refusal``, ``content_filter`` or
    ``text`` (a refusal written as the answer).
    """

    def find(t: Transcript) -> list[Hit]:
        rv = view(t)
        refused_turns: set[int] = set()
        texts: dict[int, str] = {}
        for origin, kind, turn, text in zip(rv.column("messages", "origin"), rv.column("messages", "kind"),
                                            rv.column("messages", "turn"), rv.column("messages", "text"), strict=True):
            if origin != "response":
                continue
            if kind == "refusal":
                refused_turns.add(turn)
            elif kind == "text" and isinstance(text, str):
                texts.setdefault(turn, text)
        hits = []
        for seq, turn, reason in zip(rv.column("turns", "seq"), rv.column("turns", "turn"),
                                     rv.column("turns", "finish_reason"), strict=True):
            if reason == "content_filter":
                kind = "content_filter"
            elif reason == "refusal" or turn in refused_turns:
                kind = "refusal"
            elif _REFUSAL_TEXT.match(texts.get(turn, "")):
                kind = "text"
            else:
                continue
            hits.append(Hit(message=f"turn {turn}: {kind.replace('_', ' ')}", seq=int(seq), value=kind))
        return hits

    return Scanner("refusals", find, version="1")


def _outliers(t: Transcript, column: str, factor: float, floor: float, limit: float | None,
              unit: str) -> list[Hit]:
    rv = view(t)
    values = [(int(s), int(n), float(x)) for s, n, x in
              zip(rv.column("turns", "seq"), rv.column("turns", "turn"), rv.column("turns", column), strict=True)
              if x is not None]
    typical = median(v for _, _, v in values) if len(values) >= 3 else None
    hits = []
    for seq, turn, v in values:
        over_limit = limit is not None and v > limit
        relative = typical is not None and typical > 0 and v > factor * typical and v >= floor
        if over_limit or relative:
            why = (f"{v:g} {unit}, over the limit of {limit:g}" if over_limit
                   else f"{v:g} {unit}, {v / typical:.1f}x the run's median of {typical:g}")  # type: ignore[operator]
            hits.append(Hit(message=f"turn {turn}: {why}", seq=seq,
                            score=v / typical if typical else None))
    return hits


def slow_turns(factor: float = 3.0, min_s: float = 0.0, max_s: float | None = None) -> Scanner:
    """Turns whose latency is over ``factor`` times the run's median (and at least ``min_s``), or over ``max_s``.

    The median needs three turns or more; ``score`` is the ratio to it.
    """
    if factor <= 1:
        raise ValueError(f"factor must be more than 1, got {factor}")

    def find(t: Transcript) -> list[Hit]:
        return _outliers(t, "latency_s", factor, min_s, max_s, "s")

    return Scanner("slow_turns", find, version=f"1:factor={factor}:min_s={min_s}:max_s={max_s}")


def costly_turns(factor: float = 3.0, max_tokens: int | None = None) -> Scanner:
    """Turns whose total tokens are over ``factor`` times the run's median, or over ``max_tokens``.

    The median needs three turns or more; ``score`` is the ratio to it.
    """
    if factor <= 1:
        raise ValueError(f"factor must be more than 1, got {factor}")

    def find(t: Transcript) -> list[Hit]:
        return _outliers(t, "total_tokens", factor, 0.0, max_tokens, "tokens")

    return Scanner("costly_turns", find, version=f"1:factor={factor}:max_tokens={max_tokens}")
