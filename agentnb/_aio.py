"""Run coroutines from synchronous code, also inside a notebook whose event loop is already running.

A notebook cell runs while Jupyter's own event loop is running in the same thread, so ``asyncio.run`` fails
there ("cannot be called from a running event loop") and ``loop.run_until_complete`` deadlocks. Instead of
patching the loop (nest_asyncio), async tools run on one private event loop in a daemon thread; the caller
waits on a ``concurrent.futures.Future``. The same thread serves every call, so start-up is paid once.

Sockets closed behind the loop's back. A client dropped without ``close()`` (an ``openai.AsyncOpenAI`` rebound
by a cell run again) is collected in whatever thread the collector runs: each of its transports' ``__del__``
closes its socket directly, and its number is free for the next connection. The SDK's own ``__del__`` may
then schedule the client's ``aclose()`` on the loop, which asks the loop to stop reading *that number* -- by
then another connection's, whose answer then sits unread until its timeout (seen as 20-second stalls of a
few requests in a batch of 64). The loop here refuses such a request from a transport whose socket is already
closed (:class:`_Loop`): it no longer owns the number it names. The same holds for a subprocess's pipes (an MCP
server over stdio dropped without closing it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


class _Loop(asyncio.SelectorEventLoop):
    """The background loop, proof against sockets closed behind its back (see the module docs).

    A number still registered for a transport whose socket is closed is forgotten before the number is
    registered again (else the kernel's poller, which dropped it, is told to change it and fails, or is never
    told at all); and such a transport asking to stop reading or writing is refused (the number is not its own).
    """

    def _add_reader(self, fd: Any, callback: Any, *args: Any) -> Any:
        self._forget_stale(fd)
        return super()._add_reader(fd, callback, *args)  # type: ignore[misc]

    def _add_writer(self, fd: Any, callback: Any, *args: Any) -> Any:
        self._forget_stale(fd)
        return super()._add_writer(fd, callback, *args)  # type: ignore[misc]

    def _remove_reader(self, fd: Any) -> bool:
        if _closed(sys._getframe(1).f_locals.get("self")):  # the transport asking: its socket is closed
            return False
        return bool(super()._remove_reader(fd))  # type: ignore[misc]

    def _remove_writer(self, fd: Any) -> bool:
        if _closed(sys._getframe(1).f_locals.get("self")):  # the transport asking: its socket is closed
            return False
        return bool(super()._remove_writer(fd))  # type: ignore[misc]

    def _forget_stale(self, fd: Any) -> None:
        key = self._selector.get_map().get(fd)  # type: ignore[attr-defined]
        if key is not None and any(
            _closed(getattr(getattr(h, "_callback", None), "__self__", None)) for h in key.data if h is not None
        ):
            self._selector.unregister(fd)  # type: ignore[attr-defined]


def _closed(owner: Any) -> bool:
    """True for a transport whose socket or pipe is closed: the number it was given may be another file's now."""
    if not isinstance(owner, asyncio.BaseTransport):
        return False
    sock = getattr(owner, "_sock", None)  # a connection's transport
    if isinstance(sock, socket.socket):
        return sock.fileno() == -1
    pipe = getattr(owner, "_pipe", None)  # a subprocess's pipe (an MCP server over stdio)
    return pipe is not None and bool(getattr(pipe, "closed", False))


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop() if sys.platform == "win32" else _Loop()  # Windows: no selector loop
            thread = threading.Thread(target=loop.run_forever, name="agentnb-async", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on agentnb's background loop and return its future (cancelling it cancels the coroutine).

    Use it from a coroutine of another loop with ``await asyncio.wrap_future(submit(coro))``: cancelling the
    awaiting task then cancels ``coro`` too.
    """
    return asyncio.run_coroutine_threadsafe(coro, _background_loop())


def run_coroutine(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` to completion on agentnb's background loop and return its result.

    Raises:
        TimeoutError: when ``timeout`` seconds pass first; the coroutine is cancelled.
    """
    future = submit(coro)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError from None
