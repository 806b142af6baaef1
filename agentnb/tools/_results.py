"""What running a call produced: :class:`Outcome`, before it becomes an event, and the texts a model reads.

Every way a call can end becomes an :class:`Outcome`: the tool's return value (converted at the value
boundary, :mod:`agentnb._values`), a value that cannot enter the run, a timeout, and the message naming each bad
field of arguments that failed the schema (:func:`describe_errors`). None of these is an exception that leaves
the loop: the model reads them and may correct its call.
"""

from __future__ import annotations

from typing import Any

from .. import _values as values
from .._outcomes import Outcome, describe_errors
from ..exceptions import ValueConversionError
from ._definition import Tool


def render_value(value: Any) -> str:
    """The text a model sees for a value: strings as they are, the rest as JSON (see :func:`agentnb._values.render`).

    Raises:
        ValueConversionError: the value cannot enter a run.
    """
    return values.render(value)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a value for the transcript (see :func:`agentnb._values.to_json_safe`).

    Raises:
        ValueConversionError: the value cannot enter a run.
    """
    return values.to_json_safe(value)


def converted_outcome(t: Tool, value: Any, duration: float) -> Outcome:
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


__all__ = ["Outcome", "describe_errors", "jsonable", "render_value"]
