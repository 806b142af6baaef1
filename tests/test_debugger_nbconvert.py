"""A saved, executed notebook read without a kernel: nbconvert's HTML shows the debugger's static view.

The debugger displays as two outputs: its static view, then the widget. Two ways a notebook is saved: with
the widget state (``nbconvert --execute`` stores it) and without it (JupyterLab's default). Without state,
nbconvert shows the static view and, for the widget, its ``text/html`` line saying where the live debugger
would be; with it, the widget view too, whose saved state carries the same static view (its ``snapshot``)
for the front end to show when no kernel answers. Either way the reader gets the run, not a repr, and the
saved state stays small.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]

SOURCE = """\
import agentnb as anb

@anb.tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key.upper()

model = anb.ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": f"k{i}"}}]} for i in range(60)]
                          + [{"text": "It is sunny."}], stream=True)
run = anb.Loop(model=model, tools=[lookup], max_turns=80).start("Look them up").run()
anb.Debugger(run)"""


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[nbformat.NotebookNode, str]]:
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    out = {}
    for store in (False, True):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(SOURCE)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=store).execute()
        path = tmp_path_factory.mktemp("nb") / "saved.ipynb"
        nbformat.write(nb, path)  # saved, then read back as a reader would
        saved = nbformat.read(path, as_version=4)
        html, _ = HTMLExporter().from_notebook_node(saved, resources={"metadata": {"name": "saved", "path": ""}})
        out[store] = (saved, html)
    return out


def test_without_widget_state_the_html_is_the_static_fallback(executed: dict[bool, tuple]) -> None:
    nb, html = executed[False]
    static, widget = nb.cells[0].outputs  # the static view, then the widget (see Debugger._ipython_display_)
    assert static.data["text/plain"].startswith("<agentnb.Run run_") and "COMPLETED" in static.data["text/plain"]
    view = "application/vnd.jupyter.widget-view+json"
    assert "agentnb-static-view" in static.data["text/html"] and view not in static.data
    assert view in widget.data
    assert "agentnb-live-note" in widget.data["text/html"] and "agentnb-fallback" not in widget.data["text/html"]
    assert html.count('class="agentnb-root agentnb-fallback agentnb-static-view"') == 1  # once, not per output
    assert "the live debugger shows here once this cell runs in a kernel" in html
    assert "VBox(children" not in html and '<script type="application/vnd.jupyter.widget-view+json">' not in html
    assert "COMPLETED" in html and "the model answered" in html and "It is sunny." in html
    for kind in ("RunStarted", "ArgumentsMerged", "ToolFinished", "ResultsBound", "RunFinished"):
        assert f"<td>{kind}</td>" in html, kind
    assert "lookup · ok" in html  # summaries, not just types


def test_with_widget_state_the_state_is_small_and_carries_the_static_view(executed: dict[bool, tuple]) -> None:
    nb, html = executed[True]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    (debugger,) = [m["state"] for m in state.values() if m["model_name"] == "AnyModel"]
    snapshot = debugger["snapshot"]
    assert 'class="agentnb-root agentnb-fallback"' in snapshot and "COMPLETED" in snapshot
    assert "<td>RunFinished</td>" in snapshot and "more events" in snapshot  # capped: first and last rows
    data = {k: v for k, v in debugger.items() if k not in ("_esm", "_css")}
    size = len(json.dumps(data))
    events = json.loads(json.dumps(debugger["header"]))
    assert events["state"] == "COMPLETED"
    # the rows (one per event) are not in the state: the snapshot's 200 events and its tree's first and last 50
    # nodes are, whatever the run's length
    assert size < 85_000, size
    assert 'class="agentnb-fallback-tree"' in snapshot and "more nodes" in snapshot
    summaries_in_state = json.dumps(data).count("ArgumentsMerged")
    assert summaries_in_state <= 201  # at most the snapshot's rows
    assert "VBox(children" not in html
    assert "COMPLETED" in html  # the saved state is in the page for the widget to draw
