"""MCP tools against real MCP servers: the shipped demo and a lab server, over stdio and streamable HTTP.

The servers are subprocesses started once for the module; each starts in a few seconds (most of it importing
the SDK), so they start side by side.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from pydantic import ValidationError

import agentnb as anb
from agentnb.events import BaseEvent
from agentnb.exceptions import MCPServerError, ToolDefinitionError
from agentnb.mcp import IDEMPOTENCY_META_KEY, MCPTool, schema_arguments

pytest.importorskip("mcp")

LAB = str(Path(__file__).with_name("mcp_server.py"))
T = TypeVar("T")
ROOT = str(Path(__file__).resolve().parents[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_http(port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "agentnb.mcp_demo", "--http", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_listening(port: int, proc: subprocess.Popen[bytes], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the HTTP MCP server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the HTTP MCP server did not listen on {port} within {limit} s")


class Servers:
    def __init__(self) -> None:
        self.port = _free_port()
        self.http_proc = _serve_http(self.port)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.shop = anb.MCPServer.stdio(sys.executable, ["-m", "agentnb.mcp_demo"], env={"PYTHONPATH": ROOT})
        self.lab = anb.MCPServer.stdio(sys.executable, [LAB])
        self.http = anb.MCPServer.http(self.url)

    def start(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(self.shop.connect), pool.submit(self.lab.connect),
                       pool.submit(_wait_listening, self.port, self.http_proc)]
            for f in futures:
                f.result()
        self.http.connect()

    def restart_http(self) -> None:
        self.http_proc = _serve_http(self.port)
        _wait_listening(self.port, self.http_proc)

    def stop(self) -> None:
        for server in (self.shop, self.lab, self.http):
            server.close()
        self.http_proc.kill()
        self.http_proc.wait()


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    s = Servers()
    try:
        s.start()
        yield s
    finally:
        s.stop()


def _events(run: anb.Run, kind: str) -> list[Any]:
    return [e for e in run.transcript if e.type == kind]


def _finished(run: anb.Run) -> dict[str, BaseEvent]:
    return {e.name: e for e in _events(run, "ToolFinished")}  # type: ignore[attr-defined]


def _loop(tools: list[Any], *turns: dict[str, Any], **options: Any) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel([*turns, {"text": "done"}]), tools=tools, **options)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


# --- tools from the server ---------------------------------------------------------------------------------


def test_schemas_and_annotations_come_from_the_server(servers: Servers) -> None:
    from agentnb import mcp_demo

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:  # the server's own view, in-process (building it configures logging: put that back)
        listed = {t.name: t for t in asyncio.run(mcp_demo.build().list_tools())}
    finally:
        root.handlers[:], root.level = handlers, level
    tools = {t.name: t for t in servers.shop.tools()}
    assert list(tools) == list(listed) == servers.shop.tool_names
    for name, t in tools.items():
        assert isinstance(t, MCPTool) and isinstance(t, anb.Tool)
        assert t.parameters == listed[name].input_schema
        assert t.server == servers.shop.name == "shop" and t.info()["server"] == "shop"
    assert (tools["lookup_order"].risk, tools["lookup_order"].needs_approval()) == ("read", False)
    assert (tools["refund"].risk, tools["refund"].needs_approval()) == ("dangerous", True)
    assert (tools["set_note"].risk, tools["set_note"].idempotent, tools["set_note"].needs_approval()) == (
        "write", True, True)
    assert tools["refund"].annotations["destructiveHint"] is True
    unannotated = servers.lab.tools(include=["unannotated"])[0]
    assert (unannotated.risk, unannotated.needs_approval()) == ("write", True)  # no hints: not trusted to be safe


def test_include_exclude_prefix_and_overrides(servers: Servers) -> None:
    assert [t.name for t in servers.shop.tools(include=["refund", "lookup_order"])] == ["lookup_order", "refund"]
    assert "refund" not in [t.name for t in servers.shop.tools(exclude=["refund"])]
    with pytest.raises(ToolDefinitionError, match="has no tool 'refnud'.*lookup_order"):
        servers.shop.tools(include=["refnud"])
    other = anb.MCPServer.http(servers.url, prefix="shop_", risk={"lookup_order": "write"}, name="shop-b")
    try:
        tools = {t.name: t for t in other.tools()}
        assert tools["shop_lookup_order"].remote_name == "lookup_order" and tools["shop_lookup_order"].risk == "write"
        assert tools["shop_lookup_order"].server == "shop-b"
        assert tools["shop_lookup_order"](order_id="43")["item"] == "Tea set"
        # two servers with the same tools and no prefix cannot share a loop
        with pytest.raises(ToolDefinitionError, match="prefix"):
            anb.Loop(model=anb.ScriptedModel([{"text": "x"}]), tools=[servers.shop, servers.http])
        anb.Loop(model=anb.ScriptedModel([{"text": "x"}]), tools=[servers.shop, other])
    finally:
        other.close()
    distrust = anb.MCPServer.http(servers.url, trust_annotations=False)
    try:
        assert {t.risk for t in distrust.tools()} == {"write"}
    finally:
        distrust.close()


def test_schema_arguments_validate_by_json_schema() -> None:
    args = schema_arguments("Thing", {
        "type": "object", "additionalProperties": False, "required": ["n"],
        "properties": {"n": {"type": "integer", "minimum": 1}, "tags": {"type": "array", "items": {"type": "string"}}},
    })
    assert args.model_validate({"n": 3, "tags": ["a"]}).arguments == {"n": 3, "tags": ["a"]}
    with pytest.raises(ValidationError) as info:
        args.model_validate({"tags": ["a", 2], "x": 1})
    errors = {(".".join(map(str, e["loc"])), e["type"]) for e in info.value.errors()}
    assert errors == {("n", "json_schema"), ("tags.1", "json_schema"), ("", "json_schema")}
    with pytest.raises(ValidationError):
        args.model_validate({"n": "3"})  # no coercion: the server's schema says integer
    assert args.model_json_schema()["required"] == ["n"]
    with pytest.raises(ToolDefinitionError, match="not valid JSON Schema"):
        schema_arguments("Bad", {"type": "object", "properties": {"n": {"type": "integre"}}})


# --- calls through a loop ----------------------------------------------------------------------------------


def test_mcp_and_local_tools_share_one_loop(servers: Servers) -> None:
    @anb.tool
    def shipping_days(country: str) -> int:
        """Days to ship to a country."""
        return 3 if country == "FR" else 7

    loop = _loop([servers.shop, shipping_days],
                 {"tool_calls": [_call("lookup_order", order_id="43"), _call("shipping_days", country="FR")]})
    run = loop.start("Where is order 43?").run()
    assert run.state is anb.LoopState.COMPLETED
    done = _finished(run)
    assert done["lookup_order"].status == "ok"  # type: ignore[attr-defined]
    assert done["lookup_order"].value["item"] == "Tea set"  # type: ignore[attr-defined]
    assert done["shipping_days"].value == 3  # type: ignore[attr-defined]
    started = _events(run, "RunStarted")[0]
    assert {t.name: t.server for t in started.tools}["lookup_order"] == "shop"
    calls = run.transcript.frames.calls().set_index("tool")
    assert calls.loc["lookup_order", "server"] == "shop"
    assert calls["server"].isna()["shipping_days"]


def test_arguments_are_checked_against_the_servers_schema(servers: Servers) -> None:
    bad = _call("order", items=[{"sku": "ABC-1", "qty": 0}, {"sku": "nope", "qty": 2}], mode="slow")
    good = _call("order", items=[{"sku": "ABC-1", "qty": 2}])
    run = _loop([servers.lab], {"tool_calls": [bad]}, {"tool_calls": [good]}).start("order").run()
    rejected = _events(run, "CallRejected")
    assert len(rejected) == 1 and rejected[0].reason == "schema"
    assert {e["loc"] for e in rejected[0].errors} == {"items.0.qty", "items.1.sku", "mode"}
    assert "less than the minimum of 1" in rejected[0].message
    assert len(_events(run, "ToolStarted")) == 1  # the bad call never reached the server
    assert _finished(run)["order"].value == {  # type: ignore[attr-defined]
        "items": [{"sku": "ABC-1", "qty": 2}], "mode": "cheap", "note": None}  # defaults: the server's


def test_destructive_tool_waits_for_approval_then_runs(servers: Servers) -> None:
    run = _loop([servers.shop], {"tool_calls": [_call("refund", order_id="44", amount_cents=500)]}).start("x").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL
    asked = _events(run, "ApprovalRequested")[0]
    assert (asked.name, asked.risk) == ("refund", "dangerous")
    assert _events(run, "ToolStarted") == []  # nothing reached the server before the approval
    assert servers.shop.call("lookup_order", {"order_id": "44"})["refund"] is None
    run.approve(asked.call_id, by="ana")
    run.run()
    assert run.state is anb.LoopState.COMPLETED
    assert _finished(run)["refund"].value["refund_id"] == "rf_44_500"  # type: ignore[attr-defined]
    assert servers.shop.call("lookup_order", {"order_id": "44"})["refund"]["amount_cents"] == 500


def test_denied_call_never_reaches_the_server(servers: Servers) -> None:
    run = _loop([servers.http], {"tool_calls": [_call("refund", order_id="43", amount_cents=100)]}).start("x").run()
    run.deny(run.pending_approvals()[0].call_id, reason="no")
    run.run()
    assert run.state is anb.LoopState.COMPLETED
    assert servers.http.call("lookup_order", {"order_id": "43"})["refund"] is None


def test_side_effecting_calls_hand_their_idempotency_key_to_the_server(servers: Servers) -> None:
    run = _loop([servers.lab], {"tool_calls": [_call("wipe", target="cache")]}).start("x").run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    key = _events(run, "ToolStarted")[0].idempotency_key
    assert key and _finished(run)["wipe"].value == {  # type: ignore[attr-defined]
        "wiped": "cache", "meta": {IDEMPOTENCY_META_KEY: key}}


def test_server_errors_become_error_results(servers: Servers) -> None:
    run = _loop([servers.lab, servers.shop], {"tool_calls": [
        _call("boom"), _call("protocol_error"), _call("lookup_order", order_id="999"), _call("picture"),
    ]}).start("x").run()
    assert run.state is anb.LoopState.COMPLETED
    done = _finished(run)
    assert (done["boom"].status, done["boom"].error_type) == ("error", "MCPToolError")  # type: ignore[attr-defined]
    assert "secret detail" not in done["boom"].content  # type: ignore[attr-defined]  # the server withholds it
    assert done["protocol_error"].error_type == "MCPServerError"  # type: ignore[attr-defined]
    assert "the lab refuses this request" in done["protocol_error"].content  # type: ignore[attr-defined]
    assert "No order '999'" in done["lookup_order"].content  # type: ignore[attr-defined]
    assert done["picture"].status == "ok" and "[image: image/png" in done["picture"].content  # type: ignore[attr-defined]


def test_a_timeout_cancels_the_remote_call_and_the_session_survives(servers: Servers) -> None:
    slow = dataclasses.replace(servers.lab.tools(include=["slow"])[0], timeout=0.5)
    pid = servers.lab.tools(include=["pid"])[0]
    before = servers.lab.connections
    start = time.monotonic()
    run = _loop([slow, pid], {"tool_calls": [_call("slow", seconds=30)]}, {"tool_calls": [_call("pid")]}).start("x")
    run.run()
    assert time.monotonic() - start < 10
    done = _finished(run)
    assert done["slow"].status == "timeout" and done["pid"].status == "ok"  # type: ignore[attr-defined]
    assert servers.lab.connections == before


def test_a_write_past_its_timeout_pauses_as_outcome_unknown_and_its_late_outcome_is_kept(servers: Servers) -> None:
    write = dataclasses.replace(servers.lab.tools(include=["slow"])[0], risk="write", approval=False, timeout=0.3,
                                context_param="context")
    run = _loop([write], {"tool_calls": [_call("slow", seconds=1.5)]}).start("x").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL
    (asked,) = _events(run, "ApprovalRequested")
    assert asked.kind == "outcome_unknown"
    deadline = time.monotonic() + 20
    while run.store.effect(asked.idempotency_key).status != "done" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.store.effect(asked.idempotency_key).content == "slept 1.5"  # the server finished; the ledger knows


def test_a_server_killed_mid_run_gives_an_error_result_and_a_restart(servers: Servers) -> None:
    old_pid = servers.lab.call("pid")
    before = servers.lab.connections
    loop = _loop([servers.lab], {"tool_calls": [_call("slow", seconds=60)]}, {"tool_calls": [_call("pid")]})
    run = loop.start("x")
    while not _events(run, "ToolStarted"):
        run.step()
    killer = threading.Timer(0.3, os.kill, (old_pid, signal.SIGKILL))
    killer.start()
    start = time.monotonic()
    run.run()
    assert time.monotonic() - start < 30
    done = _finished(run)
    crashed = done["slow"]
    assert (crashed.status, crashed.error_type) == ("error", "MCPServerError")  # type: ignore[attr-defined]
    assert "lost the connection while 'slow' ran" in crashed.content  # type: ignore[attr-defined]
    assert "started again on the next call" in crashed.content  # type: ignore[attr-defined]
    assert done["pid"].status == "ok" and done["pid"].value != old_pid  # type: ignore[attr-defined]
    assert servers.lab.connections == before + 1
    assert run.state is anb.LoopState.COMPLETED


def test_http_server_gone_mid_run_then_back(servers: Servers) -> None:
    loop = _loop([servers.http], {"tool_calls": [_call("lookup_order", order_id="42")]},
                 {"tool_calls": [_call("lookup_order", order_id="42")]},
                 {"tool_calls": [_call("lookup_order", order_id="42")]})
    run = loop.start("x")
    while len(_events(run, "ToolFinished")) < 1:
        run.step()
    assert _events(run, "ToolFinished")[0].status == "ok"
    servers.http_proc.kill()
    servers.http_proc.wait()
    while len(_events(run, "ToolFinished")) < 2:
        run.step()
    gone = _events(run, "ToolFinished")[1]
    assert gone.status == "error" and gone.error_type == "MCPServerError"
    servers.restart_http()
    run.run()
    back = _events(run, "ToolFinished")[2]
    assert back.status == "ok" and back.value["item"] == "Blue kettle"
    assert run.state is anb.LoopState.COMPLETED


def test_credentials_given_to_a_server_never_reach_a_result() -> None:
    token = "tok-3f9a8b7c6d5e4f30"
    leaky = anb.MCPServer.stdio(sys.executable, ["-c", "import os, sys; sys.stderr.write('login failed for ' + "
                                                       "os.environ['SHOP_TOKEN'] + '\\n'); sys.exit(1)"],
                                env={"SHOP_TOKEN": token})
    with pytest.raises(MCPServerError) as info:
        leaky.connect()
    assert "login failed for [REDACTED]" in str(info.value) and token not in str(info.value)
    run = _loop([_EchoSource()], {"tool_calls": [_call("echo", text=token)]}).start("x").run()
    assert token not in _finished(run)["echo"].content  # type: ignore[attr-defined]


class _EchoSource:
    """A tool source (the protocol MCPServer implements) whose tool fails quoting its argument."""

    def as_tools(self) -> list[anb.Tool]:
        @anb.tool
        def echo(text: str) -> str:
            """Fail, quoting the text."""
            raise RuntimeError(f"cannot echo {text}")

        return [echo]


def test_a_server_that_cannot_start_says_why() -> None:
    broken = anb.MCPServer.stdio(sys.executable, ["-c", "import sys; sys.stderr.write('missing SHOP_DB\\n'); "
                                                        "sys.exit(3)"])
    with pytest.raises(MCPServerError, match=r"(?s)could not start MCP server .*missing SHOP_DB"):
        broken.tools()
    nobody = anb.MCPServer.http(f"http://127.0.0.1:{_free_port()}/mcp", connect_timeout=20)
    with pytest.raises(MCPServerError, match="could not reach MCP server"):
        nobody.connect()


def test_sync_use_inside_a_running_event_loop(servers: Servers) -> None:
    """A notebook cell runs while an event loop runs in its thread: the calls must not need nest_asyncio."""

    async def cell() -> tuple[Any, anb.LoopState]:
        value = servers.shop.call("lookup_order", {"order_id": "42"})
        assert servers.shop.tools(include=["lookup_order"])[0](order_id="44")["item"] == "Cup"
        run = _loop([servers.shop], {"tool_calls": [_call("list_orders", status="shipped")]}).start("x").run()
        return value, run.state

    value, state = asyncio.run(cell())
    assert value["order_id"] == "42" and state is anb.LoopState.COMPLETED


# --- through the providers' SDK clients against the emulator -----------------------------------------------

SDK_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_chat": ("OpenAIChatModel", {"model": "gpt-4.1"}),
    "openai_responses": ("OpenAIResponsesModel", {"model": "gpt-5", "store": False}),
    "anthropic": ("AnthropicModel", {"model": "claude-sonnet-4-6"}),
    "gemini": ("GeminiModel", {"model": "gemini-2.5-flash"}),
}


@pytest.fixture(scope="module")
def emu() -> Iterator[Any]:
    from agentnb.emulator import Emulator

    with Emulator() as e:
        yield e


@pytest.mark.parametrize("provider", list(SDK_OPTIONS))
def test_mcp_tools_through_each_wire_api(servers: Servers, emu: Any, provider: str) -> None:
    """The servers' schemas (nested $defs, enums, bounds) go out through each real SDK client and are accepted."""
    from agentnb._debugger.timeline import Timeline
    from agentnb._lint import validate
    from agentnb.providers import anthropic, gemini, openai_chat, openai_responses

    def answer(messages: list[anb.Message]) -> dict[str, Any]:
        return {"text": " | ".join(r.content for m in messages for r in m.tool_results)}

    emu.play([
        {"tool_calls": [_call("lookup_order", order_id="42"), _call("order", items=[{"sku": "ABC-1", "qty": 1}])]},
        {"tool_calls": [_call("refund", order_id="43", amount_cents=1)]},
        answer,
    ])
    start = len(emu.requests)
    cls, options = SDK_OPTIONS[provider]
    model = getattr(anb, cls)(emu.client(provider), **options)
    tools = [*servers.http.tools(include=["lookup_order", "refund"]), *servers.lab.tools(include=["order"])]
    run = anb.Loop(model=model, tools=tools, retry_base_delay=0.0).start("Check order 42, then refund 43.").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL, run.reason
    run.deny(run.pending_approvals()[0].call_id, reason="not today")
    run.run()
    assert run.state is anb.LoopState.COMPLETED, (run.reason, [r.error for r in emu.requests[start:]])
    assert all(r.status == 200 for r in emu.requests[start:])
    assert all(word in (run.output or "") for word in ("Blue kettle", "ABC-1", "not today"))
    # the emulator validates every request as the service would (a 400 otherwise); check the rendering too
    timeline = Timeline(run.events)
    adapter = {"openai_chat": openai_chat, "openai_responses": openai_responses, "anthropic": anthropic,
               "gemini": gemini}[provider]
    for ev in run.events:
        if ev.type == "ModelRequested":
            offered = [t for t in timeline.state.tools if t.name in set(ev.tools)]
            assert {t.server for t in offered} <= {"shop", "lab"}
            body = adapter.render_request(timeline.messages_at(ev.seq)[: ev.message_count], offered, model="m")
            assert not [str(f) for f in validate(provider, body) if f.severity == "error"]


