"""The tools of one loop: :class:`ToolRegistry`, looked up by name only, and :class:`ToolSource`.

The model's text never selects an arbitrary callable: a call is looked up only in the loop's registry, whose
names are fixed when it is built (two tools of one name are a :class:`~agentnb.exceptions.ToolDefinitionError`).
:meth:`ToolRegistry.run` runs one validated call in the calling thread and turns whatever happens, an exception
included, into an :class:`~agentnb.tools.Outcome`. A :class:`ToolSource` (an MCP server) hands the registry
several tools at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import BaseModel

from ..events import ToolInfo
from ..exceptions import ToolDefinitionError
from ._definition import Tool, ToolContext
from ._results import Outcome, converted_outcome
from ._schema import tool


@runtime_checkable
class ToolSource(Protocol):
    """Something that provides several tools at once, such as an :class:`agentnb.MCPServer`.

    ``Loop(tools=[source, my_tool])`` registers every tool of the source.
    """

    def as_tools(self) -> list[Tool]:
        """The tools to register."""
        ...


class ToolRegistry:
    """The tools of one loop, looked up by name only.

    Example:
        >>> @tool
        ... def ping() -> str:
        ...     '''Reply pong.'''
        ...     return "pong"
        >>> ToolRegistry([ping]).names
        ['ping']
    """

    def __init__(self, tools: Iterable[Tool | ToolSource | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            for t in item.as_tools() if isinstance(item, ToolSource) else [item]:
                t = t if isinstance(t, Tool) else tool(t)
                if t.name in self._tools:
                    hint = "give one of the servers prefix=..." if t.server else "give one of them name=..."
                    raise ToolDefinitionError(f"two tools are named {t.name!r}; {hint}")
                self._tools[t.name] = t
        self._infos = [ToolInfo(**t.info()) for t in self._tools.values()]

    @property
    def infos(self) -> list[ToolInfo]:
        """The tools as offered to a model (built once; the registry does not change)."""
        return self._infos

    @property
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name`` as it stands now (:meth:`Tool.current`), or None."""
        t = self._tools.get(name)
        return None if t is None else t.current()

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def unknown_message(self, name: str) -> str:
        """The error a model gets for a name that is not registered."""
        available = ", ".join(self._tools) or "(none)"
        return f"Unknown tool '{name}'. Available tools: {available}."

    def run(
        self, t: Tool, validated: BaseModel, context: ToolContext | None,
        on_loop: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = None,
        *, simulated: bool = False,
    ) -> Outcome:
        """Run one validated call in this thread and turn whatever happens into an :class:`Outcome`.

        ``KeyboardInterrupt`` propagates (the driver pauses the run cleanly); any other exception, ``SystemExit``
        and ``CancelledError`` included, is an error result for this call. ``simulated``: the tool's simulator
        runs instead (see ``@tool(simulate=...)``).
        """
        start = time.perf_counter()
        try:
            value = t.invoke(validated, context, on_loop, simulated=simulated)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the tool's own failure is data for the model
            return Outcome(
                status="error",
                content=f"Tool '{t.name}' raised {type(exc).__name__}: {exc}",
                error_type=type(exc).__name__,
                error_message=str(exc),
                duration_s=time.perf_counter() - start,
            )
        duration = time.perf_counter() - start
        return converted_outcome(t, value, duration)


def as_registry(tools: ToolRegistry | Iterable[Tool | ToolSource | Callable[..., Any]]) -> ToolRegistry:
    """A registry from a registry or a list of tools/functions."""
    return tools if isinstance(tools, ToolRegistry) else ToolRegistry(cast(Iterable[Any], tools))
