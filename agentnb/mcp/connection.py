"""One session with an MCP server, and where it lives.

An MCP client session is an asyncio object bound to the loop that opened it, and a notebook cell already
runs an event loop in its thread. Every session therefore lives on agentnb's private background loop
(:mod:`agentnb._aio`), owned by one task per connection that enters the SDK's context managers and leaves them
(the SDK requires one task to do both). A call is a coroutine submitted to that loop; the run's worker thread
awaits it through ``asyncio.wrap_future``, so a timeout that cancels the worker's task cancels the remote call
too. No nest_asyncio.

A :class:`_Connection` is that task's session: it lists the tools when it opens, waits to be told to stop, and
records what ended it (the calls report it) and the stdio server's stderr (quoted when the server fails).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import Tool as RemoteTool

_OWNERS: set[asyncio.Task[None]] = set()
"""The tasks that own open sessions (on the background loop)."""


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
