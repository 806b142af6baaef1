"""Labels: what a person says about a run, a turn or a call (a tag, a note, a score, who and when), kept beside the log.

Theory of operation. A run's log is sealed (an HMAC chain in a store) and a saved transcript is its events and
nothing else, so a label never goes into either: it lives *beside* them, in a label book (:class:`Labels`) of
its own. A book is one of these (:mod:`agentnb._label_books`), and labels copy between them unchanged
(``Labels(b).extend(Labels(a))``):

- a **JSON Lines file**, one label per line, appended and flushed to disk as each label is given
  (``Labels.beside("run.jsonl")`` is ``run.labels.jsonl``, next to the transcript file);
- a **table in an SQLite store's file** (``Labels(store)``, or the path of the file) or in a
  **PostgreSQL store's schema** (``Labels(pg_store)``): a table ``labels`` that the store itself never reads, so
  the events, the ledger and their seals are as they were (``tests/test_labels.py`` checks the seals after
  labelling on both, and resumes the run);
- a **Parquet transcripts directory** (``Labels(folder)`` on what ``save_parquet`` wrote): a ``labels/``
  dataset beside the frames' datasets, one file per append, so the labels travel with the dataset;
- a **one-file HTML export** (``Labels("run.html")`` on what ``to_html`` wrote): an inert block beside the one
  holding the events, so the labels travel with the page (``Transcript.load`` reads the same run back).

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
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._label_books import (
    Backend,
    HtmlPage,
    Jsonl,
    Label,
    LabelsRecovered,
    ParquetDir,
    Postgres,
    Sqlite,
    finite_score,
    is_sqlite,
)
from ._transcript import Transcript
from .exceptions import LabelError
from .store import PostgresStore, SqliteStore

if TYPE_CHECKING:
    import pandas as pd

MAX_TAG = 200


class Labels:
    """A label book: labels people give runs, turns and calls, kept beside the sealed log (see the module docs).

    Args:
        where: a JSON Lines file (``labels.jsonl``), an :class:`~agentnb.SqliteStore` or a
            :class:`~agentnb.PostgresStore` (it gets a ``labels`` table), the path of an SQLite file, a Parquet
            transcripts directory (``save_parquet``) or an HTML export (``to_html``).

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> book = anb.Labels(os.path.join(tempfile.mkdtemp(), "labels.jsonl"))
        >>> book.add("r7", tag="escalate", note="the refund looks wrong", by="ana").tag
        'escalate'
        >>> len(book), book.frame()["tag"].tolist()
        (1, ['escalate'])
    """

    def __init__(self, where: str | Path | SqliteStore | PostgresStore) -> None:
        self._store: SqliteStore | PostgresStore | None = None
        self._backend: Backend
        if isinstance(where, SqliteStore):
            self._store = where
            self.path: Path | None = where.path
            self._backend = Sqlite(where.path, readonly=where.readonly)
        elif isinstance(where, PostgresStore):
            self._store = where
            self.path = None
            self._backend = Postgres(where.dsn, where.schema, repr(where))
        elif isinstance(where, str | Path):
            self.path = Path(where).expanduser()
            if self.path.is_dir():
                if not (self.path / "manifest.json").is_file():
                    raise LabelError(f"{self.path} is a directory but no Parquet transcripts directory (no "
                                     "manifest.json): give a .jsonl file, an SQLite file, a saved Parquet dataset "
                                     "or an HTML export")
                self._backend = ParquetDir(self.path)
            elif self.path.suffix.lower() in (".html", ".htm"):
                if not self.path.is_file():
                    raise LabelError(f"{self.path}: no such HTML export (write it first: transcript.to_html(path))")
                self._backend = HtmlPage(self.path)
            else:
                self._backend = Sqlite(self.path) if is_sqlite(self.path) else Jsonl(self.path)
        else:
            raise TypeError(f"a label book is a .jsonl path, an SqliteStore, a PostgresStore, an SQLite file, a "
                            f"Parquet transcripts directory or an HTML export; got {type(where).__name__}")

    @classmethod
    def beside(cls, transcript_path: str | Path) -> Labels:
        """The JSONL book next to a saved transcript: ``run.jsonl`` -> ``run.labels.jsonl``."""
        p = Path(transcript_path)
        return cls(p.with_name(f"{p.stem}.labels.jsonl"))

    def __repr__(self) -> str:
        kinds = {Sqlite: "SQLite", Postgres: "PostgreSQL", ParquetDir: "Parquet", HtmlPage: "HTML", Jsonl: "JSONL"}
        where = self.path if self.path is not None else repr(self._store)
        return f"<agentnb.Labels {where} ({kinds.get(type(self._backend), '?')})>"

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
            checked_score = finite_score(score)
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

    @staticmethod
    def empty_frame() -> pd.DataFrame:
        """The frame of a book with no labels: :data:`COLUMNS`, typed, no rows."""
        return _frame([], [])

    def frame(self, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """The labels as a DataFrame keyed like the frames (see the module docs).

        Args:
            run_ids: only the labels of these runs, with ``run_id`` a categorical of exactly these, in order
                (what ``frames.labels(book)`` passes); None: every label, its runs in the order first labelled.
        """
        labels = self._backend.read()
        if run_ids is not None:
            wanted = set(run_ids)
            labels = [lb for lb in labels if lb.run_id in wanted]
            cats = list(dict.fromkeys(run_ids))
        else:
            cats = list(dict.fromkeys(lb.run_id for lb in labels))
        return _frame(labels, cats)


def _frame(labels: Sequence[Label], cats: Sequence[str]) -> pd.DataFrame:
    import pandas as pd

    text = pd.StringDtype("python")
    at = pd.to_datetime([lb.at for lb in labels], utc=True).as_unit("us")
    return pd.DataFrame({
        "run_id": pd.Categorical([lb.run_id for lb in labels], categories=list(cats)),
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
