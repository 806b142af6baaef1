"""``agentnb emulator`` and ``agentnb view``: foreground servers started by subprocess, as a user starts them.

Each test reads the lines the server prints (its URLs), talks to it (the official ``openai`` SDK for the
emulator, plain HTTP for the viewer), then stops it with a signal and checks that it exits 0, having printed
no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import agentnb as anb

ROOT = Path(__file__).resolve().parent.parent
KEY = "a-test-checkpoint-key"
T = 60.0


@contextmanager
def server(args: list[str], cwd: Path, until: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """Start ``python -m agentnb ARGS``; yield it and its stdout lines once one contains ``until``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
           "HOME": str(cwd), "AGENTNB_CHECKPOINT_KEY": KEY}
    proc = subprocess.Popen([sys.executable, "-m", "agentnb", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if until in line:
                break
        assert any(until in x for x in lines), (lines, proc.poll(), proc.stderr.read() if proc.poll() else "")
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def stop(proc: subprocess.Popen[str], sig: int) -> str:
    """Send ``sig``; check the server exits 0 without a traceback; return its stderr."""
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=T)
    assert proc.returncode == 0, (proc.returncode, err)
    assert "Traceback" not in err, err
    return err


# -- emulator ------------------------------------------------------------------------------------------------------


def test_the_emulator_serves_the_sdks_and_stops_on_sigterm(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    (tmp_path / "turns.json").write_text(json.dumps([{"text": "Hello from a script."}, {"text": "Again."}]))
    with server(["emulator", "--script", "turns.json"], tmp_path, "OLLAMA_HOST") as (proc, lines):
        env = dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export "))
        assert set(env) == {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "OLLAMA_HOST"}
        assert all(url.startswith("http://127.0.0.1:") for url in env.values())
        client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key="test", max_retries=0)
        answer = client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}])
        assert answer.choices[0].message.content == "Hello from a script."
        err = stop(proc, signal.SIGTERM)
    assert "stopped after 1 request(s)" in err
    port = int(env["OPENAI_BASE_URL"].split(":")[2].split("/")[0])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_the_emulator_json_and_sigint_and_a_port_in_use(tmp_path: Path) -> None:
    with server(["emulator", "--story", "weather", "--json"], tmp_path, "}") as (proc, lines):
        # --json prints one object (indented over several lines); read the rest of it
        assert proc.stdout is not None
        while not lines[-1].startswith("}"):
            lines.append(proc.stdout.readline().rstrip("\n"))
        info = json.loads("\n".join(lines))
        assert info["env"]["ANTHROPIC_BASE_URL"] == info["urls"]["anthropic"]
        taken = subprocess.run([sys.executable, "-m", "agentnb", "emulator", "--port", str(info["port"])],
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                               timeout=T)
        assert taken.returncode == 1 and "cannot listen" in taken.stderr and "Traceback" not in taken.stderr
        stop(proc, signal.SIGINT)


# -- view ----------------------------------------------------------------------------------------------------------


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=T) as resp:
            return resp.status, resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def weather_run(run_id: str) -> anb.Transcript:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    return loop.start("Paris?", run_id=run_id).run().transcript


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    store = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
    loop.start("Refund order 42", run_id="refund-42").run()
    (tmp_path / "transcripts").mkdir()
    weather_run("weather-1").save(tmp_path / "transcripts" / "weather-1.jsonl")
    anb.TranscriptCollection([weather_run("parquet-1")]).save_parquet(tmp_path / "dataset")
    return tmp_path


