"""What a run starts with and what the model is asked: the first event and each turn's request.

The rest of what I/O brings back is given its meaning by :func:`~agentnb._engine.receive`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._messages import Message
from .._request import HistoryView, ModelRequest, NamedTool, RequestOptions, ToolChoice, tool_choice_of
from .._states import S
from ..events import RunStarted, ToolInfo
from .actions import EngineConfig
from .build import UNSTAMPED
from .fold import RunState


def run_started(run_id: str, messages: list[Message], model: str, tools: list[ToolInfo],
                settings: dict[str, Any]) -> RunStarted:
    """A run's first event (its ``run_id`` is the one thing the state cannot stamp)."""
    return RunStarted(seq=-1, ts=UNSTAMPED, run_id=run_id, turn=0, state=S.READY, messages=messages, model=model,
                      tools=tools, settings=settings)


def request_for(rs: RunState, cfg: EngineConfig, run_id: str) -> ModelRequest:
    """The request of the current turn: the conversation, the tools offered and defined, the typed options.

    The loop's settings carry its fixed tool choice and parallel-calls switch under their setting names (the
    events record them so); they become typed options here and the rest passes through. A per-turn policy's
    choice wins over the fixed one. A finalization turn offers no tool (tool choice ``none``), except the
    output tool of a tool-mode ``output_type`` loop, which it forces: the last turn still owes the typed answer.

    Raises:
        ValueError: a tool choice, parallel-calls switch or output schema in the settings that is not one.
    """
    finalize = rs.finalizing
    offered: Sequence[ToolInfo] = [] if finalize else rs.tools
    fixed, passthrough = cfg.request_split
    output = cfg.output
    options = fixed
    if finalize or rs.tool_choice is not None or output is not None:  # else: the loop's fixed options, as split
        choice: ToolChoice | None = fixed.tool_choice if rs.tool_choice is None else tool_choice_of(rs.tool_choice)
        if finalize and output is not None and not output.native:
            offered = [output.info()]
            choice = NamedTool(output.name)
        elif finalize:
            choice = "none"
        native = output.output_schema() if output is not None and output.native else fixed.output
        options = RequestOptions(tool_choice=choice, parallel_tool_calls=fixed.parallel_tool_calls, output=native,
                                 finalize=finalize)
    return ModelRequest(messages=HistoryView(rs.messages), tools=offered, settings=dict(passthrough),
                        options=options, run_tools=rs.tools, run_id=run_id, turn=rs.turn)


__all__ = ["request_for", "run_started"]
