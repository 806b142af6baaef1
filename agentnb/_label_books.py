"""Where labels are kept: the :class:`Label` record and the label books' backends, one per kind of place.

A book (:class:`agentnb.Labels`) appends labels and reads them all back; each backend keeps them beside the
sealed log, never in it, so no event, ledger row or seal changes when a run is labelled:

- :class:`Jsonl`: a JSON Lines file, one label per line, appended and flushed as each label is given;
- :class:`Sqlite`: a ``labels`` table in an SQLite store's file (the store never reads it);
- :class:`Postgres`: a ``labels`` table in a :class:`~agentnb.PostgresStore`'s schema (the store never reads it);
- :class:`ParquetDir`: a ``labels/`` dataset inside a Parquet transcripts directory
  (``TranscriptCollection.save_parquet``), one file per append, so the labels travel with the dataset;
- :class:`HtmlPage`: an inert block inside a one-file HTML export (``transcript.to_html``), beside the one that
  holds the run's events, so the labels travel with the page.

A label given twice (by its id) is kept once in every backend. Appends from several processes at once are safe
for JSONL (one write each), SQLite and PostgreSQL (transactions) and Parquet (a file each); an HTML page is
rewritten whole (atomically), so it takes one writer at a time: label in a store and copy into the page.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
import sqlite3
import tempfile
import threading
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .exceptions import LabelError

SQLITE_MAGIC = b"SQLite format 3\x00"
TABLE = """CREATE TABLE IF NOT EXISTS labels (
    label_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER, turn INTEGER, call_id TEXT, tag TEXT, note TEXT,
    score REAL, by TEXT, at TEXT NOT NULL
)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Label:
    """What a person said about a run, a turn or a call.

    Attributes:
        label_id: the label's own id.
        run_id: the run.
        seq: the event it is about (a call's ``seq`` in ``frames.calls()``, a turn's in ``frames.turns()``);
            None: the whole run.
        turn: the turn it is about, if any.
        call_id: the call it is about, if any.
        tag: a short tag (``"wrong tool"``).
        note: free text.
        score: a number (a grade, a rating).
        by: who gave it.
        at: when (UTC).

    Example:
        >>> import agentnb as anb, datetime
        >>> anb.Label(label_id="l1", run_id="r1", tag="good", at=datetime.datetime.now(datetime.UTC)).turn is None
        True
    """

    label_id: str
    run_id: str
    seq: int | None = None
    turn: int | None = None
    call_id: str | None = None
    tag: str | None = None
    note: str | None = None
    score: float | None = None
    by: str | None = None
    at: datetime

    def to_json(self) -> dict[str, Any]:
        """The label as JSON data (one line of a JSONL book)."""
        data = asdict(self)
        data["at"] = self.at.isoformat()
        return data

    @classmethod
    def from_json(cls, data: Any) -> Label:
        """A label from :meth:`to_json`'s data.

        Raises:
            LabelError: the data is not a label (naming what is wrong).
        """
        if not isinstance(data, dict):
            raise LabelError(f"a label is a JSON object, got {type(data).__name__}")
        try:
            at = datetime.fromisoformat(str(data["at"]))
            return cls(label_id=str(data["label_id"]), run_id=str(data["run_id"]), seq=_int(data.get("seq")),
                       turn=_int(data.get("turn")), call_id=_text(data.get("call_id")), tag=_text(data.get("tag")),
                       note=_text(data.get("note")), score=finite_score(data.get("score")), by=_text(data.get("by")),
                       at=at if at.tzinfo else at.replace(tzinfo=UTC))
        except KeyError as exc:
            raise LabelError(f"a label needs {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise LabelError(f"not a label: {exc}") from None


class LabelsRecovered(UserWarning):
    """A JSONL label book holds a line that is not JSON (cut short by a crash): it was left out."""


def _int(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError(f"expected text, got {v!r}")
    return v


def finite_score(v: Any) -> float | None:
    """A score: None, or a finite number as a float (a bool, NaN or infinity refused)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"a score is a finite number, got {v!r}")
    return float(v)


class Backend(Protocol):
    """Where a book's labels are kept: it appends labels and reads them all back."""

    def append(self, labels: Sequence[Label]) -> None: ...
    def read(self) -> list[Label]: ...


class Jsonl:
    """A JSON Lines book."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, labels: Sequence[Label]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(label.to_json(), ensure_ascii=False) + "\n" for label in labels)
        with self._lock, self.path.open("a+b") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # a line cut short by a crash: it stays its own (skipped) line
                    text = "\n" + text
            fh.write(text.encode("utf-8", "surrogatepass"))  # one write: appends from two processes do not mix
            fh.flush()
            os.fsync(fh.fileno())

    def read(self) -> list[Label]:
        if not self.path.exists():
            return []
        out = []
        with self.path.open(encoding="utf-8", errors="surrogatepass") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except ValueError:
                    warnings.warn(f"{self.path}:{lineno}: not a whole label (a line cut short by a crash?); "
                                  "left out", LabelsRecovered, stacklevel=3)
                    continue
                try:
                    out.append(Label.from_json(data))
                except LabelError as exc:
                    raise LabelError(f"{self.path}:{lineno}: {exc}") from None
        return out


class Sqlite:
    """A ``labels`` table in an SQLite file."""

    def __init__(self, path: Path, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10.0)
        db = sqlite3.connect(self.path, timeout=10.0)
        db.execute(TABLE)
        return db

    def append(self, labels: Sequence[Label]) -> None:
        if self.readonly:
            raise LabelError(f"{self.path}: the store is open read-only, so the labels could not be written; "
                             "open it with readonly=False (or label into a .jsonl book)")
        rows = [(lb.label_id, lb.run_id, lb.seq, lb.turn, lb.call_id, lb.tag, lb.note, lb.score, lb.by,
                 lb.at.isoformat()) for lb in labels]
        try:
            with self._lock, self._connect() as db:
                db.executemany("INSERT OR IGNORE INTO labels VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        except sqlite3.Error as exc:
            raise LabelError(f"{self.path}: the labels could not be written ({exc})") from exc

    def read(self) -> list[Label]:
        try:
            with self._lock, self._connect() as db:
                rows = db.execute("SELECT label_id, run_id, seq, turn, call_id, tag, note, score, by, at FROM labels "
                                  "ORDER BY at, rowid").fetchall()
        except sqlite3.OperationalError as exc:
            if self.readonly and "no such table" in str(exc):
                return []  # a store nobody labelled yet
            raise LabelError(f"{self.path}: the labels could not be read ({exc})") from exc
        except sqlite3.Error as exc:
            raise LabelError(f"{self.path}: the labels could not be read ({exc})") from exc
        names = ("label_id", "run_id", "seq", "turn", "call_id", "tag", "note", "score", "by", "at")
        return [Label.from_json(dict(zip(names, row, strict=True))) for row in rows]


def is_sqlite(path: Path) -> bool:
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return True
    try:
        with path.open("rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


PG_TABLE = """CREATE TABLE IF NOT EXISTS labels (
    label_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER, turn INTEGER, call_id TEXT, tag TEXT, note TEXT,
    score DOUBLE PRECISION, by TEXT, at TIMESTAMPTZ NOT NULL
)"""
_NAMES = ("label_id", "run_id", "seq", "turn", "call_id", "tag", "note", "score", "by", "at")


class Postgres:
    """A ``labels`` table in a PostgresStore's schema (its own connection: the store's tables are never touched)."""

    def __init__(self, dsn: str, schema: str, shown: str, timeout: float = 10.0) -> None:
        self.dsn, self.schema, self.shown, self.timeout = dsn, schema, shown, timeout
        self._ready = False

    def _run(self, what: str, work: Any) -> Any:
        import psycopg

        try:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=max(1, int(self.timeout))) as conn:
                conn.execute(f"SET search_path TO {self.schema}")  # a plain name: PostgresStore checked it
                if not self._ready:
                    conn.execute(PG_TABLE)
                    self._ready = True
                with conn.transaction():
                    return work(conn)
        except psycopg.Error as exc:
            raise LabelError(f"{self.shown}: the labels could not be {what} ({exc})") from exc

    def append(self, labels: Sequence[Label]) -> None:
        rows = [(lb.label_id, lb.run_id, lb.seq, lb.turn, lb.call_id, lb.tag, lb.note, lb.score, lb.by, lb.at)
                for lb in labels]

        def work(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO labels VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                                "ON CONFLICT (label_id) DO NOTHING", rows)

        self._run("written", work)

    def read(self) -> list[Label]:
        rows = self._run("read", lambda conn: conn.execute(
            f"SELECT {', '.join(_NAMES)} FROM labels ORDER BY at, label_id").fetchall())
        return [Label.from_json({**dict(zip(_NAMES, row, strict=True)), "at": row[-1].isoformat()}) for row in rows]


def _label_table(labels: Sequence[Label]) -> Any:
    import pyarrow as pa

    cols = {name: [getattr(lb, name) for lb in labels] for name in _NAMES}
    cols["at"] = [lb.at.isoformat() for lb in labels]
    schema = pa.schema([("label_id", pa.string()), ("run_id", pa.string()), ("seq", pa.int64()),
                        ("turn", pa.int64()), ("call_id", pa.string()), ("tag", pa.string()), ("note", pa.string()),
                        ("score", pa.float64()), ("by", pa.string()), ("at", pa.string())])
    return pa.table(cols, schema=schema)


class ParquetDir:
    """A ``labels/`` dataset inside a Parquet transcripts directory: one file per append, written whole."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = root / "labels"

    def append(self, labels: Sequence[Label]) -> None:
        import pyarrow.parquet as pq

        have = {lb.label_id for lb in self.read()}
        new = [lb for lb in labels if lb.label_id not in have]
        if not new:
            return
        self.folder.mkdir(exist_ok=True)
        target = self.folder / f"part-{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}.parquet"
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".part-", suffix=".tmp")
        os.close(fd)
        try:
            pq.write_table(_label_table(new), tmp)
            os.replace(tmp, target)  # a reader sees the whole file or none of it
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def read(self) -> list[Label]:
        import pyarrow.parquet as pq

        if not self.folder.is_dir():
            return []
        out: list[Label] = []
        seen: set[str] = set()
        for part in sorted(self.folder.glob("part-*.parquet")):
            try:
                rows = pq.read_table(part).to_pylist()
            except Exception as exc:
                raise LabelError(f"{part}: not a label file ({exc})") from None
            for row in rows:
                if row["label_id"] not in seen:
                    seen.add(row["label_id"])
                    out.append(Label.from_json(row))
        return out


