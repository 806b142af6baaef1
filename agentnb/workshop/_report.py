"""What a check says: one PASS or FIX line per thing checked, in words a student can act on."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Line", "Report", "describe_exception"]


@dataclass(frozen=True, slots=True)
class Line:
    """One thing checked."""

    passed: bool
    what: str
    """What was checked, in a few words."""
    detail: str = ""
    """What happened (PASS) or what to fix (FIX)."""
    hint: str = ""
    """A nudge towards the fix (FIX only)."""


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

    def ok(self, what: str, detail: str = "") -> None:
        """Record a check that passed."""
        self.lines.append(Line(True, what, detail))

    def fix(self, what: str, detail: str, hint: str = "") -> None:
        """Record a check that failed, with what to fix."""
        self.lines.append(Line(False, what, detail, hint))

    @property
    def passed(self) -> bool:
        """True when there is at least one check and none failed."""
        return bool(self.lines) and all(line.passed for line in self.lines)

    @property
    def failures(self) -> list[Line]:
        """The checks that failed."""
        return [line for line in self.lines if not line.passed]

    def __str__(self) -> str:
        n = sum(line.passed for line in self.lines)
        out = [f"Exercise {self.exercise!r}: {n} of {len(self.lines)} checks pass"]
        for line in self.lines:
            tag = "PASS" if line.passed else "FIX "
            out.append(f"  {tag}  {line.what}" + (f": {line.detail}" if line.detail else ""))
            if line.hint and not line.passed:
                out.append(f"        hint: {line.hint}")
        if self.passed:
            out.append("All checks pass. Well done!")
        else:
            out.append("Fix the first FIX line, run your cell again, then this one.")
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def describe_exception(exc: BaseException) -> str:
    """``ValueError: the message`` -- an exception in one line, without a traceback."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()
