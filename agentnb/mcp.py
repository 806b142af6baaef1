"""Tools from Model Context Protocol servers, run through the same path as local tools.

An :class:`MCPServer` names a server: a command started as a subprocess and spoken to over stdio
(:meth:`MCPServer.stdio`), or a streamable-HTTP endpoint (:meth:`MCPServer.http`). The first time its tools are
asked for (``Loop(tools=[server])``, ``server.tools()``) it connects with the official ``mcp`` SDK, lists the
server's tools and turns each into an :class:`MCPTool`, which is an ordinary :class:`agentnb.Tool`:

- the schema the model sees is the server's ``inputSchema``, verbatim, and the arguments the model sends are
  validated against that same schema (JSON Schema, with ``jsonschema``): a bad call is a ``schema`` rejection
  the model reads, exactly as for a local tool, and never reaches the server;
- the annotations become agentnb's risk model: ``readOnlyHint`` -> ``read`` (runs without asking),
  ``destructiveHint`` -> ``dangerous``, anything else -> ``write`` (both wait for a person, by risk), and
  ``idempotentHint`` -> ``idempotent``. Annotations are the server's claims about itself: ``risk=`` overrules
  them per tool, and ``trust_annotations=False`` treats every tool of an untrusted server as a write;
- approval, idempotency keys and the effect ledger, timeouts, and result binding are the registry's and the
  run's, unchanged. A side-effecting call also hands its idempotency key to the server in the request's
  ``_meta`` (``agentnb/idempotency_key``), so a server can deduplicate a retried write.

The tools are listed when the server is first connected; a loop keeps the tools it was built with, and a tool the
server no longer has after a restart answers with the server's own error.

Where the sessions live. An MCP client session is an asyncio object bound to the loop that opened it, and a
notebook cell already runs an event loop in its thread. Every session therefore lives on agentnb's private
background loop (:mod:`agentnb._aio`), owned by one task per connection that enters the SDK's context managers
and leaves them (the SDK requires one task to do both). A call is a coroutine submitted to that loop; the run's
worker thread awaits it through ``asyncio.wrap_future``, so a timeout that cancels the worker's task cancels the
remote call too. No nest_asyncio.

What a call can come back as (each becomes the call's result through the registry, never an exception that
leaves the loop):

- ``structuredContent`` -> the value (the model sees it as JSON); otherwise the text blocks, joined. Images,
  audio and binary resources become a short bracketed note: a tool result is text;
- ``isError`` -> an error result with the server's text (:class:`~agentnb.exceptions.MCPToolError`);
- a JSON-RPC error -> an error result naming the server (:class:`~agentnb.exceptions.MCPServerError`);
- the connection lost (the process exited, the HTTP server went away) -> an error result that says so, quotes
  the server's last stderr lines, and says the call's effect is unknown; the dead connection is dropped and the
  next call starts (or reaches) the server again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ._aio import run_coroutine, submit
from .exceptions import MCPServerError, MCPToolError, ToolDefinitionError
from .redact import redact_text, register_secret
from .tools import ApprovalPolicy, Risk, Tool, ToolContext

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from mcp import Client
    from mcp.types import CallToolResult, ContentBlock, RequestParamsMeta, ToolAnnotations
    from mcp.types import Tool as RemoteTool

__all__ = ["IDEMPOTENCY_META_KEY", "MCPServer", "MCPTool", "SchemaArguments"]

IDEMPOTENCY_META_KEY = "agentnb/idempotency_key"
"""The ``_meta`` key under which a side-effecting call carries its idempotency key to the server."""

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_OWNERS: set[asyncio.Task[None]] = set()
"""The tasks that own open sessions (on the background loop)."""
_CREDENTIAL = re.compile(r"(?i)key|token|secret|password|passwd|authorization|cookie|credential")
_INSTALL_HINT = "MCP tools need the official MCP SDK: pip install 'agentnb[mcp]'"


def _import_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise ImportError(_INSTALL_HINT) from exc


class SchemaArguments(BaseModel):
    """Arguments checked against a JSON schema (an MCP tool's ``inputSchema``) and kept exactly as sent.

    Each MCP tool gets a subclass bound to its schema (see :func:`schema_arguments`); ``model_validate`` runs
    JSON-schema validation and raises pydantic's ``ValidationError`` with one entry per violation, so the
    registry reports it to the model like any other schema error.
    """

    model_config = ConfigDict(frozen=True)

    arguments: dict[str, Any]
    """The arguments, unchanged (JSON-schema validation does not coerce or fill in defaults: the server does)."""

    json_schema: ClassVar[dict[str, Any]] = {}
    """The schema the arguments are checked against."""
    json_schema_validator: ClassVar[Validator | None] = None

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        validator = cls.json_schema_validator
        if validator is None:
            raise TypeError(f"{cls.__name__} is not bound to a schema; build it with schema_arguments()")
        if not isinstance(data, dict):
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                type=PydanticCustomError("json_schema", "{reason}", {"reason": "the arguments must be a JSON object"}),
                loc=(), input=data)])
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, [_error_details(e) for e in errors])
        return {"arguments": data}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The bound JSON schema itself (the server's), not a schema of this wrapper."""
        schema: dict[str, Any] = json.loads(json.dumps(cls.json_schema))  # a copy the caller may change
        return schema


def _error_details(err: Any) -> InitErrorDetails:
    """One jsonschema error as a pydantic error entry: where (the path into the arguments) and what."""
    loc: tuple[int | str, ...] = tuple(err.absolute_path)
    message = str(err.message)
    if len(message) > 300:  # jsonschema quotes the offending value, which can be a whole document
        message = message[:300] + "…"
    if err.validator == "required" and isinstance(err.instance, dict):
        # jsonschema reports a missing property at its parent; name the property itself, as pydantic does
        for prop in err.validator_value:
            if prop not in err.instance and message.startswith(repr(prop)):
                loc, message = (*loc, prop), "Field required"
                break
    return InitErrorDetails(type=PydanticCustomError("json_schema", "{reason}", {"reason": message}),
                            loc=loc, input=err.instance)


def schema_arguments(name: str, schema: dict[str, Any]) -> type[SchemaArguments]:
    """A :class:`SchemaArguments` subclass that validates against ``schema``.

    Raises:
        ToolDefinitionError: the schema itself is not valid JSON Schema.

    Example:
        >>> Args = schema_arguments("Add", {"type": "object", "properties": {"a": {"type": "integer"}},
        ...                                  "required": ["a"]})
        >>> Args.model_validate({"a": 2}).arguments
        {'a': 2}
        >>> Args.model_validate({"a": "2"})
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Add
        a
          '2' is not of type 'integer' ...
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    validator_cls = validator_for(schema, default=Draft202012Validator)
    try:
        validator_cls.check_schema(schema)
    except SchemaError as exc:
        raise ToolDefinitionError(f"{name}: the input schema is not valid JSON Schema: {exc.message}") from exc
    namespace = {"json_schema": schema, "json_schema_validator": validator_cls(schema), "__module__": __name__}
    return cast(type[SchemaArguments], type(name, (SchemaArguments,), namespace))


def _risk_of(annotations: ToolAnnotations | None) -> tuple[Risk, bool]:
    """(risk, idempotent) from a tool's MCP annotations (hints; the MCP spec's defaults are destructive)."""
    if annotations is None:
        return "write", False
    if annotations.read_only_hint:
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
    source: MCPServer | None = field(default=None, compare=False)
    """The server object that runs the calls."""

    def dump(self, validated: BaseModel) -> dict[str, Any]:
        """The validated arguments, exactly as the model sent them (the server applies its own defaults)."""
        return dict(cast(SchemaArguments, validated).arguments)

    def invoke(self, validated: BaseModel, context: ToolContext | None = None,
               on_loop: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = None) -> Any:
        """Call the server and wait in this thread; ``on_loop`` receives a task whose cancelling cancels the call.

        Raises:
            MCPToolError: the tool answered ``isError``.
            MCPServerError: the server could not be reached, lost the connection, or answered a protocol error.
        """
        arguments = self.dump(validated)
        meta = {IDEMPOTENCY_META_KEY: context.idempotency_key} if context and context.idempotency_key else None
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(self._remote(arguments, meta))
            if on_loop is not None:
                on_loop(loop, task)
            return loop.run_until_complete(task)
        finally:
            loop.close()

    async def _remote(self, arguments: dict[str, Any], meta: dict[str, Any] | None) -> Any:
        assert self.source is not None, "an MCPTool is built by MCPServer.tools()"
        # The session lives on the background loop; cancelling this task cancels the future, which cancels the call
        return await asyncio.wrap_future(submit(self.source._call(self.remote_name, arguments, meta)))

    def __call__(self, *args: Any, **arguments: Any) -> Any:
        """Call the tool directly (from a notebook cell too), with keyword arguments checked against the schema."""
        if args:
            raise TypeError(f"MCP tool {self.name!r} takes keyword arguments only (the schema names them)")
        assert self.source is not None, "an MCPTool is built by MCPServer.tools()"
        checked = self.dump(self.validate(arguments))
        # not invoke(): that runs a loop of its own in this thread, and a notebook's thread already runs one
        return run_coroutine(self.source._call(self.remote_name, checked, None), self.timeout)

    def __repr__(self) -> str:
        return f"<agentnb.MCPTool {self.server}:{self.remote_name}({', '.join(self._field_names)}) risk={self.risk}>"


class _Connection:
    """One session with the server, owned by one task on the background loop (it enters and leaves the SDK)."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.stop = asyncio.Event()
        self.closed = asyncio.Event()
        self.broken = False
        self.error: BaseException | None = None
        self.stderr: IO[str] | None = None
        self._tail = ""

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.broken and not self.closed.is_set()

    async def own(self, client: Client, ready: asyncio.Future[list[RemoteTool]]) -> None:
        try:
            async with client:
                self.client = client
                listing = await _list_all(client)
                if not ready.done():
                    ready.set_result(listing)
                await self.stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
        except BaseException as exc:  # the connection's end, whatever ended it, is reported by the calls
            self.error = exc
            if not ready.done():
                ready.set_exception(exc)
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
        finally:
            self.tail()
            if self.stderr is not None:
                self.stderr.close()
            self.closed.set()

    def tail(self, lines: int = 4) -> str:
        """The last lines the server wrote to stderr (stdio servers only)."""
        f = self.stderr
        if f is not None and not f.closed:
            try:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4000))  # a chatty server's log can be long
                self._tail = "\n".join(f.read().strip().splitlines()[-lines:])
            except (OSError, ValueError):  # noqa: S110 - a stderr we cannot read only loses the quote
                pass
        return self._tail


