"""What running a call produced: :class:`Outcome`, before it becomes an event, and the texts a model reads.

Every way a call can end becomes an :class:`Outcome`: the tool's return value (converted at the value
boundary, :mod:`agentnb.values`), a value that cannot enter the run, a timeout, and the message naming each bad
field of arguments that failed the schema (:func:`describe_errors`). None of these is an exception that leaves
the loop: the model reads them and may correct its call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .. import values
from ..exceptions import ValueConversionError
from ..messages import ResultStatus
from .definition import Tool


@dataclass(slots=True)
class Outcome:
    """What running a call produced, before it becomes an event."""

    status: ResultStatus
    content: str
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    duration_s: float = 0.0
    truncated: int = 0
    """Characters cut from ``content`` by the result size cap."""


def render_value(value: Any) -> str:
    """The text a model sees for a value: strings as they are, the rest as JSON (see :func:`agentnb.values.render`).

    Raises:
        ValueConversionError: the value cannot enter a run.
    """
    return values.render(value)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a value for the transcript (see :func:`agentnb.values.to_json_safe`).

    Raises:
        ValueConversionError: the value cannot enter a run.
    """
    return values.to_json_safe(value)


def _converted(t: Tool, value: Any, duration: float) -> Outcome:
    """The ok outcome of a tool's return value, or an error outcome when it cannot enter the run.

    Called inside the tool's error boundary: a value that cannot be converted is an error *result*, recorded
    like any other, so the tool is never run again for it.
    """
    try:
        content, audit = values.convert_result(value)
    except Exception as exc:  # a generator that raises while it is consumed lands here too
        problem = str(exc) if isinstance(exc, ValueConversionError) else values.exception_text(exc)
        return Outcome(
            status="error",
            content=f"Tool '{t.name}' returned a value that cannot be recorded: {problem}",
            error_type=type(exc).__name__,
            error_message=problem,
            duration_s=duration,
        )
    return Outcome(status="ok", content=content, value=audit, duration_s=duration)


def timeout_outcome(tool_name: str, limit: float, duration_s: float, *, deadline: bool = False) -> Outcome:
    """The result of a call that ran past its time limit (the tool's timeout or what was left of the deadline)."""
    why = "the run's deadline" if deadline else "its timeout"
    return Outcome(
        status="timeout",
        content=f"Tool '{tool_name}' did not finish within {limit:g} s ({why}).",
        error_type="TimeoutError",
        error_message=f"timed out after {limit:g} s ({why})",
        duration_s=duration_s,
    )


def describe_errors(tool_name: str, exc: ValidationError) -> tuple[str, list[dict[str, Any]]]:
    """A model-readable message naming each bad field, plus the structured errors."""
    errors: list[dict[str, Any]] = []
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        msg = err["msg"]
        errors.append({"loc": loc, "msg": msg, "type": err["type"]})
        lines.append(f"- {loc}: {msg}")
    return f"Invalid arguments for tool '{tool_name}':\n" + "\n".join(lines), errors