def otlp_trace(path: Path) -> Path:
    """A run exported through OpenTelemetry's SDK as OTLP/JSON (what a Collector's file exporter writes)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    anb.otel.export(weather_run("traced-1"), provider, include_content=True)
    document = anb.otel.to_otlp_json(spans.get_finished_spans())
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


def test_view_serves_the_list_and_runs_behind_a_token(sources: Path) -> None:
    otlp_trace(sources / "trace.json")
    args = ["view", "runs.db", "transcripts", "dataset", "trace.json", "--no-browser"]
    with server(args, sources, "token=") as (proc, lines):
        url = next(x for x in lines if "token=" in x)
        base, token = url.split("/?token=")
        assert base.startswith("http://127.0.0.1:")
        for bad in (f"{base}/", f"{base}/?token=", f"{base}/?token=not-it", f"{base}/run/1", f"{base}/api/runs"):
            status, body = get(bad)
            assert status == 403 and "token" in body, bad
        status, page = get(url)
        assert status == 200 and "refund-42" in page and "weather-1" in page and "WAITING_APPROVAL" in page
        status, listed = get(f"{base}/api/runs?token={token}")
        rows = {r["run_id"]: r for r in json.loads(listed)}
        assert rows["refund-42"]["state"] == "WAITING_APPROVAL" and rows["weather-1"]["state"] == "COMPLETED"
        assert rows["weather-1"]["tokens"] > 0 and rows["parquet-1"]["state"] == "COMPLETED"
        (traced,) = [r for r in rows.values() if r["source"] == "trace.json"]
        assert traced["state"] == "COMPLETED" and traced["events"] > 1
        status, run_page = get(f"{base}/run/{rows['weather-1']['id']}?token={token}")
        assert status == 200 and 'id="agentnb-app"' in run_page and 'id="agentnb-transcript"' in run_page
        status, sorted_page = get(f"{base}/?token={token}&sort=run_id&order=asc")
        assert sorted_page.index("parquet-1") < sorted_page.index("refund-42") < sorted_page.index("weather-1")
        status, sorted_page = get(f"{base}/?token={token}&sort=run_id&order=desc")
        assert sorted_page.index("weather-1") < sorted_page.index("refund-42") < sorted_page.index("parquet-1")
        assert get(f"{base}/run/99?token={token}")[0] == 404
        stop(proc, signal.SIGTERM)


def test_view_follow_shows_new_runs_and_a_broken_one_with_its_error(sources: Path) -> None:
    args = ["view", "runs.db", "transcripts", "--no-browser", "--follow", "--interval", "0.3"]
    with server(args, sources, "token=") as (proc, lines):
        url = next(x for x in lines if "token=" in x)
        base, token = url.split("/?token=")
        weather_run("weather-2").save(sources / "transcripts" / "weather-2.jsonl")
        (sources / "transcripts" / "broken.jsonl").write_text('{"not": "an event"}\n', encoding="utf-8")
        store = anb.SqliteStore(sources / "runs.db", key=KEY)
        loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"), store=store)
        loop.start("Paris?", run_id="weather-db").run()
        deadline, rows = time.monotonic() + T, {}
        while time.monotonic() < deadline:
            rows = {r["run_id"]: r for r in json.loads(get(f"{base}/api/runs?token={token}")[1])}
            if {"weather-2", "weather-db", "broken"} <= set(rows):
                break
            time.sleep(0.3)
        assert rows["weather-2"]["state"] == "COMPLETED" and rows["weather-db"]["state"] == "COMPLETED"
        assert rows["broken"]["error"] and rows["broken"]["state"] is None
        assert 'http-equiv="refresh"' in get(url)[1]
        stop(proc, signal.SIGINT)


def test_view_refuses_a_missing_path_and_warns_off_loopback(sources: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(sources), "AGENTNB_CHECKPOINT_KEY": KEY}
    missing = subprocess.run([sys.executable, "-m", "agentnb", "view", "nothing-here", "--no-browser"], cwd=sources,
                             env=env, capture_output=True, text=True, timeout=T)
    assert missing.returncode == 3 and "nothing-here" in missing.stderr and "Traceback" not in missing.stderr
    with server(["view", "transcripts", "--no-browser", "--host", "0.0.0.0"], sources, "token=") as (proc, _):
        err = stop(proc, signal.SIGTERM)
    assert "warning: serving on 0.0.0.0, not loopback" in err


def test_a_browser_that_leaves_before_its_answer_leaves_no_traceback(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from agentnb._cli.view import Catalog, ViewServer

    server = ViewServer(("127.0.0.1", 0), Catalog((str(tmp_path),), key_file=None), "t", None)
    try:
        for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "Connection reset by peer")):
            try:
                raise gone
            except OSError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""  # a reload or a refreshing page, not an error
        try:
            raise ValueError("a real fault")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a real fault" in capsys.readouterr().err  # the rest is still reported
    finally:
        server.server_close()
