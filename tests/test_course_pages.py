"""The course on the docs site: each notebook a page with its saved outputs, and its run as a one-file debugger.

The pages are made by ``docs/course_pages.py`` (a hook of the build) from the notebooks as saved; the runs
they link are the transcripts ``docs/course_runs.py`` kept from the same execution, in ``notebooks/runs/``.
These tests read the saved notebooks and the site the session builds once (``docs_site``); nothing here
executes a notebook.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agentnb as anb
from agentnb.events import event_to_json

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
AGAIN = "python docs/course_runs.py notebooks/{}"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pages = _module("course_pages")
runs_tool = _module("course_runs")


def _nb(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _lines(transcript: anb.Transcript) -> list[str]:
    return [event_to_json(ev) for ev in transcript.events]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_keeps_the_run_its_static_view_shows(nb: Path) -> None:
    kept = pages.runs(nb)
    assert kept, f"{nb.name} keeps no run in notebooks/runs/: {AGAIN.format(nb.name)}"
    shown = runs_tool.static_views(_nb(nb))
    for (run_id, events), path in zip(shown, kept, strict=False):
        transcript = anb.Transcript.load(path)
        assert (transcript.run_id, len(transcript)) == (run_id, events), (
            f"{nb.name} shows run {run_id} ({events} events) but {path.name} holds {transcript.run_id} "
            f"({len(transcript)}): the notebook was executed again without its run; {AGAIN.format(nb.name)}")
    assert len(kept) == max(len(shown), 1), (nb.name, [p.name for p in kept])
    for path in kept:
        text = path.read_text(encoding="utf-8")
        assert str(ROOT) not in text and "/tmp/" not in text, f"{path.name} holds a local path"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_chapter_is_a_page_with_its_outputs_and_its_run_exported(docs_site: Path, nb: Path) -> None:
    page = (docs_site / "course" / f"{nb.stem}.html").read_text(encoding="utf-8")
    saved = _nb(nb)
    assert "<h1 id=" in page and pages.title(saved, "") in page.replace("&middot;", "·")
    assert "<!--agentnb-output-" not in page  # every output in its place
    assert f'href="../notebooks/{nb.name}"' in page
    shown = runs_tool.static_views(saved)
    assert page.count('class="agentnb-root agentnb-fallback agentnb-static-view"') == len(shown)
    for run_id, _ in shown:
        assert f"run <code>{run_id}</code>" in page
    # the widget outputs are left out (no state is saved: "model not found"), their note saying so with them
    assert 'class="agentnb-muted agentnb-live-note"' not in page and "the live debugger shows here" not in page
    assert '<script type="application/vnd.jupyter.widget-view+json">' not in page
    printed = [o for c in saved["cells"] for o in c.get("outputs", []) if o["output_type"] == "stream"]
    if printed:  # a printed line shows, escaped
        first = "".join(printed[0]["text"]).strip().splitlines()[0]
        assert re.sub(r"\s+", " ", first.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")) in \
            re.sub(r"\s+", " ", page.replace("&#x27;", "'").replace("&quot;", '"'))
    kept = pages.runs(nb)
    export = docs_site / "course" / "runs" / f"{kept[0].stem}.html"
    assert f'href="runs/{kept[0].stem}.html"' in page
    assert _lines(anb.Transcript.load(export)) == _lines(anb.Transcript.load(kept[0]))  # the run, losslessly
    copy = (docs_site / "course" / f"{nb.stem}.md").read_text(encoding="utf-8")
    assert "```python" in copy and "<!--agentnb-output-" not in copy


def test_a_plot_is_an_image_and_the_static_views_are_the_only_debugger(docs_site: Path) -> None:
    analysis = (docs_site / "course" / "06_transcript_analysis.html").read_text(encoding="utf-8")
    assert '<img class="agentnb-nb-image" alt="a plot" src="data:image/png;base64,' in analysis
    assert "<table" in analysis and "dataframe" in analysis  # a DataFrame's HTML
    total = sum(len(runs_tool.static_views(_nb(nb))) for nb in NOTEBOOKS)
    assert total >= 5, "the course shows the debugger in several chapters"


def test_outputs_are_escaped_and_widgets_without_state_left_out() -> None:
    hostile = "<script>alert(1)</script> \x1b[31mred\x1b[0m"
    html, text = pages.output({"output_type": "stream", "name": "stdout", "text": [hostile]})
    assert "<script>" not in html and "&lt;script&gt;" in html and "\x1b" not in html and "red" in text
    html, _ = pages.output({"output_type": "error", "ename": "ValueError", "evalue": "x",
                            "traceback": ["\x1b[31mValueError\x1b[0m: <b>x</b>"]})
    assert "&lt;b&gt;" in html and "\x1b" not in html
    widget = {"output_type": "display_data", "data": {pages.WIDGET: {"model_id": "m"}, "text/plain": ["VBox()"]}}
    assert pages.output(widget) is None
    plain = {"output_type": "execute_result", "data": {"text/plain": ["<agentnb.Run run_1 COMPLETED>"]}}
    assert pages.output(plain)[0] == '<pre class="agentnb-nb-result">&lt;agentnb.Run run_1 COMPLETED&gt;</pre>'
    with pytest.raises(ValueError):
        pages.output({"output_type": "display_data", "data": {"image/png": "not base64!"}})
    page = pages.with_outputs("nowhere.md", "<p>unchanged</p>")
    assert page == "<p>unchanged</p>"
