"""Student code on a leash: every call into it has a time limit, and a call past its limit never hangs the check.

A check calls what a student wrote (a tool, a predicate, a policy) many times. A cell with ``while True:`` in
it must not freeze the notebook, so each call runs in a daemon thread of its own and the check waits for it
at most ``limit`` seconds. Past the limit the check raises :class:`CheckTimeout` in its own thread (the tool
then has an error result, the policy fails closed, the predicate stops the scenario) and asks CPython to raise
:class:`_Abandoned` inside the student's thread, which ends a loop that runs Python code. A thread blocked in
C (``time.sleep(1e9)``) cannot be interrupted that way; being a daemon, it sleeps on without blocking anything,
not even the kernel's shutdown.

Example:
    >>> call_limited(lambda a, b: a + b, (2, 3), limit=1.0)
    5
    >>> def spin() -> None:
    ...     while True:
    ...         pass
    >>> try:
    ...     call_limited(spin, (), limit=0.05)
    ... except CheckTimeout as exc:
    ...     print(exc)
    did not finish within 0.05 s
"""

from __future__ import annotations

import asyncio
import copy
import ctypes
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..exceptions import CheckTimeout
from ..tools import Tool

__all__ = ["LIMIT_S", "Leash", "call_limited"]

LIMIT_S = 2.0
"""Seconds one call of a student's code may take during a check (a correct answer takes microseconds)."""


class _Abandoned(BaseException):  # noqa: N818 - raised inside an abandoned thread; BaseException so `except Exception` in student code cannot swallow it
    """Raised asynchronously inside a student thread the check gave up on."""


def call_limited(fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, *,
                 limit: float = LIMIT_S) -> Any:
    """Call ``fn(*args, **kwargs)`` with a time limit; a coroutine function is run to completion.

    Returns what it returns and raises what it raises; raises :class:`CheckTimeout` past ``limit`` seconds.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            out = fn(*args, **(kwargs or {}))
            if inspect.iscoroutine(out):  # an async tool or policy: run it on a loop of its own, in this thread
                out = asyncio.run(out)
            box["value"] = out
        except BaseException as exc:  # noqa: BLE001 - everything the student's code raises is reported, never lost
            box["error"] = exc

    worker = threading.Thread(target=target, name="agentnb-workshop-check", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        _stop(worker)
        raise CheckTimeout(f"did not finish within {limit:g} s")
    if "error" in box:
        error = box["error"]
        if isinstance(error, _Abandoned):  # pragma: no cover - only an abandoned thread sees it
            raise CheckTimeout(f"did not finish within {limit:g} s")
        raise error
    return box.get("value")


def _stop(worker: threading.Thread) -> None:
    """Ask CPython to raise :class:`_Abandoned` in ``worker`` at its next bytecode (best effort)."""
    ident = worker.ident
    if ident is None:  # pragma: no cover - it was started
        return
    try:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(_Abandoned))
    except Exception:  # noqa: BLE001, S110 - not CPython: the daemon thread is left to run on its own
        pass


class Leash:
    """The time limit of one check: after one call of the student's code ran past it, later calls fail at once.

    One endless loop then costs the check one time limit, not one per scenario.

    Example:
        >>> leash = Leash(limit=0.05)
        >>> leash.call(len, ("abc",))
        3
        >>> leash.timed_out
        False
    """

    def __init__(self, limit: float = LIMIT_S, total: float | None = None) -> None:
        self.limit = limit
        self.total = 5 * limit if total is None else total
        """Seconds all the calls of one check may take together: a slow answer (0.3 s a call, each within the
        limit) cannot make a check of a hundred calls take half a minute."""
        self.spent = 0.0
        self.timed_out = False

    def call(self, fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None) -> Any:
        """Call ``fn`` like :func:`call_limited`; once a call timed out, raise :class:`CheckTimeout` at once.

        A call gets the smaller of the limit and what is left of ``total``.
        """
        if self.timed_out:
            raise CheckTimeout(f"not run: an earlier call did not finish within {self.limit:g} s")
        left = self.total - self.spent
        if left <= 0:
            self.timed_out = True
            raise CheckTimeout(f"not run: the check's time ran out ({self.total:g} s for all its calls)")
        took: list[float] = []

        def timed(*a: Any, **k: Any) -> Any:  # the student's time alone, not the thread's start on a busy machine
            started = time.perf_counter()
            try:
                out = fn(*a, **k)
                return asyncio.run(out) if inspect.iscoroutine(out) else out
            finally:
                took.append(time.perf_counter() - started)

        budget = min(self.limit, left)
        try:
            return call_limited(timed, args, kwargs, limit=budget)
        except CheckTimeout as exc:
            self.timed_out = True
            took[:] = [budget]
            if left < self.limit:
                raise CheckTimeout(f"ran out of the check's time: {self.total:g} s for all its calls") from exc
            raise
        finally:
            self.spent += sum(took)

    def tool(self, tool: Tool) -> Tool:
        """The same tool (name, schema, risk, approval, client), with every call of its function on this leash.

        A call past the limit raises :class:`CheckTimeout`, so the loop answers it with an error result naming it.
        """
        fn = tool.fn

        def run(**kwargs: Any) -> Any:
            return self.call(fn, (), kwargs)

        return replace(tool, fn=run, is_async=False)

    def wrap(self, fn: Callable[..., Any], seen: list[tuple[tuple[Any, ...], Any]] | None = None, *,
             copies: bool = False) -> Callable[..., Any]:
        """``fn`` on this leash; with ``seen``, every call's arguments and raw return value are appended to it.

        With ``copies``, ``fn`` gets deep copies of its arguments: what it changes in them is its own.
        """

        def run(*args: Any) -> Any:
            out = self.call(fn, copy.deepcopy(args) if copies else args)
            if seen is not None:
                seen.append((args, out))
            return out

        return run
