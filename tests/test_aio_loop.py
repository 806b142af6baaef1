"""agentnb's background event loop keeps serving when a dropped client's sockets are closed behind its back.

A client dropped without ``close()`` is collected in any thread: its transports' ``__del__`` close their
sockets directly, and the next connection gets the same number. The SDK then schedules the dropped client's
``aclose()`` on the loop, whose transports ask the loop to stop reading that number -- another connection's
by then. A stock asyncio loop obeys and that connection's answer sits unread until its timeout (20-second
stalls of a few requests in ``bench/batch.py`` at concurrency 64); the loop of :mod:`agentnb._aio` refuses.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import openai
import pytest

import agentnb as anb
from agentnb import _aio

PONG_SERVER = """
import socket, sys, threading, time
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def serve(conn):
    with conn:
        data = b""
        while not data.endswith(b"\\n"):
            chunk = conn.recv(100)
            if not chunk:
                return
            data += chunk
        time.sleep(0.2)
        conn.sendall(b"pong\\n")
        conn.recv(100)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


@pytest.fixture
def pong_server() -> Iterator[tuple[str, int]]:
    """A TCP server in its own process (its sockets take no numbers here): each ``ping`` line gets ``pong`` after
    0.2 s."""
    proc = subprocess.Popen([sys.executable, "-c", PONG_SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield "127.0.0.1", port
    proc.kill()
    proc.wait()


async def dropped_then_reused(host: str, port: int, idle: bool) -> bytes:
    """A connection whose socket is closed as the collector closes it, a new one on its number, then its close().

    ``idle``: the old connection was not being read (a pooled keep-alive connection): its number is not
    registered when its socket closes; else it is, and the poller drops it with the socket.
    """
    _, w1 = await asyncio.open_connection(host, port)
    old = w1.transport
    if idle:
        old.pause_reading()  # type: ignore[attr-defined]
    fd = old.get_extra_info("socket").fileno()
    loop = asyncio.get_running_loop()
    loop._transports.pop(fd)  # type: ignore[attr-defined]  # the collector clears the weak reference first,
    old._sock.close()  # type: ignore[attr-defined]  # then runs _SelectorSocketTransport.__del__
    try:
        r2, w2 = await asyncio.open_connection(host, port)  # the lowest free number: the one just freed
    except OSError as exc:  # the poller dropped the number with the socket: told to change it, it fails
        return f"(no connection: {exc!r})".encode()
    assert w2.get_extra_info("socket").fileno() == fd, "the new connection did not get the freed number"
    w2.write(b"ping\n")
    await w2.drain()
    old.close()  # the dropped client's aclose(), scheduled on the loop by the SDK's __del__
    try:
        return await asyncio.wait_for(r2.readline(), 2.0)
    except TimeoutError:
        return b"(no answer read within 2 s)"
    finally:
        w2.close()


@pytest.mark.parametrize("idle", [True, False], ids=["idle", "reading"])
def test_a_stock_loop_loses_the_answer_of_a_connection_on_a_reused_number(
    pong_server: tuple[str, int], idle: bool
) -> None:
    """The hazard itself, on a stock asyncio loop: why agentnb's loop is not one."""
    loop = asyncio.new_event_loop()
    try:
        got = loop.run_until_complete(dropped_then_reused(*pong_server, idle))
    finally:
        loop.close()
    assert got == b"(no answer read within 2 s)" if idle else got.startswith(b"(no connection: FileNotFoundError"), got


@pytest.mark.parametrize("idle", [True, False], ids=["idle", "reading"])
def test_agentnbs_loop_reads_the_answer_of_a_connection_on_a_reused_number(
    pong_server: tuple[str, int], idle: bool
) -> None:
    assert _aio.run_coroutine(dropped_then_reused(*pong_server, idle), timeout=10) == b"pong\n"


def test_a_client_dropped_without_close_does_not_stall_another_clients_request() -> None:
    """Through the real openai client and the emulator: the first client's sockets closed as the collector
    closes them, its aclose() scheduled while the second client's request is being answered."""
    with anb.emulator.Emulator(anb.ScriptedModel([{"text": "first"}, {"text": "second"}], latency=0.6)) as emu:
        first = openai.AsyncOpenAI(base_url=emu.url("openai"), api_key="test", timeout=4, max_retries=0)
        run = anb.Loop(model=anb.OpenAIChatModel(first, model="gpt-4.1")).start("one").run()
        assert run.output == "first"
        loop = _aio._background_loop()
        port = int(emu.url("openai").split(":")[2].split("/")[0])
        idle = [t for t in list(loop._transports.values())  # type: ignore[attr-defined]
                if not t.is_closing() and (t.get_extra_info("peername") or ("", 0))[1] == port]  # the first client's
        assert idle, "the first client kept no connection open"
        for transport in idle:  # the collector frees the dropped client: weak references first, then __del__
            loop._transports.pop(transport._sock_fd)  # type: ignore[attr-defined]
            transport._sock.close()
        second = openai.AsyncOpenAI(base_url=emu.url("openai"), api_key="test", timeout=4, max_retries=0)
        done: dict[str, anb.Run] = {}
        worker = threading.Thread(
            target=lambda: done.setdefault(
                "run", anb.Loop(model=anb.OpenAIChatModel(second, model="gpt-4.1")).start("two").run()
            )
        )
        t0 = time.monotonic()
        worker.start()
        time.sleep(0.3)  # the second request is on its way, its connection read by the loop
        _aio.submit(first.close()).result(5)
        worker.join(10)
    assert done["run"].output == "second", done["run"].reason
    assert not [e for e in done["run"].events if e.type == "ModelRetried"]
    assert time.monotonic() - t0 < 3.5  # answered after its 0.6 s, not after the 4 s timeout


async def pipe_dropped_then_reused() -> bytes:
    """As :func:`dropped_then_reused`, for a pipe's transport (an MCP server's stdio): read, then dropped."""
    loop = asyncio.get_running_loop()
    r1, _w1 = os.pipe()
    old, _ = await loop.connect_read_pipe(asyncio.Protocol, os.fdopen(r1, "rb", buffering=0))
    old._pipe.close()  # type: ignore[attr-defined]  # what _UnixReadPipeTransport.__del__ does
    r2, w2 = os.pipe()
    assert r2 == r1, "the new pipe did not get the freed number"
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r2, "rb", buffering=0))
    old.close()  # the dropped client's cleanup, on the loop
    os.write(w2, b"pong\n")
    try:
        return await asyncio.wait_for(reader.readline(), 2.0)
    except TimeoutError:
        return b"(no answer read within 2 s)"
    finally:
        os.close(w2)
        os.close(_w1)


def test_a_pipe_on_a_reused_number_is_read_after_the_dropped_ones_close() -> None:
    stock = asyncio.new_event_loop()
    try:
        assert stock.run_until_complete(pipe_dropped_then_reused()) == b"(no answer read within 2 s)"
    finally:
        stock.close()
    assert _aio.run_coroutine(pipe_dropped_then_reused(), timeout=10) == b"pong\n"
