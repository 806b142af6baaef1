"""The workshop kit: self-checking exercises and the course's provider switch.

A student writes a tool, a predicate, a policy or a budget in a cell; a check cell runs it against scripted
scenarios and says, line by line, what passed and what to fix. Nothing a student writes makes the check
raise: a broken tool is an expected input, and it becomes a FIX line with a hint.

Example:
    >>> import agentnb as anb
    >>> @anb.tool
    ... def word_count(text: str) -> int:
    ...     '''Count the words in a text.
    ...
    ...     Args:
    ...         text: The text to count the words of.
    ...     '''
    ...     return len(text.split())
    >>> anb.workshop.check("tool", word_count).passed
    True
    >>> print(anb.workshop.check("tool", None))
    Exercise 'tool': 0 of 1 checks pass
      FIX   a tool 'word_count': not written yet (it is still None or ...)
            hint: write `@anb.tool` then `def word_count(...)` in the exercise cell and run it
    Fix the first FIX line, run your cell again, then this one.
"""

from __future__ import annotations

from typing import Any

from ._report import Line, Report, describe_exception
from .exercises import EXERCISES, SHOP_ORDERS
from .switch import KEY_VARIABLES, course_model

__all__ = ["EXERCISES", "KEY_VARIABLES", "SHOP_ORDERS", "Line", "Report", "check", "course_model", "exercises"]


def exercises() -> dict[str, str]:
    """The exercises by name, with one line on what each asks.

    Example:
        >>> sorted(exercises())
        ['budget', 'capstone', 'policy', 'stop_at', 'tool']
    """
    return {name: text for name, (_, text) in EXERCISES.items()}


def check(exercise: str, *args: Any, **kwargs: Any) -> Report:
    """Run an exercise's scenarios against what the student wrote; returns a :class:`Report` (shown as text).

    Args:
        exercise: the exercise name (see :func:`exercises`): ``"tool"``, ``"stop_at"``, ``"policy"``,
            ``"budget"`` or ``"capstone"``.
        *args: what the exercise asks for, e.g. ``check("tool", word_count)``.
        **kwargs: the same by name, e.g. ``check("capstone", tools=[lookup_order, refund], policy=policy,
            budget=budget)``.

    Example:
        >>> import agentnb as anb
        >>> check("budget", anb.Budget(max_tool_calls=4)).passed
        True
    """
    entry = EXERCISES.get(exercise)
    if entry is None:
        report = Report(str(exercise))
        report.fix("the exercise name", f"there is no exercise {exercise!r}",
                   f"the exercises are: {', '.join(EXERCISES)}")
        return report
    fn, _ = entry
    report = Report(exercise)
    try:
        fn(report, *args, **kwargs)
    except TypeError as exc:
        if not report.lines and ("argument" in str(exc)):
            report.fix("how check() was called", describe_exception(exc),
                       f"see anb.workshop.exercises()[{exercise!r}] and the exercise text")
        else:
            report.fix("the scenarios", f"stopped with {describe_exception(exc)}",
                       "this came from your code; read the message above")
    except Exception as exc:
        report.fix("the scenarios", f"stopped with {describe_exception(exc)}",
                   "this came from your code; read the message above")
    return report
