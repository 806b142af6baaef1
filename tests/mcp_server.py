"""An MCP server for the tests: slow calls, crashes, protocol errors, a rich schema and non-text content.

Run as ``python tests/mcp_server.py`` (stdio) or ``python tests/mcp_server.py --http PORT``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Literal

from mcp import MCPError
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("lab", log_level="WARNING")


class Item(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d+$")
    qty: int = Field(ge=1, le=10)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def boom() -> str:
    """Crash inside the tool."""
    raise RuntimeError("secret detail")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def protocol_error() -> str:
    """Answer with a JSON-RPC error instead of a result."""
    raise MCPError(-32602, "the lab refuses this request")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def order(items: list[Item], mode: Literal["fast", "cheap"] = "cheap", note: str | None = None) -> dict[str, Any]:
    """Place an order of items (a schema with nesting, bounds, a pattern and an enum)."""
    return {"items": [i.model_dump() for i in items], "mode": mode, "note": note}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> Image:
    """A tiny image."""
    return Image(data=b"\x89PNG\r\n\x1a\n0000", format="png")


@server.tool()
def unannotated(text: str) -> str:
    """A tool without annotations (a write, by the MCP spec's defaults)."""
    return text.upper()


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def wipe(target: str, ctx: Context) -> dict[str, Any]:
    """A destructive tool that reports the request's _meta (to see the idempotency key)."""
    meta = ctx.request_context.meta or {}
    return {"wiped": target, "meta": {k: v for k, v in dict(meta).items() if k.startswith("agentnb/")}}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
