"""The ``agentnb`` command as a user runs it: ``python -m agentnb`` in a subprocess, on real files.

The stores are real SQLite files holding runs a real scripted loop paused for approval; transcripts are saved
by ``Transcript.save``; the loop the approvals name (``--loop shop:loop``) is a module in the working
directory, as a user's would be. Every invocation is checked for its exit code and for never printing a
traceback (:func:`cli`). Usage errors click refuses before a verb runs, and the refusals of ``--loop``, go
through click's test runner in this process (:func:`inproc`): the same code and exit codes, without a
second of interpreter start each (the machine's cores are shared).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import tomllib
from importlib import import_module
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

import agentnb as anb
from agentnb._cli import cli as cli_group
from agentnb._cli._common import MEANING, Exit
from agentnb.events import ApprovalResolved, event_to_json

ROOT = Path(__file__).resolve().parent.parent
KEY = "a-test-checkpoint-key"

SHOP = '''
import agentnb as anb

def _loop(**options):
    return anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), **options)

loop = _loop()
short_loop = _loop(approval_ttl=0.05)
not_a_loop = 42
other_loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("weather"))
'''


def cli(args: list[str], cwd: Path, *, env: dict[str, str] | None = None, code: int | None = 0,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agentnb ARGS`` in ``cwd``; check the exit code (unless None) and that no traceback shows."""
    proc = subprocess.run([sys.executable, "-m", "agentnb", *args], cwd=cwd, env={**base_env(cwd), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    if code is not None:
        assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def inproc(args: list[str], cwd: Path, *, code: int = 0) -> str:
    """Invoke the command in this process (click's runner), in ``cwd``; check the exit code; return the output."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli_group, args, env={"AGENTNB_CHECKPOINT_KEY": KEY, "HOME": str(cwd)})
    finally:
        os.chdir(old)
    assert result.exit_code == code, (args, result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.output


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTNB_CHECKPOINT_KEY", "AGENTNB_LOOP")}
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "HOME": str(home), "AGENTNB_CHECKPOINT_KEY": KEY}


def paused_run(store: Path, run_id: str, **options: Any) -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"),
                    store=anb.SqliteStore(store, key=KEY), **options)
    run = loop.start("Refund order 42", run_id=run_id).run()
    assert run.state is anb.LoopState.WAITING_APPROVAL
    return run


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with the shop module, a store of paused runs and a saved transcript."""
    d = tmp_path_factory.mktemp("cli")
    (d / "shop.py").write_text(SHOP, encoding="utf-8")
    run = paused_run(d / "runs.db", "refund-42")
    paused_run(d / "runs.db", "refund-43")
    paused_run(d / "runs.db", "refund-ttl", approval_ttl=0.05)
    run.transcript.save(d / "refund.jsonl")
    done = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    done.start("Paris?", run_id="weather-1").run().transcript.save(d / "weather.jsonl")
    return d


def fresh_store(work: Path, name: str) -> Path:
    """A copy of the store for a test that changes it (SQLite's backup: the WAL's pages come along)."""
    path = work / name
    src, dst = sqlite3.connect(work / "runs.db"), sqlite3.connect(path)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return path


# -- the command itself ----------------------------------------------------------------------------------------


def test_version_and_the_console_script(work: Path) -> None:
    assert cli(["--version"], work).stdout.strip() == f"agentnb {anb.__version__}"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, name = scripts["agentnb"].partition(":")
    assert getattr(import_module(module), name) is import_module("agentnb._cli").main


def test_every_verb_has_help_with_examples_and_the_exit_codes(work: Path) -> None:
    top = cli(["--help"], work).stdout
    verbs = ["runs", "approve", "deny", "export", "lint", "import", "emulator", "view"]
    assert all(v in top for v in verbs) and "Exit codes:" in top
    runner = CliRunner()
    for verb in verbs:
        result = runner.invoke(cli_group, [verb, "--help"])
        assert result.exit_code == 0, (verb, result.output)
        assert "Examples:" in result.output and f"agentnb {verb} " in result.output, verb
        assert all(f"  {code.value}  {MEANING[code][:40]}" in result.output for code in Exit), verb
    docs = (ROOT / "docs" / "command.md").read_text(encoding="utf-8")
    assert all(f"| {code.value} |" in docs for code in Exit)
    assert all(f"agentnb {v}" in docs for v in verbs)


def test_an_unknown_verb_or_option_is_a_usage_error(work: Path) -> None:
    assert "No such command" in cli(["frobnicate"], work, code=2).stderr
    assert "No such option" in inproc(["runs", "runs.db", "--colour"], work, code=2)


# -- runs --------------------------------------------------------------------------------------------------------


def test_runs_lists_the_store_with_the_calls_waiting(work: Path) -> None:
    text = cli(["runs", "runs.db"], work).stdout
    assert "refund-42" in text and "WAITING_APPROVAL" in text and 'create_refund(order_id="42"' in text
    rows = json.loads(cli(["runs", "runs.db", "--json"], work).stdout)
    assert {r["run_id"] for r in rows} == {"refund-42", "refund-43", "refund-ttl"}
    row = next(r for r in rows if r["run_id"] == "refund-42")
    stored = anb.Run.resume("refund-42", loop=import_shop(work).loop, store=anb.SqliteStore(work / "runs.db",
                                                                                             key=KEY))
    (call,) = stored.pending_approvals()
    assert row["pending"][0]["call_id"] == call.call_id
    assert row["pending"][0]["digest"] == call.request.arguments_digest  # type: ignore[union-attr]
    assert row["input_tokens"] + row["output_tokens"] > 0 and row["model"] == "scripted:story:refund"
    assert json.loads(cli(["runs", "runs.db", "--state", "completed", "--json"], work).stdout) == []


def import_shop(work: Path) -> Any:
    sys.path.insert(0, str(work))
    try:
        return import_module("shop")
    finally:
        sys.path.remove(str(work))


def test_runs_refuses_what_is_not_a_store_and_never_writes_to_it(work: Path) -> None:
    assert "no such store" in cli(["runs", "missing.db"], work, code=3).stderr
    (work / "notes.txt").write_text("hello", encoding="utf-8")
    assert "not a SQLite file" in cli(["runs", "notes.txt"], work, code=8).stderr
    other = work / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    before = other.read_bytes()
    assert "not an agentnb store" in cli(["runs", "other.db"], work, code=8).stderr
    assert other.read_bytes() == before
    assert "is blank" in inproc(["runs", " "], work, code=2)
    assert "different key" in cli(["runs", "runs.db"], work, env={"AGENTNB_CHECKPOINT_KEY": "another-key-0"},
                                  code=8).stderr


def test_a_tampered_run_is_listed_with_its_error_and_exit_8(work: Path) -> None:
    store = fresh_store(work, "tampered.db")
    with sqlite3.connect(store) as db:
        db.execute("UPDATE events SET data = replace(data, '1999', '9999') WHERE run_id = 'refund-43'")
    proc = cli(["runs", "tampered.db", "--json"], work, code=8)
    rows = {r["run_id"]: r for r in json.loads(proc.stdout)}
    assert "error" in rows["refund-43"] and "error" not in rows["refund-42"]
    assert "cannot be read" in proc.stderr
    proc = cli(["approve", "tampered.db", "refund-43", "call_2_1", "--loop", "shop:loop"], work, code=8)
    assert "refund-43" in proc.stderr


# -- approve and deny --------------------------------------------------------------------------------------------


def _state(store: Path, run_id: str) -> str:
    return dict(anb.SqliteStore(store, key=KEY, readonly=True).runs())[run_id]


def test_approve_follows_the_fail_closed_rules_of_the_api(work: Path) -> None:
    store = fresh_store(work, "approve.db")
    s = "approve.db"
    (row,) = [r for r in json.loads(cli(["runs", s, "--json"], work).stdout) if r["run_id"] == "refund-42"]
    call, digest = row["pending"][0]["call_id"], row["pending"][0]["digest"]
    refusals = [
        (["approve", s, "refund-42", call, "--loop", "shop:loop", "--digest", "0" * 64], 6, "not the ones waiting"),
        (["approve", s, "refund-42", "call_9", "--loop", "shop:loop"], 3, "has no call 'call_9'"),
        (["approve", s, "", call, "--loop", "shop:loop"], 2, "is blank"),
    ]
    for args, code, said in refusals:
        assert said in cli(args, work, code=code).stderr, args
    for args, code, said in [
        (["approve", s, "nobody", call, "--loop", "shop:loop"], 3, "no run 'nobody'"),
        (["approve", s, "refund-42", call], 2, "--loop"),
        (["approve", s, "refund-42", call, "--loop", "shop"], 2, "MODULE:NAME"),
        (["approve", s, "refund-42", call, "--loop", "shop:nothing"], 3, "has no 'nothing'"),
        (["approve", s, "refund-42", call, "--loop", "shop:not_a_loop"], 2, "not an agentnb Loop"),
        (["approve", s, "refund-42", call, "--loop", "nomodule:loop"], 3, "no module 'nomodule'"),
    ]:
        assert said in inproc(args, work, code=code), args
    assert _state(store, "refund-42") == "WAITING_APPROVAL"  # nothing was recorded by a refusal
    out = json.loads(cli(["approve", s, "refund-42", call, "--loop", "shop:loop", "--digest", digest, "--by", "ana",
                          "--reason", "checked the order", "--json"], work).stdout)
    assert out["decision"] == "approved" and out["state"] == "COMPLETED" and "rf_42_1999" in out["output"]
    resolved = [e for e in anb.SqliteStore(store, key=KEY).load("refund-42") if isinstance(e, ApprovalResolved)]
    assert [(e.decision, e.by, e.note) for e in resolved] == [("approved", "ana", "checked the order")]
    assert "not waiting" in cli(["approve", s, "refund-42", call, "--loop", "shop:loop"], work, code=4).stderr


def test_deny_records_the_reason_and_the_model_reads_it(work: Path) -> None:
    store = fresh_store(work, "deny.db")
    proc = cli(["deny", "deny.db", "refund-43", "call_2_1", "--loop", "shop.py:loop", "--reason", "over the limit",
                "--by", "bo"], work)
    assert "denied call_2_1 (create_refund) of refund-43: the run is COMPLETED" in proc.stdout
    assert "Denied by the user: over the limit" in proc.stdout
    events = anb.SqliteStore(store, key=KEY).load("refund-43")
    (resolved,) = [e for e in events if isinstance(e, ApprovalResolved)]
    assert (resolved.decision, resolved.by) == ("denied", "bo")


def test_an_expired_approval_is_refused_and_can_still_be_denied(work: Path) -> None:
    fresh_store(work, "ttl.db")
    time.sleep(0.1)
    proc = cli(["approve", "ttl.db", "refund-ttl", "call_2_1", "--loop", "shop:short_loop"], work, code=5)
    assert "expired" in proc.stderr
    out = json.loads(cli(["deny", "ttl.db", "refund-ttl", "call_2_1", "--loop", "shop:short_loop", "--no-run",
                          "--json"], work).stdout)
    assert out["decision"] == "denied" and out["state"] != "WAITING_APPROVAL"


def test_a_run_another_driver_holds_is_locked_and_a_different_loop_untrusted(work: Path) -> None:
    store = fresh_store(work, "locked.db")
    held = anb.SqliteStore(store, key=KEY)
    held.acquire_lease("refund-42", "worker-7", 60.0, seq=len(held.load("refund-42")))
    proc = cli(["approve", "locked.db", "refund-42", "call_2_1", "--loop", "shop:loop"], work, code=7)
    assert "worker-7" in proc.stderr
    said = inproc(["approve", "locked.db", "refund-43", "call_2_1", "--loop", "shop:other_loop"], work, code=8)
    assert "another tool or approval policy" in said


# -- export --------------------------------------------------------------------------------------------------------


def test_export_writes_a_page_that_reads_back_losslessly(work: Path) -> None:
    cli(["export", "refund.jsonl", "-o", "refund.html"], work)
    page = (work / "refund.html").read_text(encoding="utf-8")
    assert 'id="agentnb-app"' in page and "http" not in page.split("<script")[0]
    original = anb.Transcript.load(work / "refund.jsonl")
    again = anb.Transcript.load(work / "refund.html")
    assert [event_to_json(e) for e in again] == [event_to_json(e) for e in original]
    out = json.loads(cli(["export", "refund-43", "--store", "runs.db", "-o", "r43.html", "--json"], work).stdout)
    assert out == [{"run_id": "refund-43", "source": "runs.db", "path": "r43.html",
                    "events": len(anb.SqliteStore(work / "runs.db", key=KEY).load("refund-43"))}]
    assert anb.Transcript.load(work / "r43.html").run_id == "refund-43"


def test_export_of_several_runs_writes_a_directory(work: Path) -> None:
    out = json.loads(cli(["export", "runs.db", "weather.jsonl", "-o", "site", "--json"], work).stdout)
    assert sorted(Path(w["path"]).name for w in out) == ["refund-42.html", "refund-43.html", "refund-ttl.html",
                                                          "weather-1.html"]
    assert all((work / w["path"]).is_file() for w in out)
    anb.TranscriptCollection([anb.Transcript.load(work / "weather.jsonl")]).save_parquet(work / "dataset")
    cli(["export", "dataset", "-o", "from_parquet.html"], work)
    again = anb.Transcript.load(work / "from_parquet.html")
    assert again.run_id == "weather-1" and again.state is anb.LoopState.COMPLETED


def test_export_refuses_missing_and_tampered_transcripts(work: Path) -> None:
    assert "no such file" in cli(["export", "nothing.jsonl", "-o", "x.html"], work, code=3).stderr
    lines = (work / "refund.jsonl").read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace('"seq":3', '"seq":7')
    (work / "edited.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = cli(["export", "edited.jsonl", "-o", "edited.html"], work, code=8)
    assert "edited.jsonl" in proc.stderr and not (work / "edited.html").exists()
    page = (work / "refund.html").read_text(encoding="utf-8")
    start = page.index('id="agentnb-transcript"')
    (work / "broken.html").write_text(page[:start + 80] + "!!" + page[start + 82:], encoding="utf-8")
    assert "agentnb-transcript" in cli(["export", "broken.html", "-o", "b2.html"], work, code=8).stderr
    without = page[:start].rsplit("<script", 1)[0] + page[page.index("</script>", start) + len("</script>"):]
    (work / "old.html").write_text(without, encoding="utf-8")
    assert "no transcript embedded" in inproc(["export", "old.html", "-o", "o2.html"], work, code=8)
    assert "no run 'nobody'" in inproc(["export", "nobody", "--store", "runs.db", "-o", "n.html"], work, code=3)


# -- lint ---------------------------------------------------------------------------------------------------------

BAD_CHAT = [
    {"role": "user", "content": "Add 1 and 2"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_9", "content": "3"},
]


def test_lint_reports_findings_and_fixes_a_copy(work: Path) -> None:
    (work / "bad.json").write_text(json.dumps(BAD_CHAT), encoding="utf-8")
    proc = cli(["lint", "bad.json", "--format", "openai_chat"], work, code=1)
    assert "unanswered_call" in proc.stdout and "orphan_result" in proc.stdout
    report = json.loads(cli(["lint", "bad.json", "--format", "openai_chat", "--json"], work, code=1).stdout)
    assert [f["code"] for f in report["findings"]] == [f.code for f in anb.lint(BAD_CHAT, "openai_chat")]
    cli(["lint", "bad.json", "--format", "openai_chat", "--fix", "-o", "fixed.json"], work)
    fixed = json.loads((work / "fixed.json").read_text(encoding="utf-8"))
    assert anb.lint(fixed, "openai_chat") == [] and fixed != BAD_CHAT
    (work / "body.json").write_text(json.dumps({"model": "gpt-4.1", "messages": BAD_CHAT}), encoding="utf-8")
    cli(["lint", "body.json", "--format", "openai_chat", "--fix", "-o", "body_fixed.json"], work)
    body = json.loads((work / "body_fixed.json").read_text(encoding="utf-8"))
    assert body["model"] == "gpt-4.1" and anb.lint(body["messages"], "openai_chat") == []
    assert "no findings" in cli(["lint", "fixed.json", "--format", "openai_chat"], work).stdout


def test_lint_refuses_bad_input_clearly(work: Path) -> None:
    assert "no such file" in cli(["lint", "nope.json", "--format", "anthropic"], work, code=3).stderr
    (work / "garbage.json").write_text("{not json", encoding="utf-8")
    assert "not JSON" in cli(["lint", "garbage.json", "--format", "anthropic"], work, code=8).stderr
    (work / "number.json").write_text("42", encoding="utf-8")
    assert "JSON list" in inproc(["lint", "number.json", "--format", "anthropic"], work, code=2)
    assert "--fix needs -o" in inproc(["lint", "fixed.json", "--format", "openai_chat", "--fix"], work, code=2)
    assert "'--format'" in inproc(["lint", "fixed.json", "--format", "cobol"], work, code=2)


# -- import --------------------------------------------------------------------------------------------------------


def test_import_a_history_and_a_trace(work: Path) -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                                                  "input": {"city": "Paris"}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18C"}]}]
    (work / "claude.json").write_text(json.dumps(history), encoding="utf-8")
    out = json.loads(cli(["import", "claude.json", "--format", "anthropic", "-o", "imported", "--json"],
                         work).stdout)
    (written,) = out["written"]
    t = anb.Transcript.load(work / written["path"])
    assert t.run_id == "claude" and t.frames.calls()["tool"].tolist() == ["get_weather"]
    assert out["findings"] == []
    trace = _otlp_trace(work)
    out = json.loads(cli(["import", trace.name, "-o", "from_trace", "--json"], work).stdout)
    (written,) = out["written"]
    assert written["state"] == "COMPLETED"
    assert anb.Transcript.load(work / written["path"]).frames.calls()["tool"].tolist() == ["get_weather"]


def _otlp_trace(work: Path) -> Path:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    anb.otel.export(run.start("Paris?").run(), provider, include_content=True)
    document = anb.otel.to_otlp_json(spans.get_finished_spans())
    path = work / "trace.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


def test_import_refuses_bad_input_clearly(work: Path) -> None:
    (work / "bad.json").write_text(json.dumps(BAD_CHAT), encoding="utf-8")
    assert "needs --format" in inproc(["import", "bad.json", "-o", "imp"], work, code=2)
    proc = cli(["import", "bad.json", "--format", "openai_chat", "-o", "imp"], work, code=1)
    assert "orphan_result" in proc.stdout and (work / "imp" / "bad.jsonl").is_file()
    assert "no such file" in inproc(["import", "gone.json", "--format", "gemini", "-o", "imp"], work, code=3)
    (work / "empty_trace.json").write_text('{"resourceSpans": "nope"}', encoding="utf-8")
    assert "Error:" in cli(["import", "empty_trace.json", "-o", "imp"], work, code=8).stderr


# -- PostgreSQL ----------------------------------------------------------------------------------------------------


def test_runs_and_approve_on_a_postgresql_store(work: Path, pg_dsn: str) -> None:
    store = anb.PostgresStore(pg_dsn, key=KEY)
    try:
        loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
        loop.start("Refund order 42", run_id="pg-refund-42").run()
    finally:
        store.close()
    rows = json.loads(cli(["runs", pg_dsn, "--state", "WAITING_APPROVAL", "--json"], work).stdout)
    (row,) = [r for r in rows if r["run_id"] == "pg-refund-42"]
    call = row["pending"][0]["call_id"]
    out = json.loads(cli(["approve", pg_dsn, "pg-refund-42", call, "--loop", "shop:loop", "--json"], work).stdout)
    assert out["state"] == "COMPLETED"
    assert "not waiting" in cli(["approve", pg_dsn, "pg-refund-42", call, "--loop", "shop:loop"], work,
                                code=4).stderr
    password = urlsplit(pg_dsn).password
    said = cli(["runs", pg_dsn, "--state", "CANCELLED"], work).stdout
    assert "no runs in postgresql://" in said and (not password or password not in said)


def test_text_is_shown_as_it_is_in_a_terminal_and_in_json(work: Path) -> None:
    model = anb.ScriptedModel([{"tool_calls": [{"name": "create_refund",
                                                "arguments": {"order_id": "42\u202e99", "amount_cents": 1}}]},
                               {"text": "ok"}])
    loop = anb.Loop(model=model, tools=anb.stories.tools("refund"), store=anb.SqliteStore(work / "rtl.db", key=KEY))
    loop.start("Refund \x1b[2Jorder 42", run_id="rtl\u202e-1").run()
    text = cli(["runs", "rtl.db"], work).stdout
    assert "\u202e" not in text and "rtl⟨U+202E⟩-1" in text and "42⟨U+202E⟩99" in text
    assert "contains invisible or direction-changing characters" in text
    raw = cli(["runs", "rtl.db", "--json"], work).stdout
    assert "\u202e" not in raw and "\\u202e" in raw
    (row,) = json.loads(raw)
    assert row["run_id"] == "rtl\u202e-1" and row["pending"][0]["arguments"]["order_id"] == "42\u202e99"
    said = cli(["approve", "rtl.db", "rtl\u202e-1", "nope", "--loop", "shop:loop"], work, code=3).stderr
    assert "\u202e" not in said and ("rtl⟨U+202E⟩-1" in said or "rtl\\u202e-1" in said)
