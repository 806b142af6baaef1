"""``agentnb view``: runs in transcripts, directories and stores, served read-only to a browser.

Theory of operation. A :class:`Catalog` reads its sources once (``--follow``: again every ``--interval``
seconds, in a thread) into entries, each a run's events and its list row (:func:`._common.summary`). A
store stays open read-only; a run already read is read again only while it can still change (its state is
not terminal), a transcript file only when its size or time changed. A run that cannot be read (a tampered
store row, a broken transcript) is listed with its error instead of its numbers.

The server is the standard library's ``ThreadingHTTPServer`` on 127.0.0.1 and a free port (``--port``,
``--host``: any other address than loopback is served with a warning). Every request must carry the random
token the printed URL holds (``?token=...``, or an ``Authorization: token ...`` header), compared in constant
time; anything else gets 403. Pages: ``/`` the run list (sorted on the server: ``?sort=cost&order=desc``, so a
``--follow`` refresh keeps the order), ``/run/<n>`` a run as the one-file export renders it (the debugger's
front end, read-only, inlined: the page fetches nothing; with ``--follow`` it asks ``/api/runs`` at the same
pace and reloads once its run has more events), ``/api/runs`` the list as JSON. Only GET is served;
answers say ``no-store`` and ``no-referrer``, so the token stays out of caches and other sites' logs.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import sys
import threading
import webbrowser
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import click

from .._collection import MANIFEST, load_transcripts
from .._debugger.export import render_html
from .._debugger.render import esc
from .._debugger.timeline import Timeline
from .._states import LoopState
from .._transcript import Transcript
from ..events import BaseEvent
from ..otel._importer import import_trace
from ..store import Store
from ._common import (
    EXIT_CODES_HELP,
    Exit,
    Summary,
    close,
    is_dsn,
    is_parquet,
    is_sqlite,
    open_store,
    refusal,
    reports,
    say,
    shown,
    stderr,
    summary,
    transcript_files,
)
from .files import is_trace
from .runs import key_file_option
from .serve import StopSignals

COLUMNS = (("run_id", "run"), ("state", "state"), ("model", "model"), ("tokens", "tokens"), ("cost_usd", "cost"),
           ("started", "started"), ("events", "events"), ("source", "source"))
"""The run list's columns: (sort key, header)."""


@dataclass
class Entry:
    """One run of the catalog."""

    slug: str
    source: str
    run_id: str
    events: list[BaseEvent]
    row: Summary | None
    error: str | None = None
    stamp: object = None
    """What was read (a file's size and time; a run's event count), to tell when to read again."""

    def as_dict(self) -> dict[str, Any]:
        """The list row as JSON-ready data."""
        base = {"id": self.slug, "source": self.source, "run_id": self.run_id, "error": self.error}
        if self.row is None:
            return base | {"state": None, "tokens": None, "cost_usd": None, "events": 0}
        row = self.row.as_dict()
        row.pop("pending")
        return row | base | {"tokens": self.row.input_tokens + self.row.output_tokens}


