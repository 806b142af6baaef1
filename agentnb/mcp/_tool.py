"""An MCP server's tool as an agentnb tool: :class:`MCPTool`, and the annotations read as risk.

The annotations become agentnb's risk model (:func:`risk_of`): ``readOnlyHint`` -> ``read`` (runs without
asking), ``destructiveHint`` -> ``dangerous``, anything else -> ``write`` (both wait for a person, by risk), and
``idempotentHint`` -> ``idempotent``. The MCP spec says ``destructiveHint`` and ``idempotentHint`` are
meaningful only when ``readOnlyHint`` is false, so a tool that claims both ``readOnlyHint`` and
``destructiveHint`` is a read.

An :class:`MCPTool` is an ordinary :class:`~agentnb.Tool` whose :meth:`~MCPTool.invoke` awaits the server's
session on the background loop (see :mod:`agentnb.mcp._connection`); a side-effecting call carries its
idempotency key in the request's ``_meta`` under :data:`IDEMPOTENCY_META_KEY`. Its risk follows the server's
latest listing (:meth:`~MCPTool.current`, see :mod:`agentnb.mcp._server`), and a run that is cancelled lets go of
its calls in flight (``cancellable``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from pydantic import BaseModel

from .._aio import run_coroutine, submit
from ..tools import Risk, Tool, ToolContext
from ._schema import SchemaArguments

if TYPE_CHECKING:
    from mcp.types import ToolAnnotations

class Caller(Protocol):
    """What a tool needs of the server that built it (:class:`~agentnb.MCPServer` is one).

    A way to call a tool there, the generation of its latest listing and a tool's form under it. A protocol
    rather than the server class: the server builds its tools, so naming it here would close an import circle
    (``tests/test_walls.py``).
    """

    generation: int
    """How many listings the server gave."""

    async def _call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None,
                    checked: Risk | None = None) -> Any:
        """Call ``tool`` on the server's session and return what it answered (``checked``: the call's risk)."""
        ...

    def _current(self, tool: MCPTool) -> MCPTool:
        """``tool`` under the latest listing."""
        ...


IDEMPOTENCY_META_KEY = "agentnb/idempotency_key"
"""The ``_meta`` key under which a side-effecting call carries its idempotency key to the server."""


_RANK: dict[str, int] = {"read": 0, "write": 1, "dangerous": 2}


def higher_risk(a: Risk, b: Risk) -> Risk:
    """The riskier of two risks."""
    return a if _RANK[a] >= _RANK[b] else b


def risk_of(annotations: ToolAnnotations | None) -> tuple[Risk, bool]:
    """(risk, idempotent) from a tool's MCP annotations (hints; the MCP spec's defaults are destructive)."""
    if annotations is None:
        return "write", False
    if annotations.read_only_hint:  # the spec: destructiveHint and idempotentHint mean nothing then
        return "read", False
    idempotent = bool(annotations.idempotent_hint)
    return ("dangerous" if annotations.destructive_hint else "write"), idempotent


@dataclass(frozen=True, repr=False)
class MCPTool(Tool):
    """A tool of an MCP server: an ordinary :class:`~agentnb.Tool` whose calls go to the server.

    Built by :meth:`MCPServer.tools`; ``server`` names the server, ``remote_name`` is the tool's name there
    (``name`` may carry the server's ``prefix``), ``annotations`` are the server's hints as it sent them.

    Example:
        >>> import sys, agentnb as anb
        >>> with anb.MCPServer.stdio(sys.executable, ["-m", "agentnb.mcp_demo"]) as shop:  # doctest: +SKIP
        ...     lookup = shop.tools(include=["lookup_order"])[0]
        ...     lookup.risk, lookup.server, lookup(order_id="42")["item"]
        ('read', 'shop', 'Blue kettle')
    """

    remote_name: str = ""
    """The tool's name on the server."""
    annotations: dict[str, Any] = field(default_factory=dict)
    """The server's annotations (``readOnlyHint`` and so on), as sent."""
    source: Caller | None = field(default=None, compare=False)
    """The server object that runs the calls."""
    generation: int = field(default=0, compare=False)
    """The server's listing this form of the tool was made from (see :meth:`current`)."""
    raised: bool = field(default=False, compare=False)
    """A later listing raised the risk this tool was built with."""

    cancellable: ClassVar[bool] = True
    """A cancelled run lets go of a call in flight: a read is cancelled on the server, a write left to finish."""

    def current(self) -> MCPTool:
        """The tool under the server's latest listing: the same tool, or one whose risk the listing raised.

        A new session lists the tools again; what the latest listing says can raise the risk (and so the
        approval a call needs), never lower it below this tool's own.
        """
        source = self.source
        if source is None or source.generation == self.generation:
            return self
        return source._current(self)

    def dump(self, validated: BaseModel) -> dict[str, Any]:
        """The validated arguments, exactly as the model sent them (the server applies its own defaults)."""
        return dict(cast(SchemaArguments, validated).arguments)

    def invoke(self, validated: BaseModel, context: ToolContext | None = None,
               on_loop: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = None,
               *, simulated: bool = False) -> Any:
        """Call the server and wait in this thread; ``on_loop`` receives a task whose cancelling cancels the call.

        An MCP tool has no simulator (``simulated`` is never asked of it: a fork refuses its writes instead).

        Raises:
            MCPToolError: the tool answered ``isError``.
            MCPServerError: the server could not be reached, lost the connection, or answered a protocol error.
        """
        assert not simulated, "an MCP tool has no simulator"
        arguments = self.dump(validated)
        key = context.idempotency_key if context else None
        meta = {IDEMPOTENCY_META_KEY: key} if key else None
        # a side-effecting call always starts with a key; one without was checked before a relist raised the risk
        checked: Risk = self.risk if key or not self.raised else "read"
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(self._remote(arguments, meta, checked))
            if on_loop is not None:
                on_loop(loop, task)
            return loop.run_until_complete(task)
        finally:
            loop.close()

    async def _remote(self, arguments: dict[str, Any], meta: dict[str, Any] | None, checked: Risk) -> Any:
        assert self.source is not None, "an MCPTool is built by MCPServer.tools()"
        # The session lives on the background loop; cancelling this task cancels the future, which cancels the call
        return await asyncio.wrap_future(submit(self.source._call(self.remote_name, arguments, meta, checked)))

    def __call__(self, *args: Any, **arguments: Any) -> Any:
        """Call the tool directly (from a notebook cell too), with keyword arguments checked against the schema."""
        if args:
            raise TypeError(f"MCP tool {self.name!r} takes keyword arguments only (the schema names them)")
        assert self.source is not None, "an MCPTool is built by MCPServer.tools()"
        checked = self.dump(self.validate(arguments))
        # not invoke(): that runs a loop of its own in this thread, and a notebook's thread already runs one
        limits = [t for t in (self.timeout, self.max_timeout) if t is not None]
        return run_coroutine(self.source._call(self.remote_name, checked, None), min(limits) if limits else None)

    def __repr__(self) -> str:
        return f"<agentnb.MCPTool {self.server}:{self.remote_name}({', '.join(self._field_names)}) risk={self.risk}>"
