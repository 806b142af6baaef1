"""What a check says: one PASS or FIX line per thing checked, in words a student can act on.

Hints are graduated. A FIX line carries a *kind* (what went wrong: ``arity``, ``paused``, ``type``,
``threshold-direction``, ...) and up to two hints: a first nudge, then a more explicit one. The first time a
student's answer shows a kind of mistake, the line shows the nudge; when the same kind comes back on a later
check of the same exercise, it shows the nudge and the explicit hint too. Neither hint is the answer: they
name the concept, the input that failed and where to look, never the line of code to write.

Example:
    >>> reset_hints()
    >>> r = Report("demo")
    >>> r.fix("the answer", "got 4, expected 5", ("look at the operator", "4 = 2 * 2; 5 = 2 + 3"), kind="op")
    >>> print(r)
    Exercise 'demo': 0 of 1 checks pass
      FIX   the answer: got 4, expected 5
            hint: look at the operator
    Fix the first FIX line, run your cell again, then this one.
    >>> r.done()
    >>> r2 = Report("demo")
    >>> r2.fix("the answer", "got 4, expected 5", ("look at the operator", "4 = 2 * 2; 5 = 2 + 3"), kind="op")
    >>> print(r2.lines[0].hints)
    ('look at the operator', '4 = 2 * 2; 5 = 2 + 3')
"""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Line", "Report", "describe_exception", "reset_hints"]

_SEEN: Counter[tuple[str, str]] = Counter()
"""How many checks of each exercise have shown each kind of mistake (this kernel's memory of the student)."""


def reset_hints() -> None:
    """Forget which mistakes were seen: the next FIX lines show first nudges again.

    Example:
        >>> reset_hints()
    """
    _SEEN.clear()


@dataclass(frozen=True, slots=True)
class Line:
    """One thing checked."""

    passed: bool
    what: str
    """What was checked, in a few words."""
    detail: str = ""
    """What happened (PASS) or what to fix (FIX)."""
    hints: tuple[str, ...] = ()
    """The hints shown (FIX only): the first nudge, and on a repeated mistake the more explicit one too."""
    kind: str = ""
    """What went wrong, as a short tag (FIX only): ``paused``, ``arity``, ``type``, ``timeout``, ..."""

    @property
    def hint(self) -> str:
        """The most explicit hint shown ('' for a PASS)."""
        return self.hints[-1] if self.hints else ""


@dataclass
class Report:
    """The result of :func:`agentnb.workshop.check`: a list of PASS/FIX lines.

    Shown as text in a notebook; ``report.passed`` is True when every check passed.

    Example:
        >>> r = Report("demo")
        >>> r.ok("it runs", "3 events")
        >>> r.fix("the answer", "got 4, expected 5", "add, do not multiply")
        >>> print(r)
        Exercise 'demo': 1 of 2 checks pass
          PASS  it runs: 3 events
          FIX   the answer: got 4, expected 5
                hint: add, do not multiply
        Fix the first FIX line, run your cell again, then this one.
    """

    exercise: str
    lines: list[Line] = field(default_factory=list)
    seed: int | None = None
    """The seed the check drew its random inputs from (``check(..., seed=...)`` draws the same ones again)."""

    def ok(self, what: str, detail: str = "") -> None:
        """Record a check that passed."""
        self.lines.append(Line(True, what, detail))

    def fix(self, what: str, detail: str, hint: str | tuple[str, ...] = "", *, kind: str = "") -> None:
        """Record a check that failed: what happened, and hints (a nudge, then a more explicit one)."""
        steps = (hint,) if isinstance(hint, str) else tuple(hint)
        steps = tuple(h for h in steps if h)
        tag = kind or what
        level = min(len(steps), _SEEN[(self.exercise, tag)] + 1)
        self.lines.append(Line(False, what, detail, steps[:level], tag))

    def done(self) -> None:
        """Remember the kinds of mistake this report showed, so the next check can say more about them."""
        for tag in {line.kind for line in self.failures}:
            _SEEN[(self.exercise, tag)] += 1

    @property
    def passed(self) -> bool:
        """True when there is at least one check and none failed."""
        return bool(self.lines) and all(line.passed for line in self.lines)

    @property
    def failures(self) -> list[Line]:
        """The checks that failed."""
        return [line for line in self.lines if not line.passed]

    @property
    def kinds(self) -> list[str]:
        """The kinds of mistake found, in the order of the FIX lines (no repeats)."""
        return list(dict.fromkeys(line.kind for line in self.failures))

    def __str__(self) -> str:
        n = sum(line.passed for line in self.lines)
        out = [f"Exercise {self.exercise!r}: {n} of {len(self.lines)} checks pass"]
        hinted: set[tuple[str, ...]] = set()
        for line in self.lines:
            tag = "PASS" if line.passed else "FIX "
            out.append(f"  {tag}  {line.what}" + (f": {line.detail}" if line.detail else ""))
            if not line.passed and line.hints in hinted:  # the same mistake again: one hint is enough
                out.append("        hint: the same as above")
            elif not line.passed:
                hinted.add(line.hints)
                for i, h in enumerate(line.hints):
                    out.append(f"        {'hint' if i == 0 else 'more'}: {h}")
        if self.passed:
            out.append("All checks pass. Well done!")
        else:
            out.append("Fix the first FIX line, run your cell again, then this one.")
            if self.seed is not None:
                out.append(f"(The inputs were drawn at random; check(..., seed={self.seed}) draws the same ones.)")
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def describe_exception(exc: BaseException) -> str:
    """``ValueError: the message`` -- an exception in one line, without a traceback."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()
