"""One session with an MCP server, and where it lives.

An MCP client session is an asyncio object bound to the loop that opened it, and a notebook cell already
runs an event loop in its thread. Every session therefore lives on agentnb's private background loop
(:mod:`agentnb._aio`), owned by one task per connection that enters the SDK's context managers and leaves them
(the SDK requires one task to do both). A call is a coroutine submitted to that loop; the run's worker thread
awaits it through ``asyncio.wrap_future``, so a timeout that cancels the worker's task cancels the remote call
too. No nest_asyncio.

A :class:`Connection` is that task's session: it lists the tools when it opens, waits to be told to stop, and
records what ended it (the calls report it) and the stdio server's stderr (quoted when the server fails).

The SDK drops what it cannot match to a request -- a line that is not JSON-RPC, a response to an id it never
sent -- and the call that waited for it would wait for ever. So the session's streams are watched
(:func:`watched_call`): the ids of the requests sent are kept, and so are those of the tool calls still waiting for
their answer. While a tool call waits, a message that does not parse, or answers an id never sent, ends the
session with :class:`Garbled` as its error: every call in flight then ends with an error that says so (which
call the message was meant for cannot be known), and the next call starts a new session. The MCP spec forbids a
stdio server to write anything but MCP messages on its stdout; a stray line while no call waits (a start-up
banner) costs nothing and is let pass, as the SDK does. A late answer to a call this side gave up on is not
garbled: its id was sent.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import Client
    from mcp.shared.message import SessionMessage
    from mcp.types import Tool as RemoteTool

OWNERS: set[asyncio.Task[None]] = set()
"""The tasks that own open sessions (on the background loop)."""


class Garbled:
    """Why a session ended: the server broke JSON-RPC (a message that is not one, an answer to no request).

    A record, not an exception: it is never raised, only read (as the text of the call's error).
    """

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why

    def __str__(self) -> str:
        return self.why


class Connection:
    """One session with the server, owned by one task on the background loop (it enters and leaves the SDK)."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.stop = asyncio.Event()
        self.closed = asyncio.Event()
        self.broken = False
        self.error: BaseException | Garbled | None = None
        self.stderr: IO[str] | None = None
        self.sent: set[str] = set()
        """The ids of the requests sent in this session (as strings: a server may echo ``1`` as ``"1"``)."""
        self.waiting: set[str] = set()
        """The ids of the tool calls sent and neither answered nor given up."""
        self._tail = ""

    def garbled(self, why: str) -> None:
        """End the session: the server broke the protocol, so no answer on it can be trusted any more."""
        if self.error is None:
            self.error = Garbled(why)
        self.ended()

    def ended(self) -> None:
        """End the session: its transport is gone (a stdio server exited), or it can no longer be trusted.

        Without this the owner would wait to be told to stop, and a dead session would look open until a call
        failed on it; now the next ``connect()`` or call starts a new one (and lists the tools again).
        """
        self.broken = True
        self.stop.set()

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


class _Reader:
    """The session's read stream, watched: a message that does not parse, or answers an unsent id, is garbled."""

    def __init__(self, inner: Any, conn: Connection) -> None:
        self._inner, self._conn = inner, conn

    def _check(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        from mcp.types import JSONRPCError, JSONRPCResponse

        conn = self._conn
        if isinstance(item, Exception):
            if conn.waiting:
                conn.garbled(f"a message that is not valid JSON-RPC ({_unparsed(item)})")
        elif isinstance(item.message, JSONRPCResponse | JSONRPCError):
            rid = str(item.message.id)
            if rid not in conn.sent and conn.waiting:
                conn.garbled(f"a response to request id {item.message.id!r}, which was never sent")
            conn.waiting.discard(rid)
        return item  # the SDK drops what is garbled, as before; the session's end is what the calls see

    async def receive(self) -> SessionMessage | Exception:
        import anyio

        try:
            return self._check(await self._inner.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._conn.ended()
            raise

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return self._check(await self._inner.__anext__())
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._conn.ended()  # the transport closed its end: the server is gone
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Reader:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))

    def __getattr__(self, name: str) -> Any:  # what the SDK reads duck-typed (``last_context``)
        return getattr(self._inner, name)


class _Writer:
    """The session's write stream, keeping the id of every request sent."""

    def __init__(self, inner: Any, conn: Connection) -> None:
        self._inner, self._conn = inner, conn

    async def send(self, item: SessionMessage, /) -> None:
        from mcp.types import JSONRPCNotification, JSONRPCRequest

        msg = item.message
        if isinstance(msg, JSONRPCRequest):
            self._conn.sent.add(str(msg.id))
            if msg.method == "tools/call":
                self._conn.waiting.add(str(msg.id))
        elif isinstance(msg, JSONRPCNotification) and msg.method == "notifications/cancelled":
            self._conn.waiting.discard(str((msg.params or {}).get("requestId")))  # given up: no answer is due
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Writer:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _unparsed(exc: Exception) -> str:
    """What is wrong with a message the transport could not read, in a few words and its first characters."""
    from pydantic import ValidationError

    def cut(value: Any) -> str:
        text = value if isinstance(value, str) else repr(value)
        text = text if len(text) <= 120 else text[:120] + "…"
        return repr(text) if isinstance(value, str) else text

    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        bad = next((e for e in errors if e["type"] == "json_invalid"), None)
        if bad is not None:
            return f"not JSON: {str(bad['msg']).removeprefix('Invalid JSON: ')}, in {cut(bad['input'])}"
        if errors:
            return f"JSON that is no request, notification, result or error: {cut(errors[0]['input'])}"
    return cut(f"{type(exc).__name__}: {exc}")


@asynccontextmanager
async def watched_call(transport: AbstractAsyncContextManager[Any], conn: Connection) -> AsyncIterator[Any]:
    """A transport whose streams are watched for messages that break the protocol (see the module docstring)."""
    async with transport as (read, write):
        yield _Reader(read, conn), _Writer(write, conn)


@asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP transport over an HTTP client of our own (closed with the session)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers or None) as http_client:
        async with streamable_http_client(url, http_client=http_client) as streams:
            yield streams