def test_in_a_real_notebook_kernel() -> None:
    """In an IPython kernel (a running event loop, a sys.stderr without a file descriptor), as a user types it."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "import sys, agentnb as anb\n"
        f"shop = anb.MCPServer.stdio(sys.executable, ['-m', 'agentnb.mcp_demo'], env={{'PYTHONPATH': {ROOT!r}}})",
        "lookup = shop.tools(include=['lookup_order'])[0]\nlookup(order_id='42')['item']",
        "model = anb.ScriptedModel([{'tool_calls': [{'name': 'refund', 'arguments': "
        "{'order_id': '42', 'amount_cents': 5}}]}, {'text': 'ok'}])\n"
        "run = anb.Loop(model=model, tools=[shop]).start('x').run()\n"
        "run.approve(run.pending_approvals()[0].call_id)\n"
        "run.run().state.value, run.transcript.frames.calls()['server'].tolist()",
        "shop.close()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = [c.outputs for c in nb.cells]
    assert outputs[1][0]["data"]["text/plain"] == "'Blue kettle'"
    assert outputs[2][0]["data"]["text/plain"] == "('COMPLETED', ['shop'])"
    assert not any(o.get("output_type") == "error" for out in outputs for o in out)


# --- calls that never answer, cancellation, malformed answers, risk by the latest listing ------------------


def _bounded(fn: Callable[[], T], limit: float, unstick: Callable[[], None]) -> T:
    """``fn()`` in a thread, failing the test if it is still running after ``limit`` s (then ``unstick`` ends it)."""
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        unstick()  # e.g. close the server: the hung call ends with its session, and the thread with it
        thread.join(60)
        pytest.fail(f"still running after {limit:g} s: a hang")
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])


def _wait_for(predicate: Callable[[], bool], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not true within {limit:g} s")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def quick() -> Iterator[anb.MCPServer]:
    """The lab server with a short call timeout, whose tools run without asking."""
    server = anb.MCPServer.stdio(sys.executable, [LAB], name="quick", call_timeout=2.0, approval=False)
    try:
        yield server.connect()
    finally:
        server.close()


def test_every_mcp_call_has_a_default_call_timeout(servers: Servers) -> None:
    from agentnb.mcp import DEFAULT_CALL_TIMEOUT

    assert DEFAULT_CALL_TIMEOUT == 60.0 and servers.lab.call_timeout == 60.0
    assert {t.max_timeout for t in servers.lab.tools()} == {60.0}  # the ceiling of every tool of the server
    assert anb.MCPServer.stdio(sys.executable, [LAB], call_timeout=None).call_timeout is None
    with pytest.raises(ValueError, match="call_timeout"):
        anb.MCPServer.stdio(sys.executable, [LAB], call_timeout=0)


def test_a_call_that_never_answers_ends_at_the_smallest_limit(servers: Servers, quick: anb.MCPServer) -> None:
    def ends(tools: list[Any], **options: Any) -> tuple[float, Any]:
        start = time.monotonic()
        run = _bounded(lambda: _loop(tools, {"tool_calls": [_call("hang")]}, **options).start("x").run(), 60,
                       quick.close)
        return time.monotonic() - start, _finished(run)["hang"]

    hang = quick.tools(include=["hang"])[0]
    took, done = ends([hang])  # the server's call_timeout (2 s)
    assert (done.status, done.error_type) == ("timeout", "TimeoutError") and "within 2 s" in done.content
    assert took < 30
    took, done = ends([dataclasses.replace(hang, timeout=30.0)])  # a longer tool timeout: the ceiling still wins
    assert done.status == "timeout" and "within 2 s" in done.content and took < 30
    took, done = ends([quick], budget=anb.Budget(tool_timeout=0.5))  # a shorter loop timeout wins
    assert done.status == "timeout" and "within 0.5 s" in done.content and took < 30
    start = time.monotonic()
    with pytest.raises(TimeoutError):  # a direct call too
        _bounded(lambda: quick.call("hang"), 60, quick.close)
    assert time.monotonic() - start < 30
    assert quick.call("pid") > 0  # the session survives: the call was cancelled on the server


def test_a_write_that_never_answers_is_outcome_unknown_at_the_call_timeout(quick: anb.MCPServer) -> None:
    run = _bounded(lambda: _loop([quick], {"tool_calls": [_call("hang_write", target="t")]}).start("x").run(), 60,
                   quick.close)
    assert run.state is anb.LoopState.WAITING_APPROVAL
    (asked,) = _events(run, "ApprovalRequested")
    assert asked.kind == "outcome_unknown" and "its timeout (2 s)" in asked.note
    assert _events(run, "ToolFinished") == []  # never answered as if it had not happened


def test_cancel_from_another_thread_ends_a_run_whose_mcp_call_never_answers(servers: Servers) -> None:
    lab = servers.lab  # default settings: the call timeout is a minute away
    before = lab.connections

    def cancelled(run: anb.Run) -> tuple[anb.Run, float]:
        worker = threading.Thread(target=run.run, daemon=True)
        worker.start()
        _wait_for(lambda: bool(_events(run, "ToolStarted")) and len(_events(run, "ToolStarted")) > len(
            _events(run, "ToolFinished")))
        time.sleep(0.3)  # the call is on the server now
        start = time.monotonic()
        run.cancel("the user stopped it")
        _bounded(lambda: worker.join(), 30, lab.close)
        assert not worker.is_alive(), "cancel() did not end the run"
        return run, time.monotonic() - start

    run, took = cancelled(_loop([lab], {"tool_calls": [_call("hang")]}).start("x"))
    assert run.state is anb.LoopState.CANCELLED and took < 15
    done = _finished(run)["hang"]
    assert (done.status, done.error_type) == ("error", "Cancelled")  # type: ignore[attr-defined]
    assert "stopped while it ran: the run was cancelled (the user stopped it)" in done.content  # type: ignore[attr-defined]
    assert lab.call("pid") > 0 and lab.connections == before  # the read was cancelled; the session lives on

    write = _loop([lab], {"tool_calls": [_call("hang_write", target="t")]}).start("x").run()
    write.approve(write.pending_approvals()[0].call_id)
    write, took = cancelled(write)
    assert write.state is anb.LoopState.CANCELLED and took < 15
    unknown = [e for e in _events(write, "ApprovalRequested") if e.kind == "outcome_unknown"]
    assert len(unknown) == 1 and "still running when the run was cancelled (the user stopped it)" in unknown[0].note
    assert "hang_write" not in _finished(write)  # a write is never answered as if it had not happened


def test_malformed_answers_are_error_results_not_hangs(servers: Servers) -> None:
    kinds = {
        "not_json": "not valid JSON-RPC (not JSON",
        "wrong_id": "a response to request id 987654321, which was never sent",
        "no_result": "not valid JSON-RPC (JSON that is no request, notification, result or error",
        "not_a_result": "a result that is not a CallToolResult: content: Input should be a valid list",
    }
    turns = [{"tool_calls": [_call("garble", kind=kind)]} for kind in kinds]
    start = time.monotonic()
    run = _bounded(lambda: _loop([servers.lab], *turns, {"tool_calls": [_call("pid")]}).start("x").run(), 120,
                   servers.lab.close)
    assert time.monotonic() - start < 60  # a restart or three, never the minute of the call timeout
    assert run.state is anb.LoopState.COMPLETED
    done = [e for e in _events(run, "ToolFinished")]
    for (kind, words), ev in zip(kinds.items(), done, strict=False):
        assert (ev.status, ev.error_type) == ("error", "MCPServerError"), kind
        assert words in ev.content, (kind, ev.content)
    assert done[-1].name == "pid" and done[-1].status == "ok"  # the next call started the server again


def _flipper(tmp_path: Path, annotations: dict[str, Any], **options: Any) -> tuple[anb.MCPServer, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    notes = tmp_path / "annotations.json"
    notes.write_text(json.dumps(annotations))
    return anb.MCPServer.stdio(sys.executable, [LAB, "--annotations", str(notes)], **options), notes


def _restart(server: anb.MCPServer, notes: Path, annotations: dict[str, Any]) -> None:
    """Give the server new annotations and kill it: its next session lists them."""
    notes.write_text(json.dumps(annotations))
    os.kill(server.call("pid"), signal.SIGKILL)
    _wait_for(lambda: not server.connected)


def test_risk_follows_the_latest_listing(tmp_path: Path) -> None:
    READ, DESTRUCTIVE = {"readOnlyHint": True}, {"readOnlyHint": False, "destructiveHint": True}
    flipper, notes = _flipper(tmp_path, READ)
    try:
        model = anb.ScriptedModel([{"tool_calls": [_call("flip")]}, {"tool_calls": [_call("flip"), _call("flip")]},
                                   {"tool_calls": [_call("flip")]}, {"tool_calls": [_call("flip")]}, {"text": "ok"}])
        run = anb.Loop(model=model, tools=[flipper]).start("x")
        step = lambda n: _bounded(lambda: run.run_until(lambda e: len(_events(run, "ToolFinished")) >= n  # noqa: E731
                                                        or run.state is anb.LoopState.WAITING_APPROVAL), 120,
                                  flipper.close)
        step(1)
        assert _events(run, "ToolFinished")[0].status == "ok" and not _events(run, "ApprovalRequested")

        # restarted with destructive annotations; the loop's calls were checked as reads: not sent, said why
        _restart(flipper, notes, DESTRUCTIVE)
        step(3)
        refused = _events(run, "ToolFinished")[1:]
        assert [e.status for e in refused] == ["error", "error"]
        assert all("was checked as a read, so it was not sent" in e.content for e in refused)
        # the next call is checked under the new listing: it waits for a person
        step(4)
        assert run.state is anb.LoopState.WAITING_APPROVAL
        (asked,) = _events(run, "ApprovalRequested")
        assert (asked.kind, asked.risk) == ("approval", "dangerous")
        run.approve(asked.call_id)
        step(4)
        assert _events(run, "ToolFinished")[3].status == "ok"
        assert _events(run, "ToolStarted")[-1].idempotency_key  # a write now: it went through the ledger
        assert flipper.tools(include=["flip"])[0].risk == "dangerous"  # tools built now: the latest listing

        # relisted read-only at once (connect), then destructive again: the very next call asks first
        _restart(flipper, notes, READ)
        flipper.connect()
        assert flipper.tools(include=["flip"])[0].risk == "read"
        _restart(flipper, notes, DESTRUCTIVE)
        flipper.connect()
        step(5)
        assert run.state is anb.LoopState.WAITING_APPROVAL and _events(run, "ApprovalRequested")[-1].risk == "dangerous"
        assert len(_events(run, "ToolFinished")) == 4  # nothing reached the server before the approval
    finally:
        flipper.close()


def test_declared_risk_is_a_floor_and_read_only_wins_over_destructive(tmp_path: Path) -> None:
    both = {"readOnlyHint": True, "destructiveHint": True}  # the MCP spec: destructiveHint means nothing then
    servers = {
        "plain": _flipper(tmp_path / "a", both)[0],
        "declared": _flipper(tmp_path / "b", both, risk={"flip": "write"})[0],
        "raised": _flipper(tmp_path / "c", {"destructiveHint": True}, risk={"flip": "read"})[0],
        "untrusted": _flipper(tmp_path / "d", {"destructiveHint": True}, risk={"flip": "read"},
                              trust_annotations=False)[0],
    }
    try:
        with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
            risks = dict(zip(servers, pool.map(lambda s: s.tools(include=["flip"])[0].risk, servers.values()),
                             strict=True))
        assert risks == {
            "plain": "read",  # readOnlyHint and destructiveHint both true: a read
            "declared": "write",  # the user's risk: annotations never lower it
            "raised": "dangerous",  # trusted annotations may raise it above the user's floor
            "untrusted": "read",  # an untrusted server's annotations count for nothing: the user's word stands
        }
    finally:
        for s in servers.values():
            s.close()