LABELS_ID = "agentnb-labels"
"""The id of the element of an HTML export that holds its labels."""
_OPEN = f'<script type="application/x-ndjson" id="{LABELS_ID}" data-labels="jsonl+gzip+base64">'
_BLOCK = re.compile(re.escape(_OPEN) + r"([A-Za-z0-9+/=]*)</script>\n?")


class HtmlPage:
    """The labels inside a one-file HTML export: an inert block (JSON Lines, gzip, base64), rewritten whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _page(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8", errors="surrogatepass")
        except OSError as exc:
            raise LabelError(f"{self.path}: the page could not be read ({exc})") from exc

    def append(self, labels: Sequence[Label]) -> None:
        with self._lock:
            page = self._page()
            have = self._labels(page)
            ids = {lb.label_id for lb in have}
            every = have + [lb for lb in labels if lb.label_id not in ids]
            lines = "".join(json.dumps(lb.to_json(), ensure_ascii=False) + "\n" for lb in every).encode("utf-8")
            block = f"{_OPEN}{base64.b64encode(gzip.compress(lines, mtime=0)).decode('ascii')}</script>\n"
            if _BLOCK.search(page):
                page = _BLOCK.sub(lambda _: block, page, count=1)
            elif "</body>" in page:
                at = page.rindex("</body>")
                page = page[:at] + block + page[at:]
            else:
                page += block
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
                    fh.write(page)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def _labels(self, page: str) -> list[Label]:
        found = _BLOCK.search(page)
        if found is None:
            return []
        try:
            lines = gzip.decompress(base64.b64decode(found[1], validate=True)).decode("utf-8").splitlines()
        except (ValueError, OSError, EOFError) as exc:
            raise LabelError(f"{self.path}: the labels in this page are damaged ({exc})") from None
        return [Label.from_json(json.loads(line)) for line in lines if line.strip()]

    def read(self) -> list[Label]:
        return self._labels(self._page())
