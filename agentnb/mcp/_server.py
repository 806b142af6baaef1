"""An MCP server whose tools a loop may call: :class:`MCPServer`, connecting, listing and calling.

An :class:`MCPServer` names a server: a command started as a subprocess and spoken to over stdio
(:meth:`MCPServer.stdio`), or a streamable-HTTP endpoint (:meth:`MCPServer.http`). It connects the first time
its tools are asked for, builds an :class:`~agentnb.mcp.MCPTool` per listed tool (with the risk its annotations
claim, or the one ``risk=`` and ``trust_annotations=False`` impose), and runs each call on the session's
background loop (:mod:`agentnb.mcp._connection`), turning the answer into a value or an error
(:mod:`agentnb.mcp._results`). A dead session is dropped and the next call starts (or reaches) the server again;
concurrent calls after a crash open one new session, not several.

No call waits for ever. Every tool carries the server's ``call_timeout`` (:data:`DEFAULT_CALL_TIMEOUT` unless
given) as its ceiling (``Tool.max_timeout``): the run stops waiting at the smallest of it, the tool's timeout and
the loop's, and the engine answers a read ``timeout`` and pauses a write as *outcome unknown*. A write the run
stopped waiting for goes on in the background so that its late outcome reaches the ledger, but not for ever
either: on the session it is given up twice ``call_timeout`` after it was sent (:data:`_GIVE_UP`). A session that
breaks the protocol ends at once (:mod:`agentnb.mcp._connection`).

Risk follows the latest listing, and what the user declared is a floor. A new session lists the tools again;
the loop's tools then answer with their latest form (:meth:`MCPTool.current`): a relist can raise a tool's risk
(a tool once listed read-only that now says it writes asks for approval), never lower it below what the tool was
built with, and neither can annotations lower a ``risk=`` the user gave. A call that was checked as a read is
never sent once the listing says the tool writes: it is answered with an error that says why, and the model's
next call is checked under the new listing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._aio import run_coroutine
from .._redact import redact_text, register_secret
from ..exceptions import MCPServerError, ToolDefinitionError
from ..tools import ApprovalPolicy, Risk, Tool
from ._connection import OWNERS, Connection, Garbled, http_transport, watched_call
from ._results import connection_lost, describe_result, not_a_result, value_of
from ._schema import schema_arguments
from ._tool import MCPTool, higher_risk, risk_of

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import RequestParamsMeta
    from mcp.types import Tool as RemoteTool

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CREDENTIAL = re.compile(r"(?i)key|token|secret|password|passwd|authorization|cookie|credential")
_INSTALL_HINT = "MCP tools need the official MCP SDK: pip install 'agentnb[mcp]'"

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds an MCP call may run unless ``MCPServer(call_timeout=...)`` says otherwise (the MCP TypeScript SDK's
default request timeout is the same minute)."""

_GIVE_UP = 2.0
"""A call the run stopped waiting for is given up on the session this many ``call_timeout`` after it was sent."""


