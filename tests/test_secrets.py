"""No credential reaches any artifact a run writes: transcript, checkpoint, frames, Parquet, CSV."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agentnb as anb
from agentnb.messages import Message, ModelTurn, TextPart, ToolCallPart, Usage
from agentnb.providers.base import ModelRequest

SECRET = "sk-test-SECRET-0123456789abcdef"
GOOGLE = "AIzaSyA-SECRET-1234567890abcdefgh"
ODD = "no-pattern-SECRET-but-registered-42"  # a key of no known shape, known because the model declares it


class LeakyModel:
    """A provider model whose raw responses and errors carry credentials, as careless SDK objects might."""

    provider = "openai_chat"
    name = "leaky"

    def __init__(self) -> None:
        self.calls = 0

    def credentials(self) -> list[str]:
        return [ODD]

    def respond(self, request: ModelRequest) -> Iterator[Any]:
        self.calls += 1
        if self.calls == 1:
            raise anb.ModelError(f"Incorrect API key provided: {SECRET} (client key {ODD})", status=500)
        raw = {"request": {"headers": {"Authorization": f"Bearer {SECRET}", "x-goog-api-key": GOOGLE}},
               "url": f"https://example.test/v1?key={GOOGLE}"}
        if self.calls == 2:
            call = ToolCallPart(call_id="c1", name="fetch", arguments_raw="{}", arguments={})
            yield ModelTurn(message=Message(role="assistant", parts=(call,)), provider=self.provider, model=self.name,
                            finish_reason_raw="tool_calls", finish_reason="tool_calls", usage=Usage(), raw=raw)
            return
        yield ModelTurn(message=Message(role="assistant", parts=(TextPart(text="done"),)), provider=self.provider,
                        model=self.name, finish_reason_raw="stop", finish_reason="stop", usage=Usage(), raw=raw)


@anb.tool
def fetch() -> str:
    """Fetch a URL that carries a key."""
    raise RuntimeError(f"403 from https://maps.example/api?key={GOOGLE}")


def test_no_artifact_holds_a_secret(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db", key="k")
    loop = anb.Loop(model=LeakyModel(), tools=[fetch], store=store, retry_base_delay=0,
                    settings={"extra_headers": {"Authorization": f"Bearer {SECRET}"}, "temperature": 0})
    run = loop.start("go").run()
    assert run.state is anb.LoopState.COMPLETED
    run.transcript.save(tmp_path / "run.jsonl")
    frames = run.transcript.frames
    for name in ("events", "turns", "calls", "messages"):
        getattr(frames, name)().astype(str).to_csv(tmp_path / f"{name}.csv")
    anb.load_transcripts(tmp_path / "run.jsonl").save_parquet(tmp_path / "parquet")
    store.close()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) >= 7
    for path in written:
        data = path.read_bytes()
        for secret in (SECRET, GOOGLE, ODD, "SECRET"):
            assert secret.encode() not in data, f"{secret} found in {path.name}"
    retried = next(e for e in run.events if e.type == "ModelRetried")
    assert "[REDACTED]" in retried.error
    settings = next(e for e in run.events if e.type == "ModelRequested").settings
    assert settings == {"extra_headers": {"Authorization": "[REDACTED]"}, "temperature": 0}
