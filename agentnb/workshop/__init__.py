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

from collections.abc import Callable
from typing import Any

from ..exceptions import CheckTimeout
from ._capstone import SHOP_ORDERS, check_capstone
from ._common import rng_for
from ._cost import check_cost
from ._errors import check_errors
from ._exercises import check_budget, check_policy, check_stop_at, check_tool
from ._guard import LIMIT_S, Leash
from ._injection import check_injection
from ._mcp_tools import check_mcp
from ._report import Line, Report, describe_exception, reset_hints
from ._switch import KEY_VARIABLES, course_model
from ._typed_output import check_output
from ._wire_exercise import check_wire

__all__ = ["EXERCISES", "KEY_VARIABLES", "SHOP_ORDERS", "CheckTimeout", "Line", "Report", "check", "course_model",
           "exercises", "reset_hints"]

EXERCISES: dict[str, tuple[Callable[..., None], str]] = {
    "tool": (check_tool, "01 · write a tool: word_count(text) -> int"),
    "stop_at": (check_stop_at, "02 · a breakpoint predicate: stop where the refund call is validated"),
    "policy": (check_policy, "03 · an approval policy: refunds of $50 or more need a person"),
    "budget": (check_budget, "04 · a budget: 4 tool calls, then an answer"),
    "wire": (check_wire, "05 · read a streamed turn: read_stream(chunks) -> (calls, may_run)"),
    "capstone": (check_capstone, "07 · a support agent: two tools, a policy and a budget"),
    "output": (check_output, "09 · an output type: a Ticket the run validates, wrong ones sent back"),
    "mcp": (check_mcp, "10 · read_only(server): only the tools of an MCP server that cannot change anything"),
    "errors": (check_errors, "11 · a tool whose mistakes are error results the model can act on: find_table"),
    "injection": (check_injection, "12 · a policy: sends outside example-shop.com wait for a person"),
    "cost": (check_cost, "13 · a budget in dollars: stop a gpt-4.1-mini run at $0.02, then answer"),
}
"""Every exercise by name: the check and one line on what it asks."""


def exercises() -> dict[str, str]:
    """The exercises by name, with one line on what each asks.

    Example:
        >>> sorted(exercises())
        ['budget', 'capstone', 'cost', 'errors', 'injection', 'mcp', 'output', 'policy', 'stop_at', 'tool', 'wire']
    """
    return {name: text for name, (_, text) in EXERCISES.items()}


def check(exercise: str, *args: Any, seed: int | None = None, time_limit: float = LIMIT_S, **kwargs: Any) -> Report:
    """Run an exercise's scenarios against what the student wrote; returns a :class:`Report` (shown as text).

    Every check draws fresh random inputs (boundaries included) and runs the student's code with a time limit
    per call (the calls of one check share five limits), handing it copies of what it reads, so neither a table
    of answers, an endless loop nor a write into what it was given gets through or breaks the check. A mistake
    seen again on a later check of the same exercise gets a more explicit hint.

    Args:
        exercise: the exercise name (see :func:`exercises`): ``"tool"``, ``"stop_at"``, ``"policy"``,
            ``"budget"``, ``"wire"``, ``"capstone"``, ``"output"``, ``"mcp"``, ``"errors"``, ``"injection"`` or
            ``"cost"``.
        *args: what the exercise asks for, e.g. ``check("tool", word_count)``.
        seed: draw the same random inputs as an earlier check (its report names its seed when something failed).
        time_limit: seconds one call of the student's code may take (all the calls of the check: five times it).
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
                   f"the exercises are: {', '.join(EXERCISES)}", kind="name")
        return report
    fn, _ = entry
    rng, used = rng_for(seed)
    before = rng.getstate()
    report = Report(exercise)
    try:
        fn(report, *args, rng=rng, leash=Leash(time_limit), **kwargs)
    except TypeError as exc:
        if not report.lines and ("argument" in str(exc)):
            report.fix("how check() was called", describe_exception(exc),
                       f"see anb.workshop.exercises()[{exercise!r}] and the exercise text", kind="call")
        else:
            report.fix("the scenarios", f"stopped with {describe_exception(exc)}",
                       "this came from your code; read the message above", kind="crash")
    except Exception as exc:
        report.fix("the scenarios", f"stopped with {describe_exception(exc)}",
                   "this came from your code; read the message above", kind="crash")
    if rng.getstate() != before:  # random inputs were drawn: say how to draw them again
        report.seed = used
    report.done()
    return report