class Catalog:
    """The runs of the sources given to ``agentnb view``, read again on :meth:`refresh`."""

    def __init__(self, specs: tuple[str, ...], *, key_file: str | None) -> None:
        self.specs = specs
        self._stores: dict[str, Store] = {}
        for spec in specs:
            if is_dsn(spec) or (Path(spec).is_file() and is_sqlite(Path(spec))):
                self._stores[spec] = open_store(spec, key_file=key_file, readonly=not is_dsn(spec))
            elif not Path(spec).exists():
                self.close()
                raise refusal(f"{spec}: no such file, directory or store", Exit.NOT_FOUND)
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Entry] = {}
        self.refresh()

    def close(self) -> None:
        """Close the stores."""
        for store in self._stores.values():
            close(store)

    def entries(self) -> list[Entry]:
        """Every run, in the order found."""
        with self._lock:
            return list(self._entries.values())

    def get(self, slug: str) -> Entry | None:
        """The run of a slug (its number in the list)."""
        with self._lock:
            return next((e for e in self._entries.values() if e.slug == slug), None)

    def refresh(self) -> None:
        """Read what is new or may have changed."""
        for spec in self.specs:
            if spec in self._stores:
                self._refresh_store(shown(spec), self._stores[spec])
            elif is_parquet(Path(spec)):
                self._refresh_parquet(Path(spec))
            else:
                path = Path(spec)
                for f in (transcript_files(path) if path.is_dir() else [path]):
                    self._refresh_file(f)

    def _put(self, source: str, run_id: str, events: list[BaseEvent], error: str | None, stamp: object) -> None:
        with self._lock:
            key = (source, run_id)
            old = self._entries.get(key)
            slug = old.slug if old else str(len(self._entries) + 1)
            row = summary(events, run_id) if events and error is None else None
            self._entries[key] = Entry(slug, source, row.run_id if row else run_id, events, row, error, stamp)

    def _refresh_store(self, spec: str, store: Store) -> None:
        for run_id, state in store.runs():
            old = self._entries.get((spec, run_id))
            if old is not None and old.error is None and old.stamp == state and LoopState(state).is_terminal:
                continue
            try:
                events = store.load(run_id)
            except Exception as exc:  # listed with its error, never hides the others
                self._put(spec, run_id, [], str(exc), state)
                continue
            if old is None or old.error is not None or len(old.events) != len(events):
                self._put(spec, run_id, events, None, state)

    def _refresh_parquet(self, path: Path) -> None:
        stamp = (path / MANIFEST).stat().st_mtime_ns
        if any(src == str(path) and e.stamp == stamp for (src, _), e in self._entries.items()):
            return
        try:
            for t in load_transcripts(path).transcripts:
                self._put(str(path), t.run_id or path.name, t.events, None, stamp)
        except Exception as exc:
            self._put(str(path), path.name, [], str(exc), stamp)

    def _refresh_file(self, path: Path) -> None:
        try:
            stat = path.stat()
        except OSError:
            return
        stamp = (stat.st_size, stat.st_mtime_ns)
        known = [e for (src, _), e in self._entries.items() if src == str(path)]
        if known and all(e.stamp == stamp for e in known):
            return
        try:
            if path.suffix == ".json" and is_trace(path):
                for t in import_trace(path):
                    self._put(str(path), t.run_id or path.stem, t.events, None, stamp)
                return
            transcript = Transcript.load(path)
            self._put(str(path), transcript.run_id or path.stem, transcript.events, None, stamp)
        except Exception as exc:
            self._put(str(path), path.stem, [], str(exc), stamp)


