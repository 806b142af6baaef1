"""An MCP server for the tests: slow calls, crashes, protocol errors, a rich schema and non-text content.

Run as ``python tests/mcp_server.py`` (stdio) or ``python tests/mcp_server.py --http PORT``. Three modes for the
failures a client must survive:

- calls that never answer: ``hang`` (a read) and ``hang_write`` (a write) wait for ever;
- malformed answers: ``garble(kind)`` answers its own call on the wire with a message that is not JSON
  (``not_json``), a response for an id nobody sent (``wrong_id``), a response without a result
  (``no_result``) or a result that is not a CallToolResult (``not_a_result``), and then never answers properly;
- relisting with new annotations: ``--annotations FILE`` reads the annotations of the tool ``flip`` from a JSON
  file when the server starts, so a test rewrites the file, restarts the server and sees the new listing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
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


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def hang() -> str:
    """Never answer (a read)."""
    await asyncio.Event().wait()
    return "never"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def hang_write(target: str) -> str:
    """Never answer (a write)."""
    await asyncio.Event().wait()
    return f"never wrote {target}"


def _wire(line: str) -> None:
    """Write one line on the stdio wire itself, beside the SDK (it moved fd 1 to a private descriptor)."""
    from mcp.server import stdio

    claim = stdio._claims.get(1)
    fd = claim.private_fd if claim is not None and claim.private_fd is not None else 1
    os.write(fd, (line + "\n").encode())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def garble(kind: Literal["not_json", "wrong_id", "no_result", "not_a_result"], ctx: Context) -> str:
    """Answer this call with a malformed JSON-RPC message, then never answer it properly."""
    rid: Any = ctx.request_context.request_id
    _wire({
        "not_json": "this is not JSON {",
        "wrong_id": json.dumps({"jsonrpc": "2.0", "id": 987654321, "result": {"content": []}}),
        "no_result": json.dumps({"jsonrpc": "2.0", "id": rid}),
        "not_a_result": json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list"}}),
    }[kind])
    await asyncio.Event().wait()
    return "never"


def flip() -> str:
    """A tool whose annotations come from ``--annotations FILE`` (read when the server starts)."""
    return "flipped"


if __name__ == "__main__":
    if "--annotations" in sys.argv:
        at = sys.argv.index("--annotations")
        notes = json.loads(Path(sys.argv[at + 1]).read_text())
        del sys.argv[at:at + 2]
        server.add_tool(flip, annotations=ToolAnnotations.model_validate(notes))
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
