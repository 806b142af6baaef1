"""What an MCP call comes back as: the value a model reads, or the error that names the server.

Each becomes the call's result through the registry, never an exception that leaves the loop:

- ``structuredContent`` -> the value (the model sees it as JSON); otherwise the text blocks, joined. Images,
  audio and binary resources become a short bracketed note: a tool result is text;
- ``isError`` -> an error result with the server's text (:class:`~agentnb.exceptions.MCPToolError`);
- a JSON-RPC error -> an error result naming the server (:class:`~agentnb.exceptions.MCPServerError`);
- a result that is not a CallToolResult -> an error result that says what is wrong with it;
- a message that breaks the protocol while the call waits (not JSON-RPC, an answer to an id never sent, a
  response without a result) -> an error result that says so; the session is closed and started again
  (:mod:`agentnb.mcp._connection`);
- the connection lost (the process exited, the HTTP server went away) -> an error result that says so, quotes
  the server's last stderr lines, and says the call's effect is unknown; the dead connection is dropped and the
  next call starts (or reaches) the server again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import MCPToolError

if TYPE_CHECKING:
    from mcp.types import CallToolResult, ContentBlock


def _root(exc: BaseException) -> BaseException:
    """The one exception inside (nested) single-member exception groups (anyio's task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe_result(exc: BaseException | None) -> str:
    if exc is None:
        return "the connection closed"
    exc = _root(exc)
    from mcp import MCPError
    from pydantic import ValidationError

    if isinstance(exc, MCPError):
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, ValidationError):  # the first problems, without pydantic's links and input dumps
        errors = exc.errors(include_url=False)
        # a union's errors name each member it tried: those of CallToolResult say what a tool call lacks
        own = [(e["loc"][1:], e["msg"]) for e in errors if e["loc"][:1] == ("CallToolResult",)]
        shown = own or [(e["loc"], e["msg"]) for e in errors]
        problems = [f"{'.'.join(map(str, loc)) or '(result)'}: {msg}" for loc, msg in shown]
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return "; ".join(problems[:3]) + more
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def not_a_result(exc: BaseException) -> bool:
    """Whether a call failed because the server's result does not validate as a CallToolResult."""
    from pydantic import ValidationError

    return isinstance(_root(exc), ValidationError)


def connection_lost(exc: BaseException) -> bool:
    """Whether an error means the transport is gone (as opposed to the server answering with an error)."""
    import anyio
    import httpx2
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, BaseExceptionGroup):
        return any(connection_lost(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, OSError | EOFError | anyio.ClosedResourceError | anyio.BrokenResourceError
                      | anyio.EndOfStream | httpx2.TransportError)


def _text_of(blocks: Sequence[ContentBlock]) -> str:
    """The content blocks as the text a model reads (non-text blocks become a short note)."""
    from mcp.types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents

    parts: list[str] = []
    for b in blocks:
        if isinstance(b, TextContent):
            parts.append(b.text)
        elif isinstance(b, ImageContent | AudioContent):
            parts.append(f"[{b.type}: {b.mime_type}, {len(b.data)} base64 characters, not shown]")
        elif isinstance(b, EmbeddedResource):
            r = b.resource
            parts.append(r.text if isinstance(r, TextResourceContents) else f"[binary resource {r.uri}, not shown]")
        elif isinstance(b, ResourceLink):
            parts.append(f"[resource {b.uri} ({b.name})]")
        else:  # pragma: no cover - a content type newer than this SDK's union
            parts.append(f"[{getattr(b, 'type', 'unknown')} content, not shown]")
    return "\n".join(parts)


def value_of(server: str, tool: str, result: CallToolResult, output_schema: dict[str, Any] | None) -> Any:
    text = _text_of(result.content)
    if result.is_error:
        raise MCPToolError(text or f"MCP tool {tool!r} of server {server!r} reported an error without a message")
    value = result.structured_content
    if value is None:
        return text
    if (isinstance(value, dict) and list(value) == ["result"] and output_schema is not None
            and list(output_schema.get("properties") or {}) == ["result"]):
        # the Python SDK wraps a tool's non-object return value (a str, a list) as {"result": value} in its
        # structured content and its output schema alike: hand the model the value the tool returned
        return value["result"]
    return value
