"""What I/O brings back about a call, as plain records: its :class:`Outcome`, the ledger's :class:`Effect`.

These are core types: the engine reads them (:mod:`agentnb._engine.results` wraps them as I/O results), the
tool port makes outcomes, and the stores make effects. They import nothing above :mod:`agentnb._messages`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ._messages import ResultStatus

EffectStatus = Literal["started", "done"]


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


@dataclass(frozen=True, slots=True)
class Effect:
    """One side effect as the ledger knows it (the fold of its ledger operations)."""

    key: str
    run_id: str
    """The run that claimed it (whose ledger chain holds its operations)."""
    call_id: str
    """The call that claimed it."""
    tool: str
    status: EffectStatus
    content: str | None = None
    """What the model saw (when done)."""
    value: Any = None
    result_status: str | None = None
    attempts: int = 1
    """1, plus one for every approved retry of an unknown outcome."""


@dataclass(frozen=True, slots=True)
class EffectDone:
    """An effect's outcome, recorded in the same transaction as the event that reports it."""

    key: str
    content: str
    value: Any
    result_status: str


SHOWN_ERRORS = 20
"""Bad fields a model reads by name in one rejection; the rest are counted (a schema of thousands stays short)."""
KEPT_ERRORS = 100
"""Structured errors an event keeps; the rest are counted in a last entry."""
_MSG_CHARS = 300


def describe_errors(tool_name: str, exc: ValidationError) -> tuple[str, list[dict[str, Any]]]:
    """A model-readable message naming each bad field (the first :data:`SHOWN_ERRORS`), plus the structured errors.

    A server's schema can fail in thousands of places at once; the message stays a few lines long and says how
    many more there are, each error's text is cut to a few hundred characters, and the structured list keeps
    the first :data:`KEPT_ERRORS` with a last entry counting the rest.

    Example:
        >>> from pydantic import create_model
        >>> Wide = create_model("Wide", **{f"f{i}": (int, ...) for i in range(30)})
        >>> try:
        ...     Wide.model_validate({})
        ... except ValidationError as exc:
        ...     message, errors = describe_errors("wide", exc)
        >>> message.splitlines()[-1], len(errors)
        ('- ... and 10 more (30 fields in all)', 30)
    """
    errors: list[dict[str, Any]] = []
    lines: list[str] = []
    found = exc.errors(include_url=False)
    for err in found:
        loc = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        msg = str(err["msg"])
        if len(msg) > _MSG_CHARS:
            msg = msg[:_MSG_CHARS] + f"... ({len(msg) - _MSG_CHARS:,} more characters)"
        if len(errors) < KEPT_ERRORS:
            errors.append({"loc": loc, "msg": msg, "type": err["type"]})
        if len(lines) < SHOWN_ERRORS:
            lines.append(f"- {loc}: {msg}")
    if len(found) > SHOWN_ERRORS:
        lines.append(f"- ... and {len(found) - SHOWN_ERRORS:,} more ({len(found):,} fields in all)")
    if len(found) > KEPT_ERRORS:
        errors.append({"loc": "(more)", "msg": f"{len(found) - KEPT_ERRORS:,} more errors not kept",
                       "type": "truncated"})
    return f"Invalid arguments for tool '{tool_name}':\n" + "\n".join(lines), errors


__all__ = ["KEPT_ERRORS", "SHOWN_ERRORS", "Effect", "EffectDone", "EffectStatus", "Outcome", "describe_errors"]
