"""Labels: what a person says about a run, a turn or a call (a tag, a note, a score, who and when), kept beside the log.

Theory of operation. A run's log is sealed (an HMAC chain in a store) and a saved transcript is its events and
nothing else, so a label never goes into either: it lives *beside* them, in a label book (:class:`Labels`) of
its own. A book is one of two things, and labels copy between them unchanged (``Labels(b).extend(Labels(a))``):

- a **JSON Lines file**, one label per line, appended and flushed to disk as each label is given
  (``Labels.beside("run.jsonl")`` is ``run.labels.jsonl``, next to the transcript file);
- a **table in an SQLite store's file** (``Labels(store)``, or the path of the file): a table ``labels`` that
  the store itself never reads, so the events, the ledger and their seals are as they were
  (``tests/test_labels.py`` checks the seals after labelling, and resumes the run).

A label points at its run by id and, where it is about part of the run, at a call (``call_id``), a turn
(``turn``) or an event (``seq``), with the keys the frames use: :meth:`Labels.frame` (or
``transcript.frames.labels(book)``) is a DataFrame that joins ``frames.calls()`` on ``(run_id, call_id)``,
``frames.turns()`` on ``(run_id, turn)`` and ``frames.events()`` on ``(run_id, seq)``. Given the run (a
transcript, or a book in a store that holds it), a label is checked against it first: a call, a turn or an
event the run does not have is refused, naming what it has, and the label's ``seq`` and ``turn`` are filled
in from the frames (a call's ``seq`` is its ``seq`` in ``frames.calls()``, a turn's its ``seq`` in
``frames.turns()``). Books are append-only: a later label does not replace an earlier one; both are rows.

Example:
    >>> import agentnb as anb, tempfile, os
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    >>> t = loop.start("Paris?", run_id="r1").run().transcript
    >>> book = anb.Labels(os.path.join(tempfile.mkdtemp(), "labels.jsonl"))
    >>> _ = anb.label(book, t, call_id="call_1_1", tag="right tool", score=1, by="ana")
    >>> t.frames.labels(book)[["run_id", "seq", "turn", "call_id", "tag", "score", "by"]]
      run_id  seq  turn   call_id         tag  score   by
    0     r1    2     1  call_1_1  right tool    1.0  ana
"""

from __future__ import annotations

import getpass
import json
import math
import os
import sqlite3
import threading
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .exceptions import LabelError
from .store import SqliteStore
from .transcript import Transcript

if TYPE_CHECKING:
    import pandas as pd

SQLITE_MAGIC = b"SQLite format 3\x00"
TABLE = """CREATE TABLE IF NOT EXISTS labels (
    label_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER, turn INTEGER, call_id TEXT, tag TEXT, note TEXT,
    score REAL, by TEXT, at TEXT NOT NULL
)"""
MAX_TAG = 200


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
                       note=_text(data.get("note")), score=_score(data.get("score")), by=_text(data.get("by")),
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


def _score(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"a score is a finite number, got {v!r}")
    return float(v)


class _Backend(Protocol):
    def append(self, labels: Sequence[Label]) -> None: ...
    def read(self) -> list[Label]: ...


class _Jsonl:
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


class _Sqlite:
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


