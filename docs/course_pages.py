"""The course on the docs site: each notebook a page with the outputs it was saved with, and its run exported.

Why this way. The notebooks are kept executed (nbval compares their outputs in the suite), so the site renders
what is saved and executes nothing: the build stays offline, deterministic and fast (no kernel). A notebook's
Markdown cells go to MkDocs as Markdown (the site's headings, table of contents, admonitions and link
checks), its code cells as Python blocks, and each output as a marker that :func:`with_outputs` replaces with
its HTML once the page is rendered (so no Markdown rule touches an output). A debugger's output is its static
view, the ``text/html`` fallback it saves beside the widget; widget outputs are left out (no widget state is
saved, as in JupyterLab: the site would show "model not found").

Each chapter links its run as the one-file HTML debugger (``Transcript.to_html``), built here with today's
front end from ``notebooks/runs/<notebook>.jsonl``, the transcript ``docs/course_runs.py`` kept from the
execution the outputs come from: the page's static view and the export are the same run.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RUNS = NOTEBOOKS / "runs"
FOLDER = "course"
"""Where the chapters' pages go in the site (``course/01_first_loop.html``, exports in ``course/runs/``)."""
WIDGET = "application/vnd.jupyter.widget-view+json"
MARKER = "<!--agentnb-output-{}-->"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NBVAL = re.compile(r"^# NBVAL_\w+[ \t]*\n?", re.MULTILINE)
STATIC_VIEW = "agentnb-static-view"
_outputs: dict[str, list[tuple[str, str]]] = {}
"""Per page: each output's HTML and its text for the page's Markdown copy."""


def notebooks() -> list[Path]:
    """The course's notebooks, in their order."""
    return sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def page_uri(nb: Path) -> str:
    """The chapter's page in the site's sources (``course/01_first_loop.md``)."""
    return f"{FOLDER}/{nb.stem}.md"