# -- pages ---------------------------------------------------------------------------------------------------

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1f2328;background:#fff}
@media (prefers-color-scheme:dark){body{color:#e6edf3;background:#0d1117}a{color:#58a6ff}}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .6rem;border-bottom:1px solid #8884}
th a{text-decoration:none;color:inherit}td.num{text-align:right;font-variant-numeric:tabular-nums}
.error{color:#cf222e}.muted{opacity:.7}
"""


def _sort_key(column: str) -> Any:
    def key(row: dict[str, Any]) -> tuple[int, Any]:
        value = row.get(column)
        return (1, "") if value is None else (0, value)
    return key


def list_page(catalog: Catalog, token: str, sort: str, order: str, refresh: float | None) -> str:
    """The run list as one HTML page (server-sorted; the headers link to the other orders)."""
    rows = [e.as_dict() for e in catalog.entries()]
    if sort in dict(COLUMNS):
        rows.sort(key=_sort_key(sort), reverse=order == "desc")
        if order == "desc":  # keep the rows without a value last either way
            rows.sort(key=lambda r: r.get(sort) is None)
    t = quote(token)
    head = "".join(
        f'<th><a href="/?token={t}&amp;sort={k}&amp;order={"asc" if sort == k and order == "desc" else "desc"}" '
        f'data-sort="{k}">{label}{" ▼" if sort == k and order == "desc" else " ▲" if sort == k else ""}</a></th>'
        for k, label in COLUMNS)
    body = []
    for r in rows:
        link = f'<a href="/run/{r["id"]}?token={t}">{esc(r["run_id"])}</a>'
        if r["error"]:
            body.append(f'<tr class="run" data-id="{r["id"]}"><td>{link}</td><td class="error" colspan="6">'
                        f'cannot be read: {esc(r["error"])}</td><td>{esc(r["source"])}</td></tr>')
            continue
        cost = "—" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}"
        body.append(
            f'<tr class="run" data-id="{r["id"]}"><td>{link}</td><td class="state">{esc(r["state"])}</td>'
            f'<td>{esc(r["model"])}</td><td class="num">{r["tokens"]:,}</td><td class="num">{cost}</td>'
            f'<td>{esc((r["started"] or "")[:19])}</td><td class="num">{r["events"]}</td>'
            f'<td class="muted">{esc(r["source"])}</td></tr>')
    meta = f'<meta http-equiv="refresh" content="{refresh:g}">' if refresh else ""
    sources = esc(", ".join(map(shown, catalog.specs)))
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"referrer\" "
            f"content=\"no-referrer\">{meta}<title>agentnb · {len(rows)} runs</title><style>{_STYLE}</style></head>"
            f"<body><h1>agentnb runs</h1><p class=\"muted\">{len(rows)} run(s) from {sources}"
            f"{' · following' if refresh else ''}</p><table class=\"runs\"><thead><tr>{head}</tr></thead><tbody>"
            f"{''.join(body)}</tbody></table></body></html>\n")


def follow_script(slug: str, events: int, interval: float) -> str:
    """With ``--follow``: a run's page asks the list every ``interval`` seconds, and reloads when its run grew."""
    return ("<script>(() => { const token = new URLSearchParams(location.search).get(\"token\") || \"\";\n"
            f"setInterval(async () => {{ try {{ const rows = await (await fetch(\"/api/runs?token=\" + "
            "encodeURIComponent(token), {cache: \"no-store\"})).json();\n"
            f"const row = rows.find((r) => r.id === {json.dumps(slug)}); if (row && row.events !== {events}) "
            f"location.reload(); }} catch (e) {{}} }}, {round(interval * 1000)}); }})();</script>\n")


class ViewServer(ThreadingHTTPServer):
    """The HTTP server of ``agentnb view``: a catalog, a token, rendered pages kept while their run is unchanged."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], catalog: Catalog, token: str, refresh: float | None) -> None:
        super().__init__(address, _Handler)
        self.catalog = catalog
        self.token = token
        self.refresh = refresh
        self.pages: dict[str, tuple[int, bytes]] = {}
        self.pages_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet when the browser left before its answer was written (a reload, a followed page refreshing)."""
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)

    def run_page(self, entry: Entry) -> bytes:
        """The one-file export of a run, rendered once per version of it."""
        with self.pages_lock:
            kept = self.pages.get(entry.slug)
            if kept is not None and kept[0] == len(entry.events):
                return kept[1]
        text = render_html(Timeline(entry.events), title=f"agentnb · {entry.run_id}")
        if self.refresh:
            at = text.rindex("</body>")
            text = text[:at] + follow_script(entry.slug, len(entry.events), self.refresh) + text[at:]
        page = text.encode("utf-8")
        with self.pages_lock:
            self.pages[entry.slug] = (len(entry.events), page)
        return page


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    server_version = "agentnb-view"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # quiet: the terminal shows the URL and errors only

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self, query: dict[str, list[str]]) -> bool:
        given = (query.get("token") or [""])[0]
        header = self.headers.get("Authorization", "")
        if not given and header.lower().startswith("token "):
            given = header[6:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.server.token.encode())

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if not self._authorized(query):
            self._send(403, b"403 Forbidden: open the URL agentnb view printed (it holds the token)\n",
                       "text/plain; charset=utf-8")
            return
        catalog = self.server.catalog
        if url.path == "/":
            page = list_page(catalog, self.server.token, (query.get("sort") or ["started"])[0],
                             (query.get("order") or ["desc"])[0], self.server.refresh)
            self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")
        elif url.path == "/api/runs":
            rows = json.dumps([e.as_dict() for e in catalog.entries()], ensure_ascii=False, default=str)
            self._send(200, rows.encode("utf-8"), "application/json")
        elif url.path.startswith("/run/") and (entry := catalog.get(url.path[5:])) is not None:
            if entry.error is not None or not entry.events:
                self._send(409, f"run {entry.run_id} cannot be shown: {entry.error}\n".encode(),
                           "text/plain; charset=utf-8")
                return
            self._send(200, self.server.run_page(entry), "text/html; charset=utf-8")
        else:
            self._send(404, b"404 Not Found\n", "text/plain; charset=utf-8")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(epilog=EXIT_CODES_HELP, short_help="Serve runs read-only to a browser.")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; anything but loopback is served with a warning.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0: a free port.")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; just print the URL.")