def _import_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise ImportError(_INSTALL_HINT) from exc


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
        timeout: the tool timeout of every tool of the server (as a local tool's ``timeout``: it replaces the
            loop's ``tool_timeout``); never more than ``call_timeout``.
        call_timeout: seconds no call of the server may run, whatever ``timeout``, a tool's or the loop's
            timeout say (the smallest wins); default :data:`DEFAULT_CALL_TIMEOUT` (60 s). A read past it is
            answered ``timeout``, a write past it pauses as *outcome unknown*. None: no ceiling (a server that
            never answers then holds a run until it is cancelled).
        connect_timeout: seconds to wait for the server to start and answer the handshake.
        approval: approval policy for every tool of the server (default: by risk, as for local tools).
        risk: per-tool risk, a floor the server's annotations can raise but never lower, e.g.
            ``{"delete_file": "dangerous"}``.
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
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
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
        if call_timeout is not None and not call_timeout > 0:
            raise ValueError(f"call_timeout must be a positive number of seconds or None, got {call_timeout!r}")
        self.target = target
        self.headers = dict(headers or {})
        # a credential handed to the server must not come back in an error result, a frame or a checkpoint
        env = target.env if self.transport == "stdio" else None
        for key, value in [*self.headers.items(), *(env or {}).items()]:
            if _CREDENTIAL.search(key):
                register_secret(value)
                register_secret(value.split(" ", 1)[1] if " " in value else None)
        self.timeout = timeout
        self.call_timeout = call_timeout
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
        self.generation = 0
        """How many listings the server gave (one per session); a tool built from an older one may be riskier now."""
        self._tools: dict[str, MCPTool] = {}
        self._latest: dict[int, tuple[MCPTool, int, MCPTool]] = {}
        """A loop's tool (by id) -> (that tool, the generation, its form under that generation's listing)."""
        self._conn: Connection | None = None
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
            TimeoutError: ``timeout`` or ``call_timeout`` passed (the call is cancelled on the server).
        """
        return run_coroutine(self._call(tool, dict(arguments or {}), None), self._direct_timeout())

    def _direct_timeout(self) -> float | None:
        """A direct call's limit: the smaller of ``timeout`` and ``call_timeout``."""
        limits = [t for t in (self.timeout, self.call_timeout) if t is not None]
        return min(limits) if limits else None

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
        risk, idempotent = self._risk_now(remote.name, "read")
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
            max_timeout=self.call_timeout,
            is_async=True,  # it awaits the background loop: the run gives it a thread and can cancel it
            # side-effecting calls receive their context, to hand the idempotency key to the server
            context_param="context" if risk != "read" else None,
            idempotent=idempotent,
            schema_version=hashlib.sha256(canonical.encode()).hexdigest()[:16],
            server=self.name,
            remote_name=remote.name,
            annotations=annotations,
            source=self,
            generation=self.generation,
            _field_names=tuple((schema.get("properties") or {}).keys()),
        )

    # --- risk, by the latest listing ---------------------------------------------------------------------------

    def _risk_now(self, remote_name: str, floor: Risk) -> tuple[Risk, bool]:
        """(risk, idempotent) of a tool by the latest listing: never below ``floor`` or the user's ``risk=``.

        Trusted annotations can only raise the risk (:func:`~agentnb.mcp._tool.risk_of` reads them as the MCP
        spec says); an untrusted server's tools are writes unless the user says otherwise.
        """
        declared = self.risk.get(remote_name)
        risk = higher_risk(floor, declared) if declared is not None else floor
        remote = next((t for t in self._listing or () if t.name == remote_name), None)
        if not self.trust_annotations:
            return (risk if declared is not None else higher_risk(risk, "write")), False
        if remote is None:  # the server no longer lists it: the call gets the server's own answer
            return risk, False
        listed, idempotent = risk_of(remote.annotations)
        return higher_risk(risk, listed), idempotent and listed != "read"

    def _current(self, tool: MCPTool) -> MCPTool:
        """``tool`` under the latest listing: its risk raised if the server now says it does more (cached)."""
        generation = self.generation  # read once: the background loop may list again meanwhile (then: next time)
        cached = self._latest.get(id(tool))
        if cached is not None and cached[0] is tool and cached[1] == generation:
            return cached[2]
        risk, idempotent = self._risk_now(tool.remote_name, tool.risk)
        remote = next((t for t in self._listing or () if t.name == tool.remote_name), None)
        annotations = (remote.annotations.model_dump(by_alias=True, exclude_none=True)
                       if remote is not None and remote.annotations else {})
        raised = tool.raised or risk != tool.risk
        latest = dataclasses.replace(
            tool, risk=risk, idempotent=tool.idempotent and idempotent, annotations=annotations,
            context_param=tool.context_param or ("context" if risk != "read" else None),
            generation=generation, raised=raised,
        )
        self._latest[id(tool)] = (tool, generation, latest)
        return latest

    # --- on the background loop ------------------------------------------------------------------------------

    def _client(self, conn: Connection) -> Client:
        from mcp import Client
        from mcp.client.stdio import stdio_client
        from mcp.types import Implementation

        from .._version import __version__

        if self.transport == "stdio":
            # a file of our own: a notebook's sys.stderr has no file descriptor to hand to a subprocess
            # append mode: the child shares the file offset, so reading the tail must not move where it writes
            conn.stderr = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")
            transport: Any = stdio_client(self.target, errlog=conn.stderr)
        else:
            transport = http_transport(self.target, self.headers)
        return Client(watched_call(transport, conn), client_info=Implementation(name="agentnb", version=__version__))

    async def _connected(self) -> Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent calls after a crash start one new session, not several
            conn = self._conn
            if conn is not None and conn.usable:
                return conn
            if conn is not None:
                conn.stop.set()  # let the old session wind down in its own task
            conn = Connection()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[list[RemoteTool]] = loop.create_future()
            task = loop.create_task(conn.own(self._client(conn), ready))
            OWNERS.add(task)  # the loop keeps only weak references to tasks; a session must not be collected
            task.add_done_callback(OWNERS.discard)
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
                       else describe_result(exc))
                raise MCPServerError(f"could not {verb} MCP server {self.label}: {why}.{self._stderr(conn)}") from exc
            self._conn = conn
            self.connections += 1
            assert conn.client is not None
            info = conn.client.server_info
            self._reported_name = info.name if info is not None and info.name else None
            self._listing = listing
            self.generation += 1  # the loops' tools are checked against this listing from now on
            self._tools = {}  # tools() builds from the latest listing
            self._latest = {}
            return conn

    async def _call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None,
                    checked: Risk | None = None) -> Any:
        """Call ``tool``; ``checked`` is the risk the call was checked under (None: a direct call, unchecked)."""
        conn = await self._connected()
        assert conn.client is not None
        now = self._risk_now(tool, "read")[0] if checked == "read" else None
        if now is not None and now != "read":  # the session is new and its listing says more than the check saw
            raise MCPServerError(
                f"MCP server {self.name!r} now lists {tool!r} as a tool that changes things (risk {now!r}); this "
                "call was checked as a read, so it was not sent. Call the tool again: the new call is checked under "
                "the new listing (and waits for approval if its risk asks for one)."
            )
        request = conn.client.call_tool(tool, arguments, meta=cast("RequestParamsMeta", meta))
        give_up = _GIVE_UP * self.call_timeout if self.call_timeout is not None else None
        call = asyncio.ensure_future(asyncio.wait_for(request, give_up))
        closed = asyncio.ensure_future(conn.closed.wait())
        stopped = asyncio.ensure_future(conn.stop.wait())  # a garbled message ends the session at once
        try:
            await asyncio.wait({call, closed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            stopped.cancel()
            if not call.done():
                call.cancel()  # the connection ended first, or this call was cancelled (a timeout)
        if not call.done() or call.cancelled():
            conn.broken = True
            raise self._lost(tool, conn, conn.error)
        exc = call.exception()
        if exc is None:
            remote = next((t for t in self._listing or () if t.name == tool), None)
            return value_of(self.name, tool, call.result(), remote.output_schema if remote else None)
        if isinstance(exc, TimeoutError) and give_up is not None:
            raise MCPServerError(
                f"MCP server {self.name!r} did not answer the call of {tool!r} within {give_up:g} s (twice its "
                "call_timeout); it was given up, and whether it took effect is unknown.") from exc
        if isinstance(conn.error, Garbled) or connection_lost(exc):
            conn.broken = True
            conn.stop.set()
            raise self._lost(tool, conn, conn.error if isinstance(conn.error, Garbled) else exc) from exc
        if not_a_result(exc):
            raise MCPServerError(f"MCP server {self.name!r} answered the call of {tool!r} with a result that is not "
                                 f"a CallToolResult: {describe_result(exc)}") from exc
        raise MCPServerError(f"MCP server {self.name!r} answered the call of {tool!r} with an error: "
                             f"{describe_result(exc)}") from exc

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.stop.set()
            await conn.closed.wait()

    def _lost(self, tool: str, conn: Connection, exc: BaseException | Garbled | None) -> MCPServerError:
        again = "started again" if self.transport == "stdio" else "reached again"
        if isinstance(exc, Garbled):
            return MCPServerError(
                f"MCP server {self.name!r} ({self.label}) broke the protocol while {tool!r} ran: it sent {exc}. "
                f"The session was closed, so the call got no answer; whether it took effect is unknown. The "
                f"server will be {again} on the next call.{self._stderr(conn)}"
            )
        return MCPServerError(
            f"MCP server {self.name!r} ({self.label}) lost the connection while {tool!r} ran ({describe_result(exc)}). "
            f"Whether the call took effect is unknown. The server will be {again} on the next call."
            f"{self._stderr(conn)}"
        )

    @staticmethod
    def _stderr(conn: Connection) -> str:
        tail = redact_text(conn.tail())  # a server may print the token it was given
        return f"\nIts stderr ends with:\n{tail}" if tail else ""