def _is_sqlite(path: Path) -> bool:
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return True
    try:
        with path.open("rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


class Labels:
    """A label book: labels people give runs, turns and calls, kept beside the sealed log (see the module docs).

    Args:
        where: a JSON Lines file (``labels.jsonl``), an :class:`~agentnb.SqliteStore` (its file gets a
            ``labels`` table), or the path of an SQLite file.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> book = anb.Labels(os.path.join(tempfile.mkdtemp(), "labels.jsonl"))
        >>> book.add("r7", tag="escalate", note="the refund looks wrong", by="ana").tag
        'escalate'
        >>> len(book), book.frame()["tag"].tolist()
        (1, ['escalate'])
    """

    def __init__(self, where: str | Path | SqliteStore) -> None:
        self._store: SqliteStore | None = None
        if isinstance(where, SqliteStore):
            self._store = where
            self.path = where.path
            self._backend: _Backend = _Sqlite(where.path, readonly=where.readonly)
        elif isinstance(where, str | Path):
            self.path = Path(where).expanduser()
            if self.path.is_dir():
                raise LabelError(f"{self.path} is a directory: give a .jsonl file or an SQLite file")
            self._backend = _Sqlite(self.path) if _is_sqlite(self.path) else _Jsonl(self.path)
        else:
            raise TypeError(f"a label book is a .jsonl path, an SqliteStore or an SQLite file; got "
                            f"{type(where).__name__}")

    @classmethod
    def beside(cls, transcript_path: str | Path) -> Labels:
        """The JSONL book next to a saved transcript: ``run.jsonl`` -> ``run.labels.jsonl``."""
        p = Path(transcript_path)
        return cls(p.with_name(f"{p.stem}.labels.jsonl"))

    def __repr__(self) -> str:
        return f"<agentnb.Labels {self.path} ({'SQLite' if isinstance(self._backend, _Sqlite) else 'JSONL'})>"

    def __len__(self) -> int:
        return len(self._backend.read())

    def __iter__(self) -> Iterator[Label]:
        return iter(self._backend.read())

    def all(self, run_id: str | None = None) -> list[Label]:
        """Every label, in the order given (only those of ``run_id`` when given)."""
        return [lb for lb in self._backend.read() if run_id is None or lb.run_id == run_id]

    def add(self, run: Transcript | str, *, call_id: str | None = None, turn: int | None = None,
            seq: int | None = None, tag: str | None = None, note: str | None = None, score: float | None = None,
            by: str | None = None) -> Label:
        """Label a run, one of its turns, calls or events; written to the book at once.

        Args:
            run: the run (a :class:`~agentnb.Transcript`, checked against; or its id, checked against the store
                when the book is in one).
            call_id: the call it is about (its ``seq`` and ``turn`` are filled in from ``frames.calls()``).
            turn: the turn it is about (its ``seq`` is filled in from ``frames.turns()``).
            seq: the event it is about. At most one of ``call_id``, ``turn`` and ``seq``; none: the whole run.
            tag: a short tag (at most 200 characters).
            note: free text.
            score: a finite number. At least one of ``tag``, ``note`` and ``score``.
            by: who says it (default: the operating system's user name).

        Raises:
            LabelError: the run has no such call, turn or event; nothing is said; a bad tag or score.
        """
        run_id, transcript = self._resolve(run)
        if tag is None and note is None and score is None:
            raise LabelError("a label says something: give a tag, a note or a score")
        if tag is not None and (not isinstance(tag, str) or not tag.strip() or len(tag) > MAX_TAG):
            raise LabelError(f"a tag is a non-empty string of at most {MAX_TAG} characters, got {tag!r}")
        if note is not None and not isinstance(note, str):
            raise LabelError(f"a note is text, got {type(note).__name__}")
        try:
            checked_score = _score(score)
        except ValueError as exc:
            raise LabelError(str(exc)) from None
        if sum(x is not None for x in (call_id, turn, seq)) > 1:
            raise LabelError("a label is about a call, a turn or an event: give one of call_id, turn and seq")
        if transcript is not None:
            seq, turn = _place(transcript, run_id, call_id, turn, seq)
        label = Label(label_id=uuid.uuid4().hex, run_id=run_id, seq=seq, turn=turn, call_id=call_id, tag=tag,
                      note=note, score=checked_score, by=by if by is not None else _user(),
                      at=datetime.now(UTC))
        self._backend.append([label])
        return label

    def extend(self, labels: Iterable[Label]) -> None:
        """Copy labels into this book as they are (a label already here, by id, is not written twice)."""
        have = {lb.label_id for lb in self._backend.read()}
        new = [lb for lb in labels if lb.label_id not in have]
        if new:
            self._backend.append(new)

    def _resolve(self, run: Transcript | str) -> tuple[str, Transcript | None]:
        if isinstance(run, Transcript):
            if not run.run_id:
                raise LabelError("an empty transcript has no run to label")
            return run.run_id, run
        if not isinstance(run, str) or not run:
            raise LabelError(f"label a run by its Transcript or its id, got {run!r}")
        if self._store is not None:
            events = self._store.load(run)
            return run, Transcript(events)
        return run, None

    def frame(self, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """The labels as a DataFrame keyed like the frames (see the module docs).

        Args:
            run_ids: only the labels of these runs, with ``run_id`` a categorical of exactly these, in order
                (what ``frames.labels(book)`` passes); None: every label, its runs in the order first labelled.
        """
        import pandas as pd

        labels = self._backend.read()
        if run_ids is not None:
            wanted = set(run_ids)
            labels = [lb for lb in labels if lb.run_id in wanted]
            cats = list(dict.fromkeys(run_ids))
        else:
            cats = list(dict.fromkeys(lb.run_id for lb in labels))
        text = pd.StringDtype("python")
        at = pd.to_datetime([lb.at for lb in labels], utc=True).as_unit("us")
        return pd.DataFrame({
            "run_id": pd.Categorical([lb.run_id for lb in labels], categories=cats),
            "seq": pd.array([lb.seq for lb in labels], dtype="Int64"),
            "turn": pd.array([lb.turn for lb in labels], dtype="Int64"),
            "call_id": pd.array([lb.call_id for lb in labels], dtype=text),
            "tag": pd.array([lb.tag for lb in labels], dtype=text),
            "note": pd.array([lb.note for lb in labels], dtype=text),
            "score": pd.array([lb.score for lb in labels], dtype="Float64"),
            "by": pd.array([lb.by for lb in labels], dtype=text),
            "at": at,
            "label_id": pd.array([lb.label_id for lb in labels], dtype=text),
        })


COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("run_id", "category", "the run, as in the frames"),
    ("seq", "Int64", "the event the label is about (a call's or a turn's ``seq`` in its frame); null: the run"),
    ("turn", "Int64", "the turn it is about"),
    ("call_id", "string", "the call it is about"),
    ("tag", "string", "the tag"),
    ("note", "string", "the note"),
    ("score", "Float64", "the score"),
    ("by", "string", "who gave it"),
    ("at", "datetime", "when (UTC)"),
    ("label_id", "string", "the label's own id"),
)
"""The columns of :meth:`Labels.frame`: ``(name, dtype, doc)``."""


def _place(t: Transcript, run_id: str, call_id: str | None, turn: int | None, seq: int | None
           ) -> tuple[int | None, int | None]:
    """The ``(seq, turn)`` of the part of the run a label is about; refuses a part the run does not have."""
    if call_id is not None:
        calls = t.frames.calls()
        row = calls[calls["call_id"] == call_id]
        if row.empty:
            have = ", ".join(calls["call_id"].tolist()[:10]) or "none"
            raise LabelError(f"run {run_id!r} has no call {call_id!r} (its calls: {have})")
        return int(row["seq"].iloc[0]), int(row["turn"].iloc[0])
    if turn is not None:
        turns = t.frames.turns(price_table=False)
        row = turns[turns["turn"] == turn] if isinstance(turn, int) and not isinstance(turn, bool) else turns[:0]
        if row.empty:
            raise LabelError(f"run {run_id!r} has no turn {turn!r} (its turns: 1 to {len(turns)})")
        return int(row["seq"].iloc[0]), turn
    if seq is not None:
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < len(t.events):
            raise LabelError(f"run {run_id!r} has no event {seq!r} (its events: 0 to {len(t.events) - 1})")
        return seq, t.events[seq].turn
    return None, None


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return None


def label(book: Labels | str | Path | SqliteStore, run: Transcript | str, **what: Any) -> Label:
    """Label a run, a turn or a call in a label book (a :class:`Labels`, or what makes one); see :meth:`Labels.add`.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> t = loop.start("Paris?", run_id="r1").run().transcript
        >>> path = os.path.join(tempfile.mkdtemp(), "labels.jsonl")
        >>> anb.label(path, t, turn=2, tag="good answer", by="ana").seq
        8
    """
    return (book if isinstance(book, Labels) else Labels(book)).add(run, **what)


__all__ = ["COLUMNS", "Label", "Labels", "LabelsRecovered", "label"]
