"""What a run reads of its loop: :class:`LoopSpec`, so the driver needs the loop's shape, not its module.

``Loop`` (:mod:`agentnb._loop`) builds runs, and a run starts its follow-ups and forks through its loop: the two
refer to each other. The run depends on this protocol instead of on ``Loop`` itself, so imports point one way
(``agentnb/_loop.py`` imports ``agentnb/_run.py``, never the reverse; ``tests/test_walls.py``).
"""

from __future__ import annotations

from typing import Any, Protocol

from .._engine import EngineConfig
from ..events import ToolInfo
from ..store import Store
from ..tools import ToolRegistry


class LoopSpec(Protocol):
    """The loop a run is driven by: its model, tools, rules and store (:class:`agentnb.Loop` is one)."""

    model: Any
    """The model the loop asks (a fork may replace it on a copy of the loop)."""
    registry: ToolRegistry
    system: str | None
    store: Store
    lease_ttl: float
    config: EngineConfig
    event_settings: dict[str, Any]
    """The request settings as events record them (masked once per loop)."""
    policy_revision: str

    @property
    def tool_infos(self) -> list[ToolInfo]:
        """The tools as offered to the model."""

    def start(self, prompt: Any, *, run_id: str | None = None, operation_id: str | None = None,
              store: Store | None = None, tags: tuple[str, ...] | list[str] = ()) -> Any:
        """A new run of this loop (a :class:`agentnb.Run`)."""


__all__ = ["LoopSpec"]