@click.option("--follow", is_flag=True,
              help="Read the sources again every --interval seconds: new runs appear, a run's page shows new events.")
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between reads with --follow.")
@key_file_option
@reports
def view(paths: tuple[str, ...], host: str, port: int, no_browser: bool, follow: bool, interval: float,
         key_file: str | None) -> None:
    """Serve runs read-only to a browser: a sortable run list, and each run in the debugger's static view.

    PATH is a transcript (JSONL or an HTML export), a directory of transcripts, a Parquet dataset (a
    directory save_parquet wrote), a SQLite store or a PostgreSQL DSN, or an OTLP/JSON trace (*.json). The
    URL printed holds a random token; requests without it get 403. Ctrl-C or SIGTERM stops the server
    (exit 0).

    \b
    Examples:
      agentnb view runs.db
      agentnb view transcripts/ --no-browser
      agentnb view runs.db --follow --interval 5
    """
    for p in paths:
        if not p.strip():
            raise refusal("a PATH is blank", Exit.USAGE)
    if not _loopback(host):
        stderr(f"warning: serving on {host}, not loopback: anyone who can reach this address and learns the URL's "
               "token can read these runs (their prompts, arguments and results)")
    catalog = Catalog(paths, key_file=key_file)
    token = secrets.token_urlsafe(24)
    signals = StopSignals()
    try:
        server = ViewServer((host, port), catalog, token, interval if follow else None)
    except OSError as exc:
        catalog.close()
        signals.restore()
        raise refusal(f"cannot listen on {host}:{port}: {exc.strerror or exc}", Exit.FAILURE) from exc
    where = f"[{host}]" if ":" in host else host
    url = f"http://{where}:{server.server_address[1]}/?token={token}"
    say(f"agentnb view: {len(catalog.entries())} run(s); Ctrl-C stops it")
    say(url)
    sys.stdout.flush()
    stop = threading.Event()
    threads = [threading.Thread(target=server.serve_forever, args=(0.2,), name="agentnb-view", daemon=True)]
    if follow:
        threads.append(threading.Thread(target=_follow, args=(catalog, interval, stop), name="agentnb-follow",
                                        daemon=True))
    for t in threads:
        t.start()
    if not no_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    def shut() -> None:
        stop.set()
        server.shutdown()
        server.server_close()
        catalog.close()

    signals.wait_then(shut)


def _follow(catalog: Catalog, interval: float, stop: threading.Event) -> None:
    while not stop.wait(interval):
        try:
            catalog.refresh()
        except Exception as exc:  # a source gone for a moment: said, then tried again
            stderr(f"agentnb view: reading again failed: {exc}")
