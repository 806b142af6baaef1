"""No credential reaches any artifact a run writes: transcript, checkpoint, frames, Parquet, CSV."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr

import agentnb as anb
from agentnb._messages import Message, ModelTurn, TextPart, ToolCallPart, Usage
from agentnb._request import ModelRequest

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
    store = anb.SqliteStore(tmp_path / "runs.db", key="secrets-test-key")
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


# -- secret tool arguments: what a tool gets, what the log keeps, and what a resume can do ----------------

TOKEN = "zq9-deploy-token-55ab19"
received: list[tuple[str, str]] = []


@anb.tool(risk="write")
def deploy(target: str, token: SecretStr) -> str:
    """Deploy to a target with a token."""
    received.append((target, token.get_secret_value()))
    return f"deployed to {target}"


def deploy_loop(store: anb.SqliteStore) -> anb.Loop:
    script = [{"tool_calls": [{"name": "deploy", "arguments": {"target": "prod", "token": TOKEN}}]},
              lambda messages: {"text": "Result: " + messages[-1].tool_results[0].content}]
    return anb.Loop(model=anb.ScriptedModel(script), tools=[deploy], store=store)


def test_approval_in_the_same_process_runs_the_tool_with_the_real_secret(tmp_path: Path) -> None:
    received.clear()
    run = deploy_loop(anb.SqliteStore(tmp_path / "runs.db", key="secrets-test-key")).start("Deploy", run_id="d1").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL
    waiting = run.pending_approvals()[0]
    assert waiting.arguments == {"target": "prod", "token": "[REDACTED]"}  # what the approver sees
    run.approve(waiting.call_id)
    assert run.run().output == "Result: deployed to prod"
    assert received == [("prod", TOKEN)]
    run.transcript.save(tmp_path / "run.jsonl")
    for path in (tmp_path / "run.jsonl", tmp_path / "runs.db"):
        assert TOKEN.encode() not in path.read_bytes()


def test_approval_edits_keep_the_secret_they_leave_masked_and_take_one_typed_anew(tmp_path: Path) -> None:
    received.clear()
    loop = deploy_loop(anb.SqliteStore(tmp_path / "runs.db", key="secrets-test-key"))
    kept = loop.start("Deploy", run_id="e1").run()
    kept.approve(kept.pending_approvals()[0].call_id, arguments={"target": "staging", "token": "[REDACTED]"})
    kept.run()
    typed = loop.start("Deploy", run_id="e2").run()
    typed.approve(typed.pending_approvals()[0].call_id, arguments={"target": "prod", "token": "zq9-typed-by-ops-77"})
    typed.run()
    assert received == [("staging", TOKEN), ("prod", "zq9-typed-by-ops-77")]
    resolved = next(e for e in typed.events if e.type == "ApprovalResolved")
    assert resolved.arguments == {"target": "prod", "token": "[REDACTED]"}
    kept.transcript.save(tmp_path / "kept.jsonl")
    typed.transcript.save(tmp_path / "typed.jsonl")
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        assert TOKEN.encode() not in data and b"zq9-typed-by-ops-77" not in data, path.name


def test_a_resumed_call_whose_secret_was_masked_ends_with_an_error_and_never_runs(tmp_path: Path) -> None:
    received.clear()
    deploy_loop(anb.SqliteStore(tmp_path / "runs.db", key="secrets-test-key")).start("Deploy", run_id="r1").run()
    # another process: the store holds the events, never the token
    loop = deploy_loop(anb.SqliteStore(tmp_path / "runs.db", key="secrets-test-key"))
    resumed = anb.Run.resume("r1", loop=loop)
    assert resumed.state is anb.LoopState.WAITING_APPROVAL
    resumed.approve(resumed.pending_approvals()[0].call_id)
    resumed.run()
    assert received == []
    finished = next(e for e in resumed.events if e.type == "ToolFinished")
    assert finished.status == "error" and finished.error_type == "SecretUnavailable"
    assert "'token'" in finished.content and "deploy" in finished.content
    assert resumed.state is anb.LoopState.COMPLETED and "not available" in (resumed.output or "")
    assert TOKEN.encode() not in (tmp_path / "runs.db").read_bytes()


def test_a_result_cut_at_the_size_limit_never_keeps_half_a_key() -> None:
    key = "sk-proj-" + "K" * 40

    @anb.tool
    def dump_env() -> str:
        """Print the environment."""
        return "x" * 95 + f" OPENAI_API_KEY={key} and more"

    script = [{"tool_calls": [{"name": "dump_env", "arguments": {}}]}, {"text": "ok"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[dump_env],
                   budget=anb.Budget(max_result_chars=120)).start("env").run()
    finished = next(e for e in run.events if e.type == "ToolFinished")
    assert finished.truncated and "sk-proj" not in finished.content and "KKKK" not in finished.content
    assert key not in json.dumps(finished.value)


def test_a_secret_parameter_of_any_type_and_constraint_is_checked_with_its_real_value(tmp_path: Path) -> None:
    got: list[int] = []

    @anb.tool(secret=["pin"])
    def unlock(door: str, pin: Annotated[int, Field(ge=1000, le=9999)]) -> str:
        """Unlock a door."""
        got.append(pin)
        return f"{door} open"

    script = [{"tool_calls": [{"name": "unlock", "arguments": {"door": "front", "pin": 4821}},
                              {"name": "unlock", "arguments": {"door": "back", "pin": 12}}]},
              {"text": "done"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[unlock]).start("open").run()
    assert got == [4821]
    validated = [e.arguments for e in run.events if e.type == "CallValidated"]
    assert validated == [{"door": "front", "pin": "[REDACTED]"}, {"door": "back", "pin": "[REDACTED]"}]
    results = [(e.status, e.content) for e in run.events if e.type == "ToolFinished"]
    assert results[0] == ("ok", "front open")
    assert results[1][0] == "error" and "pin" in results[1][1] and "12" not in results[1][1]
    run.transcript.save(tmp_path / "run.jsonl")
    # as a number or in a text; not the digits of a timestamp's microseconds or of a hex id, which are random
    assert not re.search(rb"(?<![0-9a-fA-F.])4821(?![0-9a-fA-F])", (tmp_path / "run.jsonl").read_bytes())
