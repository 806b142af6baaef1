"""Run coroutines from synchronous code, also inside a notebook whose event loop is already running.

A notebook cell runs while Jupyter's own event loop is running in the same thread, so ``asyncio.run`` fails
there ("cannot be called from a running event loop") and ``loop.run_until_complete`` deadlocks. Instead of
patching the loop (nest_asyncio), async tools run on one private event loop in a daemon thread; the caller
waits on a ``concurrent.futures.Future``. The same thread serves every call, so start-up is paid once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
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
