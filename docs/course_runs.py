"""Execute the course's notebooks again and keep the runs they show: ``python docs/course_runs.py [NOTEBOOK...]``.

The docs site renders each notebook of ``notebooks/`` with the outputs it was saved with (``docs/hooks.py``),
and links, for each chapter, its run as the one-file HTML debugger. That run is kept beside the notebook, as a
transcript, ``notebooks/runs/<notebook>.jsonl``, written by this script from the same execution as the
outputs, so the page's static view and the export are one run: the debugger a notebook displays (the run
its static view names), or, where it displays none, the ``run`` it ends with (else the run it started
last of the runs it still holds, or of its transcripts).

What it does, per notebook (all of them without arguments): execute it with nbclient, offline (no provider
key in the kernel's environment, the scripted models), without storing widget state (as JupyterLab saves);
read the displayed debuggers' events out of the kernel; refuse an output or a run that holds a path of this
machine (the checkout, the home folder, the temporary folder); write the notebook back with its new outputs,
and the transcript. Run it after changing a notebook (it is the re-execution the house rules ask for);
``tests/test_course_pages.py`` fails, naming this command, when a notebook's static view and its kept run
disagree.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RUNS = NOTEBOOKS / "runs"
STATIC_RUN = re.compile(r'class="agentnb-root agentnb-fallback agentnb-static-view" data-events="(\d+)">'
                        r'<div class="agentnb-header"><b>[^<]*</b> · run <code>([^<]*)</code>')
"""The run id and the event count in a debugger's static view (``agentnb._debugger.viewdata.fallback_html``)."""

_COLLECT = """
import gc as _gc, json as _json, pathlib as _pathlib
import agentnb as _anb
_out = _pathlib.Path({out!r})
_kept = {{}}


def _held(*kinds):  # what the kernel still holds of these classes
    found = []
    for _o in _gc.get_objects():
        try:
            if isinstance(_o, kinds):
                found.append(_o)
        except ReferenceError:  # a weak proxy whose object is gone
            pass
    return found


for _d in _held(_anb.Debugger):
    _events = list(_d.timeline.events)
    if _events and len(_events) >= len(_kept.get(_events[0].run_id, [])):
        _kept[_events[0].run_id] = _events
_last = globals().get("run")
if not isinstance(_last, _anb.Run) or not _last.events:  # the run started last, of the runs it still holds
    _runs = [_o for _o in _held(_anb.Run) if len(_o.events) > 2] or [
        _o for _o in _held(_anb.Transcript) if len(_o.events) > 2]
    _last = max(_runs, key=lambda _o: _o.events[0].ts, default=None)
if _last is not None:
    _kept.setdefault("(run)", list(_last.events))
for _i, (_rid, _events) in enumerate(_kept.items()):
    _anb.Transcript(_events).save(_out / f"{{_i}}.jsonl")
_index = {{_rid: [f"{{_i}}.jsonl", len(_ev)] for _i, (_rid, _ev) in enumerate(_kept.items())}}
(_out / "index.json").write_text(_json.dumps(_index))
"""
"""The cell run after the notebook, in its kernel: the displayed debuggers' runs, and the run it ends with."""


def static_views(nb: dict) -> list[tuple[str, int]]:
    """The (run id, events) of each debugger static view among a notebook's outputs, in order."""
    found = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            html = "".join(out.get("data", {}).get("text/html", ""))
            found.extend((m.group(2), int(m.group(1))) for m in STATIC_RUN.finditer(html))
    return found


def coalesce_streams(nb: dict) -> None:
    """Join each cell's consecutive outputs to one stream into one, as JupyterLab saves them (nbclient does not)."""
    for cell in nb["cells"]:
        joined: list = []
        for out in cell.get("outputs", []):
            last = joined[-1] if joined else None
            if (last is not None and out["output_type"] == "stream" and last["output_type"] == "stream"
                    and last["name"] == out["name"]):
                text = "".join(last["text"]) + "".join(out["text"])
                last["text"] = text.splitlines(keepends=True) if isinstance(last["text"], list) else text
            else:
                joined.append(out)
        if "outputs" in cell:
            cell["outputs"] = joined


def local_paths() -> list[str]:
    """Paths of this machine an output or a run must not carry."""
    paths = {str(ROOT), str(Path.home()), tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}
    return sorted(p for p in paths if len(p) > 4)


def execute(path: Path) -> None:
    """Execute one notebook, write it back with its outputs, and keep its run in ``notebooks/runs/``."""
    import html

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        nb.cells.append(nbformat.v4.new_code_cell(_COLLECT.format(out=tmp)))
        env_keys = ("AGENTNB_PROVIDER", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
        saved = {k: os.environ.pop(k) for k in env_keys if k in os.environ}
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        start = time.perf_counter()
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=False, record_timing=False,
                           resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
        finally:
            os.environ.update(saved)
        nb.cells.pop()
        coalesce_streams(nb)
        index = json.loads((Path(tmp) / "index.json").read_text(encoding="utf-8"))
        shown = static_views(nb)
        kept: list[Path] = []
        wanted = [(rid, n) for rid, n in shown] or ([("(run)", index["(run)"][1])] if "(run)" in index else [])
        for rid, n in wanted:
            if rid not in index or index[rid][1] != n:
                raise SystemExit(f"{path.name}: its debugger shows run {rid} with {n} events, but the kernel holds "
                                 f"{index.get(rid, [None, 'no such run'])[1]}")
            kept.append(Path(tmp) / index[rid][0])
        text = nbformat.writes(nb)
        for p in local_paths():
            for where, content in [(path.name, text), *((k.name, k.read_text(encoding="utf-8")) for k in kept)]:
                if p in content or html.escape(p) in content:
                    raise SystemExit(f"{where} ({path.name}): an output or a run holds the local path {p}")
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        RUNS.mkdir(exist_ok=True)
        for old in RUNS.glob(f"{path.stem}*.jsonl"):
            old.unlink()
        for i, k in enumerate(kept):
            (RUNS / f"{path.stem}{'' if i == 0 else f'-{i + 1}'}.jsonl").write_bytes(k.read_bytes())
    print(f"{path.name}: {time.perf_counter() - start:.1f} s, {len(kept)} run(s) kept", flush=True)


def main(args: list[str]) -> None:
    """Execute the notebooks named (all of ``notebooks/`` without arguments)."""
    paths = [Path(a).resolve() for a in args] or sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    for p in paths:
        execute(p)


if __name__ == "__main__":
    main(sys.argv[1:])
