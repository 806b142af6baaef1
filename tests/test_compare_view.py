"""anb.compare(a, b) on the page: the side-by-side view, its saved form and its one-file export."""

from __future__ import annotations

import re
from pathlib import Path

import agentnb as anb
from agentnb.events import RunFinished, ToolFinished


def _runs() -> tuple[anb.Run, anb.Run]:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    run = loop.start("Paris?").run()
    call = next(e.call_id for e in run.events if isinstance(e, ToolFinished))
    snow = run.fork(results={call: {"city": "Paris", "temp_c": -5, "sky": "<b>snow</b>\u202e"}}).run()
    return run, snow


def test_the_view_lights_the_first_divergence_and_diffs_the_conversations() -> None:
    run, snow = _runs()
    c = anb.compare(run, snow)
    assert c.parting is not None
    html = c._repr_html_()
    assert html.startswith("<style>") and "agentnb-compare" in html  # the debugger's stylesheet and classes
    parted = re.findall(r'<tr class="anb-cmp-row (anb-cmp-\w+)" data-step="(\d+)"', html)
    assert [int(i) for cls, i in parted if cls == "anb-cmp-parted"] == [c.parting.step]
    assert all(cls == "anb-cmp-same" for cls, i in parted if int(i) < c.parting.step)
    assert "another tool result" in html and "first divergence" in html
    # the conversations' diff: a's answer removed, b's added
    assert '<div class="agentnb-del">-assistant: It is 18 °C and sunny in Paris.</div>' in html
    assert re.search(r'<div class="agentnb-add">\+tool: result \S+ \[ok\] .*snow', html)
    # hostile text from a tool is escaped and written out
    assert "<b>snow</b>" not in html and "&lt;b&gt;snow&lt;/b&gt;" in html and "⟨U+202E⟩" in html
    # both runs whole: each one's events and its end
    for r in (run, snow):
        assert f"<code>{r.run_id}</code>" in html
    assert html.count("<td>RunFinished</td>") == 2


def test_the_same_run_says_so_and_nothing_is_lit() -> None:
    run, _ = _runs()
    html = anb.compare(run, run)._repr_html_()
    assert "the same trajectory" in html and 'class="anb-cmp-row anb-cmp-parted"' not in html
    assert "(no difference)" in html


def test_the_export_is_one_file_with_both_runs_and_no_script_or_network(tmp_path: Path) -> None:
    run, snow = _runs()
    out = anb.compare(run, snow).to_html(tmp_path / "cmp.html")
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page.split("</style>")[-1]
    assert run.run_id in page and snow.run_id in page and 'class="anb-cmp-row anb-cmp-parted"' in page
    assert page.count('<table class="agentnb-fallback-events">') == 2  # each run's events, in full
    for r in (run, snow):
        end = next(e for e in r.events if isinstance(e, RunFinished))
        assert f"<tr><td>{end.seq}</td><td>RunFinished</td>" in page