def runs(nb: Path) -> list[Path]:
    """The transcripts kept for a notebook: its first run, then any other its debuggers show."""
    first = RUNS / f"{nb.stem}.jsonl"
    others = sorted(RUNS.glob(f"{nb.stem}-*.jsonl"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    return [first, *others] if first.is_file() else []


def export_uri(run: Path) -> str:
    """The one-file debugger of a kept run, in the site (``course/runs/01_first_loop.html``)."""
    return f"{FOLDER}/runs/{run.stem}.html"


def title(nb: dict[str, Any], fallback: str) -> str:
    """A notebook's title: the first heading of its first Markdown cell."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+?)\s*$", _source(cell), re.MULTILINE)
            if m:
                return m.group(1)
    return fallback


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _read(nb: Path) -> dict[str, Any]:
    return json.loads(nb.read_text(encoding="utf-8"))


def nav(items: list[Any]) -> list[Any]:
    """The nav with the course's entry (``course.md``) made a section: the overview, then each chapter."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and list(item.values()) == ["course.md"]:
            (label,) = item
            chapters = [{title(_read(nb), nb.stem): page_uri(nb)} for nb in notebooks()]
            out.append({label: [{"Overview": "course.md"}, *chapters]})
        else:
            out.append(item)
    return out


def files() -> list[tuple[str, str]]:
    """Every chapter's page (Markdown) and export (HTML), as (path in the site's sources, content)."""
    from agentnb._debugger.export import render_html
    from agentnb._debugger.timeline import Timeline
    from agentnb._transcript import Transcript

    made = []
    for nb in notebooks():
        made.append((page_uri(nb), markdown(nb)))
        for run in runs(nb):
            transcript = Transcript.load(run)
            made.append((export_uri(run), render_html(Timeline(transcript.events),
                                                      title=f"agentnb · {nb.stem} · {transcript.run_id}")))
    return made


def markdown(nb_path: Path) -> str:
    """A chapter's page: its cells in order, a marker for each output, the links to the notebook and its run."""
    nb = _read(nb_path)
    uri = page_uri(nb_path)
    kept = runs(nb_path)
    links = f"[Download the notebook](../notebooks/{nb_path.name})"
    if kept:
        links += (f" · [its run in the debugger](runs/{kept[0].stem}.html) (one HTML file: open it in any browser, "
                  "or `anb.Transcript.load(...)` it back)")
    note = (f"!!! info \"This chapter as a page\"\n    {links}. The outputs are the ones the notebook was saved with; "
            "a debugger shows its static view here, and its run opens in the debugger from the link.\n\n")
    parts: list[str] = []
    outputs: list[tuple[str, str]] = []
    placed = False
    for cell in nb["cells"]:
        src = _source(cell)
        if cell["cell_type"] == "markdown":
            parts.append(src.strip() + "\n\n")
            if not placed:  # right under the title cell
                parts.append(note)
                placed = True
        elif cell["cell_type"] == "code":
            code = _NBVAL.sub("", src).strip("\n")
            if code:
                parts.append(f"````python\n{code}\n````\n\n")
            for out in cell.get("outputs", []):
                shown = output(out)
                if shown is None:
                    continue
                parts.append(MARKER.format(len(outputs)) + "\n\n")
                outputs.append(shown)
                if STATIC_VIEW in shown[0] and kept:
                    parts.append(f"[Open this run in the debugger](runs/{kept[0].stem}.html)\n\n")
    if not placed:
        parts.insert(0, f"# {nb_path.stem}\n\n{note}")
    _outputs[uri] = outputs
    return "".join(parts)


def output(out: dict[str, Any]) -> tuple[str, str] | None:
    """An output's HTML and its text, or None for one the site leaves out (a widget without saved state)."""
    kind = out.get("output_type")
    if kind == "stream":
        text = _ANSI.sub("", _source({"source": out.get("text", "")}))
        cls = "agentnb-nb-stderr" if out.get("name") == "stderr" else "agentnb-nb-stream"
        return f'<pre class="{cls}">{html.escape(text)}</pre>', text
    if kind == "error":
        text = _ANSI.sub("", "\n".join(out.get("traceback", [])) or f"{out.get('ename')}: {out.get('evalue')}")
        return f'<pre class="agentnb-nb-stderr">{html.escape(text)}</pre>', text
    data = out.get("data", {})
    if WIDGET in data:
        return None
    plain = _source({"source": data.get("text/plain", "")})
    if "image/png" in data:
        png = "".join(data["image/png"]).replace("\n", "")
        base64.b64decode(png, validate=True)  # a damaged image fails the build, not the reader
        return f'<img class="agentnb-nb-image" alt="a plot" src="data:image/png;base64,{png}">', "(a plot)"
    if "text/html" in data:
        markup = _source({"source": data["text/html"]})
        if STATIC_VIEW in markup:
            m = re.search(r'data-events="(\d+)".*? run <code>([^<]*)</code>', markup)
            text = f"(the debugger's static view: run {m.group(2)}, {m.group(1)} events)" if m else plain
        else:
            text = plain
        return f'<div class="agentnb-nb-html">{markup}</div>', text
    if plain:
        return f'<pre class="agentnb-nb-result">{html.escape(plain)}</pre>', plain
    return None


def with_outputs(uri: str, page_html: str) -> str:
    """A rendered page with its outputs in place of their markers (other pages come back unchanged)."""
    outputs = _outputs.get(uri)
    if not outputs:
        return page_html
    for i, (markup, _) in enumerate(outputs):
        marker = MARKER.format(i)
        if marker not in page_html:
            raise ValueError(f"{uri}: output {i} lost its place in the rendered page")
        page_html = page_html.replace(marker, f'<div class="agentnb-nb-output">{markup}</div>', 1)
    return page_html


def as_text(uri: str, markdown_text: str) -> str:
    """A page's Markdown copy: a course page's markers become the outputs' text."""
    for i, (_, text) in enumerate(_outputs.get(uri, [])):
        markdown_text = markdown_text.replace(MARKER.format(i), f"```text\n{text.rstrip()}\n```")
    return markdown_text
