"""One self-contained HTML file of a run: the debugger, read-only, for bug reports and workshop handouts.

The page holds three things and fetches nothing: the front end's stylesheet, the front end's ES module
(``widgets/debugger.js``, the same file the notebook widget runs, inlined verbatim and started with its
``standalone()`` entry point), and the run's data from :func:`.bundle.export_bundle` -- every event's row,
meters and conversation pointer, and the cards up to :data:`.bundle.CARD_BUDGET` -- as gzip-compressed JSON in
base64, which the browser inflates with its built-in ``DecompressionStream``. The cards and wire bodies, most
of the bytes, are a second block read after the timeline is drawn, so a long run opens at the speed of its
rows. Events carry what the run's events carry, which the driver already redacted at the source
(:mod:`agentnb._redact`); the export adds nothing that is not in the transcript.

One more, inert block holds the events themselves as JSON Lines (:func:`agentnb._embedded.embedded_element`),
so ``Transcript.load("run.html")`` reads the run back, losslessly.
"""

from __future__ import annotations

import html
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic_core import to_json

from .._embedded import embedded_element, embedded_pages, packed
from .._gc import gc_paused
from ..events import BaseEvent
from . import assets
from .bundle import export_bundle
from .timeline import Timeline


def _script_safe(text: str) -> str:
    # inside <script>, only "</script" (any case) and "<!--" can end or confuse the element
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _block(element_id: str, text: str) -> str:
    return f'<script type="application/octet-stream" id="{element_id}" data-encoding="gzip+base64">{text}</script>\n'


def _json(value: object) -> bytes:
    return to_json(value)  # compact UTF-8, byte for byte what json.dumps writes of these lists, in a third of the time


def render_html(timeline: Timeline, *, title: str | None = None) -> str:
    """The page as a string (see :func:`write_html`).

    The blocks (the bundle, its later half, each page of the embedded transcript) are compressed in two worker
    threads while this one builds what comes next (zlib lets go of the interpreter while it deflates), and the
    collector is paused: what is built stays alive until the page is written (see :func:`agentnb._gc.gc_paused`).
    """
    run_id = timeline.state.run_id or "run"
    title_text = title or f"agentnb · {run_id}"
    module = assets.text("debugger.js")
    with gc_paused(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="agentnb-export") as pool:
        pages = [pool.submit(packed, page) for page in embedded_pages(timeline.events)]
        bundle = export_bundle(timeline, title=title or "agentnb")
        # the cards and wire bodies (most of the bytes) in a second block, read after the timeline is drawn
        later = pool.submit(packed, _json({"detail": bundle.pop("detail"), "wire": bundle.pop("wire")}))
        first = pool.submit(packed, _json(bundle))
        blocks = f"{_block('agentnb-data', first.result())}{_block('agentnb-data-later', later.result())}"
        embedded = embedded_element([page.result() for page in pages])
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<meta name=\"generator\" content=\"agentnb\"><title>{html.escape(title_text)}</title>"
        f"<style>{assets.text('debugger.css')}</style></head>\n"
        "<body class=\"agentnb-standalone\"><div id=\"agentnb-app\"></div>\n"
        "<noscript>This page is an agentnb debugger: it needs JavaScript.</noscript>\n"
        f"{blocks}{embedded}"
        f"<script type=\"module\">\n{_script_safe(module)}\n"
        "standalone(document.getElementById(\"agentnb-app\"));\n</script>\n</body></html>\n"
    )


def write_html(source: Timeline | list[BaseEvent], path: str | Path, *, title: str | None = None) -> Path:
    """Write a run's events as one self-contained HTML file and return its path.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> events = run.start("Paris?").run().events
        >>> out = write_html(events, os.path.join(tempfile.mkdtemp(), "weather.html"))
        >>> "http" in out.read_text(encoding="utf-8").split("<script")[0]
        False
    """
    with gc_paused():  # the timeline's index stays alive while the page is built (see render_html)
        timeline = source if isinstance(source, Timeline) else Timeline(source)
        page = render_html(timeline, title=title)
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out