async def _list_all(client: Client) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(1000):  # a server whose cursor never ends cannot hang the listing
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP transport over an HTTP client of our own (closed with the session)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers or None) as http_client:
        async with streamable_http_client(url, http_client=http_client) as streams:
            yield streams


def _root(exc: BaseException) -> BaseException:
    """The one exception inside (nested) single-member exception groups (anyio's task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "the connection closed"
    exc = _root(exc)
    from mcp import MCPError

    if isinstance(exc, MCPError):
        return f"{exc.message} (MCP error {exc.code})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _connection_lost(exc: BaseException) -> bool:
    """Whether an error means the transport is gone (as opposed to the server answering with an error)."""
    import anyio
    import httpx2
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, BaseExceptionGroup):
        return any(_connection_lost(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, OSError | EOFError | anyio.ClosedResourceError | anyio.BrokenResourceError
                      | anyio.EndOfStream | httpx2.TransportError)


def _text_of(blocks: Sequence[ContentBlock]) -> str:
    """The content blocks as the text a model reads (non-text blocks become a short note)."""
    from mcp.types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

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


def _value_of(server: str, tool: str, result: CallToolResult, output_schema: dict[str, Any] | None) -> Any:
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


class MCPServer:
    """An MCP server whose tools a loop may call: ``Loop(tools=[server, my_tool])``.

    Build one with :meth:`stdio` (a command agentnb starts, speaking MCP over its stdin/stdout) or :meth:`http`
    (a streamable-HTTP endpoint). Nothing connects until the tools are first needed; the session then stays open
    (on agentnb's background event loop) until :meth:`close`, or the end of a ``with`` block. A server that dies
    is started (or reached) again on the next call.

    Args:
        target: an ``mcp.StdioServerParameters`` or a URL; :meth:`stdio` and :meth:`http` build it for you.
        name: the name shown on calls, cards and frames (default: the name the server reports).
        headers: HTTP headers for every request (``http`` only), e.g. an ``Authorization`` header.
        timeout: seconds before a call is answered ``timeout`` (the tool timeout of every tool of the server).
        connect_timeout: seconds to wait for the server to start and answer the handshake.
        approval: approval policy for every tool of the server (default: by risk, as for local tools).
        risk: per-tool risk that overrules the server's annotations, e.g. ``{"delete_file": "dangerous"}``.
        trust_annotations: False: ignore the server's annotations; every tool is a ``write`` (asks a person)
            unless ``risk=`` says otherwise. Annotations are the server's own claims: use False for a server
            you do not trust.
        prefix: prepended to every tool name the model sees (``prefix="shop_"``), to keep two servers' tools apart.

    Example:
        >>> import sys, agentnb as anb
        >>> shop = anb.MCPServer.stdio(sys.executable, ["-m", "agentnb.mcp_demo"])
        >>> shop
        <agentnb.MCPServer stdio: ... -m agentnb.mcp_demo (not connected)>
        >>> loop = anb.Loop(model=anb.ScriptedModel([  # doctest: +SKIP
        ...     {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "42"}}]},
        ...     {"text": "Order 42 is a blue kettle."}]), tools=[shop])
        >>> shop.close()
    """

    def __init__(
        self,
        target: Any,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        connect_timeout: float = 60.0,
        approval: ApprovalPolicy = None,
        risk: Mapping[str, Risk] | None = None,
        trust_annotations: bool = True,
        prefix: str = "",
    ) -> None:
        _import_mcp()
        from mcp import StdioServerParameters

        if isinstance(target, str):
            self.transport, self.label = "http", target
        elif isinstance(target, StdioServerParameters):
            self.transport, self.label = "stdio", shlex.join([target.command, *target.args])
        else:
            raise TypeError(f"MCPServer needs a URL or StdioServerParameters, got {type(target).__name__}; "
                            "use MCPServer.stdio(command, args) or MCPServer.http(url)")
        if headers and self.transport != "http":
            raise TypeError("headers= is for MCPServer.http(url, headers=...)")
        for tool_name, r in (risk or {}).items():
            if r not in ("read", "write", "dangerous"):
                raise ToolDefinitionError(f"risk for {tool_name!r} must be 'read', 'write' or 'dangerous', got {r!r}")
        self.target = target
        self.headers = dict(headers or {})
        # a credential handed to the server must not come back in an error result, a frame or a checkpoint
        env = target.env if self.transport == "stdio" else None
        for key, value in [*self.headers.items(), *(env or {}).items()]:
            if _CREDENTIAL.search(key):
                register_secret(value)
                register_secret(value.split(" ", 1)[1] if " " in value else None)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.approval = approval
        self.risk = dict(risk or {})
        self.trust_annotations = trust_annotations
        self.prefix = prefix
        self.connections = 0
        """How many times a session was opened (more than one: the server was started again after a failure)."""
        self._name = name
        self._reported_name: str | None = None
        self._listing: list[RemoteTool] | None = None
        self._tools: dict[str, MCPTool] = {}
        self._conn: _Connection | None = None
        self._lock: asyncio.Lock | None = None

    @classmethod
    def stdio(cls, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
              cwd: str | None = None, **options: Any) -> MCPServer:
        """A server agentnb starts as a subprocess and speaks to over its stdin/stdout.

        The process gets the SDK's default environment (PATH, HOME, ...) plus ``env``; its stderr is kept in a
        temporary file and quoted when the server fails. Other options are those of :class:`MCPServer`.

        Example:
            >>> import sys, agentnb as anb
            >>> anb.MCPServer.stdio(sys.executable, ["-m", "agentnb.mcp_demo"], name="shop").name
            'shop'
        """
        _import_mcp()
        from mcp import StdioServerParameters

        params = StdioServerParameters(command=command, args=list(args), env=dict(env) if env else None, cwd=cwd)
        return cls(params, **options)

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8765/mcp``).

        Example:
            >>> import agentnb as anb
            >>> anb.MCPServer.http("http://127.0.0.1:8765/mcp")
            <agentnb.MCPServer http: http://127.0.0.1:8765/mcp (not connected)>
        """
        return cls(url, headers=headers, **options)

    # --- what users read -------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name shown on calls: the one given, else the one the server reports, else the command or URL."""
        return self._name or self._reported_name or self.label

    @property
    def connected(self) -> bool:
        """Whether a session is open now."""
        return self._conn is not None and self._conn.usable

    @property
    def tool_names(self) -> list[str]:
        """The names of the server's tools, as the server lists them (connects if needed)."""
        return [t.name for t in self._listed()]

    def tools(self, include: Sequence[str] | None = None, exclude: Sequence[str] = ()) -> list[MCPTool]:
        """The server's tools as agentnb tools (connects if needed), optionally only some of them.

        Args:
            include: only these tools (names as the server lists them), in the server's order.
            exclude: all tools but these.

        Raises:
            ToolDefinitionError: a name in ``include``/``exclude`` the server does not have, or a tool whose name
                or schema cannot be offered to a model.

        Example:
            >>> import sys, agentnb as anb
            >>> with anb.MCPServer.stdio(sys.executable, ["-m", "agentnb.mcp_demo"]) as shop:  # doctest: +SKIP
            ...     [t.name for t in shop.tools(exclude=["refund"])]
            ['lookup_order', 'list_orders', 'set_note']
        """
        listing = self._listed()
        names = [t.name for t in listing]
        for wanted in (*(include or ()), *exclude, *self.risk):
            if wanted not in names:
                raise ToolDefinitionError(
                    f"MCP server {self.name!r} has no tool {wanted!r}; it has: {', '.join(names)}"
                )
        keep = set(include) if include is not None else set(names)
        keep -= set(exclude)
        out = []
        for remote in listing:
            if remote.name in keep:
                if remote.name not in self._tools:
                    self._tools[remote.name] = self._tool(remote)
                out.append(self._tools[remote.name])
        return out

    def as_tools(self) -> list[Tool]:
        """All the server's tools (what ``Loop(tools=[server])`` registers)."""
        return list(self.tools())

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call one tool directly, outside any run (no validation, approval or ledger): for trying a server out.

        Returns:
            The structured result, or the result's text.

        Raises:
            MCPToolError: the tool answered ``isError``.
            MCPServerError: the server could not be reached, lost the connection, or answered a protocol error.
            TimeoutError: ``timeout`` passed.
        """
        return run_coroutine(self._call(tool, dict(arguments or {}), None), self.timeout)

    def connect(self) -> MCPServer:
        """Open the session now (start the process, or reach the URL) and list the tools; returns the server.

        Raises:
            MCPServerError: the server could not be started or reached (with its last stderr lines).
        """
        run_coroutine(self._connected())
        return self

    def close(self) -> None:
        """Close the session (a stdio server's process is asked to exit, then killed).

        Calling it again is harmless; a later call opens a new session.
        """
        run_coroutine(self._close())

    def __enter__(self) -> MCPServer:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        named = f"{self.name!r} " if self._name or self._reported_name else ""
        state = f"connected, {len(self._listing or [])} tools" if self.connected else "not connected"
        return f"<agentnb.MCPServer {named}{self.transport}: {self.label} ({state})>"

    # --- building the tools ----------------------------------------------------------------------------------

    def _listed(self) -> list[RemoteTool]:
        if self._listing is None:
            self.connect()
        assert self._listing is not None
        return self._listing

    def _tool(self, remote: RemoteTool) -> MCPTool:
        name = self.prefix + remote.name
        if not _NAME.fullmatch(name):
            raise ToolDefinitionError(
                f"MCP server {self.name!r}: tool name {name!r} must be 1-64 characters of letters, digits, '_', '.' "
                f"or '-' to be offered to a model; leave it out with tools(exclude=[{remote.name!r}])"
            )
        if remote.name in self.risk:
            risk, idempotent = self.risk[remote.name], bool(remote.annotations and remote.annotations.idempotent_hint)
        elif self.trust_annotations:
            risk, idempotent = _risk_of(remote.annotations)
        else:
            risk, idempotent = "write", False
        schema = dict(remote.input_schema)
        model_name = "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]", name) if p) or "Args"
        try:
            args_model = schema_arguments(model_name, schema)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"MCP server {self.name!r}, tool {remote.name!r}: {exc}") from exc
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"))

        def call(**arguments: Any) -> Any:
            return self.call(remote.name, arguments)

        call.__name__ = name
        annotations = remote.annotations.model_dump(by_alias=True, exclude_none=True) if remote.annotations else {}
        return MCPTool(
            name=name,
            description=remote.description or (remote.annotations and remote.annotations.title) or remote.name,
            fn=call,
            args_model=args_model,
            parameters=schema,
            risk=risk,
            approval=self.approval,
            timeout=self.timeout,
            is_async=True,  # it awaits the background loop: the run gives it a thread and can cancel it
            # side-effecting calls receive their context, to hand the idempotency key to the server
            context_param="context" if risk != "read" else None,
            idempotent=idempotent,
            schema_version=hashlib.sha256(canonical.encode()).hexdigest()[:16],
            server=self.name,
            remote_name=remote.name,
            annotations=annotations,
            source=self,
            _field_names=tuple((schema.get("properties") or {}).keys()),
        )

    # --- on the background loop ------------------------------------------------------------------------------

    def _client(self, conn: _Connection) -> Client:
        from mcp import Client
        from mcp.client.stdio import stdio_client
        from mcp.types import Implementation

        from . import __version__

        if self.transport == "stdio":
            # a file of our own: a notebook's sys.stderr has no file descriptor to hand to a subprocess
            # append mode: the child shares the file offset, so reading the tail must not move where it writes
            conn.stderr = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")
            transport: Any = stdio_client(self.target, errlog=conn.stderr)
        else:
            transport = _http_transport(self.target, self.headers)
        return Client(transport, client_info=Implementation(name="agentnb", version=__version__))

    async def _connected(self) -> _Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent calls after a crash start one new session, not several
            conn = self._conn
            if conn is not None and conn.usable:
                return conn
            if conn is not None:
                conn.stop.set()  # let the old session wind down in its own task
            conn = _Connection()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[list[RemoteTool]] = loop.create_future()
            task = loop.create_task(conn.own(self._client(conn), ready))
            _OWNERS.add(task)  # the loop keeps only weak references to tasks; a session must not be collected
            task.add_done_callback(_OWNERS.discard)
            try:
                listing = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
            except asyncio.CancelledError:
                task.cancel()
                raise
            except BaseException as exc:
                task.cancel()
                await asyncio.wait({task}, timeout=10)
                verb = "start" if self.transport == "stdio" else "reach"
                why = (f"no answer within {self.connect_timeout:g} s" if isinstance(exc, TimeoutError)
                       else _describe(exc))
                raise MCPServerError(f"could not {verb} MCP server {self.label}: {why}.{self._stderr(conn)}") from exc
            self._conn = conn
            self.connections += 1
            assert conn.client is not None
            info = conn.client.server_info
            self._reported_name = info.name if info is not None and info.name else None
            self._listing = listing
            return conn

    async def _call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None) -> Any:
        conn = await self._connected()
        assert conn.client is not None
        call = asyncio.ensure_future(conn.client.call_tool(tool, arguments, meta=cast("RequestParamsMeta", meta)))
        closed = asyncio.ensure_future(conn.closed.wait())
        try:
            await asyncio.wait({call, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not call.done():
                call.cancel()  # the connection ended first, or this call was cancelled (a timeout)
        if not call.done() or call.cancelled():
            conn.broken = True
            raise self._lost(tool, conn, conn.error)
        exc = call.exception()
        if exc is None:
            remote = next((t for t in self._listing or () if t.name == tool), None)
            return _value_of(self.name, tool, call.result(), remote.output_schema if remote else None)
        if _connection_lost(exc):
            conn.broken = True
            conn.stop.set()
            raise self._lost(tool, conn, exc) from exc
        raise MCPServerError(f"MCP server {self.name!r} answered the call of {tool!r} with an error: "
                             f"{_describe(exc)}") from exc

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.stop.set()
            await conn.closed.wait()

    def _lost(self, tool: str, conn: _Connection, exc: BaseException | None) -> MCPServerError:
        again = "started again" if self.transport == "stdio" else "reached again"
        return MCPServerError(
            f"MCP server {self.name!r} ({self.label}) lost the connection while {tool!r} ran ({_describe(exc)}). "
            f"Whether the call took effect is unknown. The server will be {again} on the next call."
            f"{self._stderr(conn)}"
        )

    @staticmethod
    def _stderr(conn: _Connection) -> str:
        tail = redact_text(conn.tail())  # a server may print the token it was given
        return f"\nIts stderr ends with:\n{tail}" if tail else ""
