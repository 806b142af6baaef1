"""What a run starts with and what the model is asked: the first event and each turn's request.

The rest of what I/O brings back is given its meaning by :func:`~agentnb.engine.receive`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..events import RunStarted, ToolInfo
from ..messages import Message
from ..providers.base import HistoryView, ModelRequest
from ..states import S
from .actions import EngineConfig
from .build import UNSTAMPED
from .fold import RunState


def run_started(run_id: str, messages: list[Message], model: str, tools: list[ToolInfo],
                settings: dict[str, Any]) -> RunStarted:
    """A run's first event (its ``run_id`` is the one thing the state cannot stamp)."""
    return RunStarted(seq=-1, ts=UNSTAMPED, run_id=run_id, turn=0, state=S.READY, messages=messages, model=model,
                      tools=tools, settings=settings)


def request_for(rs: RunState, cfg: EngineConfig, run_id: str) -> ModelRequest:
    """The request of the current turn: the conversation, the tools offered, the settings with the tool choice.

    A finalization turn offers no tool (``tool_choice="none"``), except the output tool of a tool-mode
    ``output_type`` loop, which it forces: the last turn still owes the typed answer.
    """
    finalize = rs.finalizing
    offered: Sequence[ToolInfo] = [] if finalize else rs.tools
    settings = cfg.settings
    output = cfg.output
    if output is not None and output.native:
        settings = {**settings, "output_schema": output.settings()}
        if finalize:
            settings["tool_choice"] = "none"
        elif rs.tool_choice is not None:
            settings["tool_choice"] = rs.tool_choice
    elif finalize and output is not None:
        offered = [output.info()]
        settings = {**settings, "tool_choice": {"name": output.name}}
    elif finalize:
        settings = {**settings, "tool_choice": "none"}
    elif rs.tool_choice is not None:
        settings = {**settings, "tool_choice": rs.tool_choice}
    return ModelRequest(messages=HistoryView(rs.messages), tools=offered, settings=settings, finalize=finalize,
                        run_id=run_id, turn=rs.turn)


__all__ = ["request_for", "run_started"]
