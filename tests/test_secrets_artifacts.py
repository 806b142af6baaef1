"""No secret in any artifact, for every model kind agentnb ships, through the real SDK clients and the emulator.

Each case runs one model kind with its own shapeless client key (``zq9-...``: no pattern knows it; only the
model's ``credentials()`` does), and the provider echoes that key back in an error. The model then calls a
tool with three secrets in its arguments -- a ``SecretStr`` parameter with an ordinary name, a parameter
listed in ``secret=[...]``, and a provider-shaped key inside an ordinary string -- and the tool returns a
key-shaped value and echoes the listed secret. Every artifact the library writes (the transcript JSONL, the
SQLite store, the recorder's cassette, Parquet and CSV of every frame, the debugger's HTML) is then grepped
byte for byte for every secret value, while the tool must have received the real values.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

import agentnb as anb
from agentnb._debugger import cards, viewdata, wire
from agentnb._redact import MASK
from agentnb.emulator import Emulator
from agentnb.frames import events_with_payload

MODELS = ["openai_chat", "openai_responses", "anthropic", "gemini", "fallback", "recorder", "replay"]
FRAMES = ("events", "turns", "calls", "messages", "approvals", "guards", "compressions")


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(chunk_size=7) as e:
        yield e


def secrets_for(case: str) -> dict[str, str]:
    """Values unique to one case: a value registered by an earlier case cannot hide a failure of this one.

    Each holds a random-looking core (``core(value)``) that appears nowhere else, so any piece of it that a
    split stream left in an artifact can be found.
    """
    def c(label: str) -> str:
        digest = hashlib.sha256(f"{case}/{label}".encode()).digest()
        return base64.b32encode(digest).decode().lower()[:20]

    return {
        "key": f"zq9-{c('key')}",                      # the client's key: no known shape
        "backup_key": f"zq9-{c('backup')}",            # the second model's key in a fallback chain
        "pin": f"zq9-{c('pin')}",                      # a SecretStr parameter named like nothing secret
        "dsn": f"postgres://app:zq9-{c('dsn')}@db/x",  # a parameter listed in secret=[...]
        "shaped": f"sk-live-{c('shaped')}",            # a provider-shaped key inside an ordinary string
        "issued": f"sk-ant-{c('issued')}",             # a provider-shaped key in a tool's result
    }


def core(secret: str) -> str:
    return re.split(r"zq9-|sk-live-|sk-ant-", secret)[1][:20]


def client(emu: Emulator, provider: str, key: str) -> Any:
    """The real SDK client of ``provider`` pointed at the emulator, holding ``key``."""
    if provider in ("openai_chat", "openai_responses"):
        import openai

        return openai.OpenAI(base_url=emu.url("openai"), api_key=key, max_retries=0)
    if provider == "anthropic":
        import anthropic

        return anthropic.Anthropic(base_url=emu.url("anthropic"), api_key=key, max_retries=0)
    from google import genai

    return genai.Client(api_key=key, http_options={"base_url": emu.url("gemini")})


CLASSES = {"openai_chat": anb.OpenAIChatModel, "openai_responses": anb.OpenAIResponsesModel,
           "anthropic": anb.AnthropicModel, "gemini": anb.GeminiModel}
NAMES = {"openai_chat": "gpt-4.1", "openai_responses": "gpt-5", "anthropic": "claude-sonnet-4-6",
         "gemini": "gemini-2.5-flash"}


def sdk_model(emu: Emulator, provider: str, key: str, stream: bool) -> Any:
    return CLASSES[provider](client(emu, provider, key), model=NAMES[provider], stream=stream)


def make_tool(received: list[tuple[str, str, str]]) -> anb.Tool:
    @anb.tool(secret=["dsn"])
    def connect(host: str, vault_pin: SecretStr, dsn: str, note: str) -> dict[str, str]:
        """Open a connection.

        Args:
            host: the host.
            vault_pin: the vault's pin.
            dsn: the connection string.
            note: free text.
        """
        received.append((vault_pin.get_secret_value(), dsn, note))
        return {"host": host, "issued": SECRETS_ISSUED[0], "echo": f"connected with {dsn}"}

    return connect


SECRETS_ISSUED: list[str] = [""]


def script(s: dict[str, str]) -> list[Any]:
    call = {"name": "connect", "arguments": {"host": "db.internal", "vault_pin": s["pin"], "dsn": s["dsn"],
                                             "note": f"use {s['shaped']} for the mirror"}}
    return [{"tool_calls": [call]}, lambda messages: {"text": "Connected: " + messages[-1].tool_results[0].content}]


def run_case(case: str, emu: Emulator, tmp_path: Path, stream: bool) -> tuple[anb.Run, dict[str, str], list[Any]]:
    s = secrets_for(case)
    SECRETS_ISSUED[0] = s["issued"]
    received: list[tuple[str, str, str]] = []
    tools = [make_tool(received)]
    store = anb.SqliteStore(tmp_path / "runs.db", key="store-key-for-tests")
    echo = f"Incorrect API key provided: {s['key']}. You can find your API key at https://example.test."
    emu.play(script(s))
    if case == "fallback":  # the primary refuses the key (echoing it), the backup answers
        emu.fail(401, message=echo, provider="openai_chat")
        model: Any = anb.FallbackModel([sdk_model(emu, "openai_chat", s["key"], stream),
                                        sdk_model(emu, "gemini", s["backup_key"], stream)])
        emu.fail(503, message=f"overloaded; key {s['backup_key']} is fine", provider="gemini")
        emu.fail(401, message=echo, provider="openai_chat")
    elif case in ("recorder", "replay"):
        cassette = tmp_path / "cassette.jsonl"
        model = anb.Recorder(sdk_model(emu, "openai_chat", s["key"], stream), cassette)
        emu.fail(500, message=echo)
        if case == "replay":  # record first (in memory), then play the cassette back offline
            anb.Loop(model=model, tools=tools, retry_base_delay=0).start("Connect", run_id="recorded").run()
            model.close()
            assert len(received) == 1  # the recorded run's tool got the real values
            received.clear()
            model = anb.ScriptedModel.replay(cassette)
    else:
        model = sdk_model(emu, case, s["key"], stream)
        emu.fail(500, message=echo)
    run = anb.Loop(model=model, tools=tools, store=store, retry_base_delay=0).start("Connect", run_id="r").run()
    if isinstance(model, anb.Recorder):
        model.close()
    store.close()
    return run, s, received


def write_every_artifact(run: anb.Run, tmp_path: Path) -> list[Path]:
    run.transcript.save(tmp_path / "run.jsonl")
    collection = anb.load_transcripts(tmp_path / "run.jsonl")
    collection.save_parquet(tmp_path / "parquet")
    frames = run.transcript.frames
    for name in FRAMES:
        frames.frame(name).astype(str).to_csv(tmp_path / f"{name}.csv")
    frames.events(payload=True).astype(str).to_csv(tmp_path / "events-payload.csv")
    events_with_payload([run.events], wire=True).astype(str).to_csv(tmp_path / "events-payload-wire.csv")
    frames.calls(flatten_arguments=True).astype(str).to_csv(tmp_path / "calls-flat.csv")
    (tmp_path / "debugger.html").write_text(debugger_html(run, tmp_path), encoding="utf-8")
    return [p for p in tmp_path.rglob("*") if p.is_file()]


def debugger_html(run: anb.Run, tmp_path: Path) -> str:
    """Everything the debugger can show: its display bundle (the static fallback), the synced view with each
    event selected, every event's full card, the wire view of every provider at every event, the rows the page
    gets, the static snapshot of saved notebooks, and the one-file export (its data decoded)."""
    dbg = anb.Debugger(run)
    out = [json.dumps(dbg._repr_mimebundle_(), default=str)]
    view = dbg.view
    names = ("header", "message", "controls", "meters", "diagram", "detail", "conversation", "wire", "plots",
             "breakpoints", "pending", "error", "snapshot")
    for ev in run.events:
        dbg.select(ev.seq)
        out.extend(json.dumps(getattr(view, n), default=str) for n in names)
        out.append(cards.card(ev, cards.CardContext(dbg.timeline), open_=True))
        for provider in [t for t, _ in wire.ADAPTERS]:
            out.append(json.dumps(viewdata.wire_view(dbg.timeline, ev.seq, provider), default=str))
    out.append(json.dumps(viewdata.RowEncoder().encode(dbg.timeline.events, 0, len(dbg.timeline)), default=str))
    out.append(json.dumps(viewdata.static_bundle(dbg.timeline, title="t"), default=str))
    page = dbg.export_html(tmp_path / "export.html").read_text(encoding="utf-8")
    out.append(page)
    decoded = 0
    for blob in re.findall(r"[A-Za-z0-9+/=]{200,}", page):  # the export's data is gzip + base64: read it too
        try:
            out.append(gzip.decompress(base64.b64decode(blob)).decode("utf-8", "replace"))
            decoded += 1
        except (OSError, ValueError):
            continue
    assert decoded >= 1, "the export's data blocks were not found: this grep would see nothing of them"
    return "\n".join(out)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", MODELS)
def test_no_artifact_holds_a_secret(case: str, stream: bool, emu: Emulator, tmp_path: Path) -> None:
    run, s, received = run_case(case, emu, tmp_path, stream)
    assert run.state is anb.LoopState.COMPLETED, run.reason
    written = write_every_artifact(run, tmp_path)
    names = {p.name for p in written}
    assert {"run.jsonl", "runs.db", "debugger.html", "events.csv", "calls-flat.csv"} <= names
    assert any(p.suffix == ".parquet" for p in written)
    if case in ("recorder", "replay"):
        assert "cassette.jsonl" in names
    # the test can fail: the secrets went through the run, masked where the run keeps them
    jsonl = (tmp_path / "run.jsonl").read_text(encoding="utf-8")
    assert MASK in jsonl and "connect" in jsonl
    if case != "replay":  # the HTTP exchanges were kept (the key's header masked), and every artifact holds them
        wires = [e.response.wire for e in run.events if e.type == "TurnCompleted"]
        assert wires and all(w is not None and w["request_body"] for w in wires)
        assert all(bool(w["frames"]) is stream for w in wires if w is not None)
        assert "request_headers" in jsonl and "request_headers" in (tmp_path / "events-payload-wire.csv").read_text()
    html = (tmp_path / "debugger.html").read_text(encoding="utf-8")
    assert "connect" in html and "REDACTED" in html
    if case != "replay":  # the provider echoed the client key; the run kept the error, masked
        errors = [e.error for e in run.events if e.type == "ModelRetried"]
        failed = [f["error"] for e in run.events if e.type == "TurnCompleted" and isinstance(e.response.raw, dict)
                  for f in (e.response.raw.get("fallback") or {}).get("failed", [])]
        assert any(MASK in text for text in errors + failed)
        # the tool got the real values; a cassette cannot hold them, so a replay gets the mask
        assert received == [(s["pin"], s["dsn"], f"use {s['shaped']} for the mirror")]
    else:  # a cassette holds the mask, never the secret: the call ends with an error result, the tool never runs
        assert received == []
        finished = next(e for e in run.events if e.type == "ToolFinished")
        assert finished.status == "error" and finished.error_type == "SecretUnavailable"
        assert "vault_pin" in finished.content and "dsn" in finished.content
    for path in written:
        data = path.read_bytes()
        for label, secret in s.items():  # the whole value, and any 6 characters of its core (a stream's pieces)
            assert secret.encode() not in data, f"the {label} secret is in {path.relative_to(tmp_path)}"
            for piece in windows(core(secret), 6):
                assert piece.encode() not in data, f"a piece of the {label} secret is in {path.relative_to(tmp_path)}"


def windows(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(len(text) - size + 1)]


def test_every_shipped_model_declares_the_key_it_holds(emu: Emulator, tmp_path: Path) -> None:
    key = "zq9-declared-credential-1234"
    for provider in CLASSES:
        assert key in sdk_model(emu, provider, key, False).credentials(), provider
    chain = anb.FallbackModel([sdk_model(emu, "anthropic", key, False), sdk_model(emu, "gemini", key + "b", False)])
    assert {key, key + "b"} <= set(chain.credentials())
    with anb.Recorder(chain, tmp_path / "c.jsonl", secrets=["zq9-extra-secret"]) as rec:
        assert rec.credentials() == [*chain.credentials(), "zq9-extra-secret"]
    assert anb.ScriptedModel([{"text": "hi"}]).credentials() == []
    assert anb.ScriptedModel.replay(tmp_path / "c.jsonl").credentials() == []
