"""What I/O brings back about a call, as plain records: its :class:`Outcome`, the ledger's :class:`Effect`.

These are core types: the engine reads them (:mod:`agentnb.engine.results` wraps them as I/O results), the
tool port makes outcomes, and the stores make effects. They import nothing above :mod:`agentnb.messages`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from .messages import ResultStatus

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


__all__ = ["Effect", "EffectDone", "EffectStatus", "Outcome", "describe_errors"]
