"""What every verb of the ``agentnb`` command shares: exit codes, errors as messages, stores, sources, output.

Every refusal becomes one line on stderr and an exit code of :class:`Exit`, never a traceback: an
:class:`~agentnb.AgentnbError` is mapped by :func:`from_error` (most specific class first), a file that is
missing or unreadable is ``NOT_FOUND`` or ``FAILURE``, a blank argument is ``USAGE``. An error nobody
foresaw prints its type and message and exits ``FAILURE``; ``AGENTNB_DEBUG=1`` shows its traceback too.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from .._collection import MANIFEST, load_transcripts
from .._debugger.timeline import Timeline
from .._debugger.viewdata import meters
from .._transcript import Transcript
from .._visible import hides, visible
from ..events import BaseEvent
from ..exceptions import (
    AgentnbError,
    ApprovalError,
    ApprovalExpired,
    CheckpointError,
    DigestMismatch,
    ResumeError,
    RunLocked,
    RunNotFound,
    RunNotPaused,
    TranscriptError,
)
from ..store import PostgresStore, SqliteStore, Store


class Exit(IntEnum):
    """The exit codes of every verb (``docs/command.md`` and ``agentnb --help`` list them, from :data:`MEANING`)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    NOT_FOUND = 3
    REFUSED = 4
    EXPIRED = 5
    DIGEST = 6
    LOCKED = 7
    UNTRUSTED = 8


MEANING: dict[Exit, str] = {
    Exit.OK: "done",
    Exit.FAILURE: "findings of severity error (lint, import), or a failure no other code names",
    Exit.USAGE: "a bad option or argument (a blank id, an unknown format, a missing --loop)",
    Exit.NOT_FOUND: "no such file, store, run or call",
    Exit.REFUSED: "the decision was refused: the run is not paused, the call does not wait, another driver "
                  "moved the run on",
    Exit.EXPIRED: "the approval expired (the call can still be denied)",
    Exit.DIGEST: "the arguments waiting are not the ones --digest names",
    Exit.LOCKED: "another driver holds the run's lease",
    Exit.UNTRUSTED: "a store, transcript or file that cannot be trusted or read: tampered, wrong key, not a "
                    "run, not JSON, a loop other than the run's",
}
"""What each exit code means, in the words ``--help`` and ``docs/command.md`` use."""

EXIT_CODES_HELP = "\b\nExit codes:\n" + "\n".join(f"  {code.value}  {MEANING[code]}" for code in Exit)


def refusal(message: str, code: Exit = Exit.FAILURE) -> click.ClickException:
    """A refusal to report: click prints ``Error: <message>`` on stderr (text shown as it is) and exits ``code``."""
    exc = click.ClickException(visible(message)[0])
    exc.exit_code = int(code)  # type: ignore[misc]  # click reads it per instance (ClickException.show)
    return exc


_CODES: tuple[tuple[type[AgentnbError], Exit], ...] = (
    (ApprovalExpired, Exit.EXPIRED),
    (DigestMismatch, Exit.DIGEST),
    (RunNotFound, Exit.NOT_FOUND),
    (ApprovalError, Exit.REFUSED),
    (RunNotPaused, Exit.REFUSED),
    (RunLocked, Exit.LOCKED),
    (CheckpointError, Exit.UNTRUSTED),
    (TranscriptError, Exit.UNTRUSTED),
    (ResumeError, Exit.UNTRUSTED),
)


def from_error(exc: AgentnbError) -> click.ClickException:
    """The message and exit code of an agentnb error (the most specific class that matches)."""
    code = next((c for cls, c in _CODES if isinstance(exc, cls)), Exit.FAILURE)
    return refusal(str(exc), code)


P = ParamSpec("P")
R = TypeVar("R")


def reports(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a verb, turning every error into a message and an exit code (see the module docs)."""

    @wraps(fn)
    def verb(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except AgentnbError as exc:
            raise from_error(exc) from exc
        except FileNotFoundError as exc:
            raise refusal(f"{exc.filename}: no such file", Exit.NOT_FOUND) from exc
        except OSError as exc:
            raise refusal(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "), Exit.FAILURE) from exc
        except Exception as exc:  # never a traceback for a user: the type and the message, and how to see more
            if os.environ.get("AGENTNB_DEBUG"):
                traceback.print_exc()
            raise refusal(f"unexpected {type(exc).__name__}: {exc} (AGENTNB_DEBUG=1 shows where)") from exc

    return verb


def not_blank(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A click callback refusing a blank (empty or spaces only) argument."""
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if isinstance(v, str) and not v.strip():
            raise click.BadParameter("is blank", ctx=ctx, param=param)
    return value


def emit_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout (one document, UTF-8, keys in their order).

    An invisible or direction-changing character (or a terminal's escape) inside a string is written as its
    JSON escape (``\u202e``): the same value to a JSON reader, and no trick for a person reading a terminal.
    """
    click.echo(visible(json.dumps(value, indent=2, ensure_ascii=False, default=str), json=True)[0])


def say(line: str) -> None:
    """Print a line for a person on stdout, every invisible or direction-changing character written out."""
    click.echo(visible(line)[0])


# -- stores --------------------------------------------------------------------------------------------------

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_dsn(spec: str) -> bool:
    """True for a PostgreSQL connection string: ``postgresql://``, ``postgres://`` or ``host=... dbname=...``."""
    if spec.startswith(("postgresql://", "postgres://")):
        return True
    return re.match(r"\s*(host|hostaddr|dbname|user|port|service)\s*=", spec) is not None and not Path(spec).exists()


_DSN_PASSWORD = (re.compile(r"(://[^:/@]+):[^@]*@"), re.compile(r"(password\s*=\s*)('[^']*'|\S+)"))


def shown(spec: str) -> str:
    """A store's name as it may be printed: a DSN's password masked (``postgresql://ana:***@db/agentnb``)."""
    if not is_dsn(spec) and "password" not in spec:
        return spec
    url, keyword = _DSN_PASSWORD
    return keyword.sub(r"\1***", url.sub(r"\1:***@", spec))


def is_sqlite(path: Path) -> bool:
    """True when ``path`` is a SQLite database file."""
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _check_sqlite_store(path: Path) -> None:
    # read-only look first: opening for writing would add agentnb's tables to any SQLite file
    if not path.exists():
        raise refusal(f"{path}: no such store (a SQLite file or a postgresql:// DSN)", Exit.NOT_FOUND)
    if path.is_dir():
        raise refusal(f"{path} is a directory, not a store file", Exit.USAGE)
    if not is_sqlite(path):
        raise refusal(f"{path} is not a SQLite file, so not an agentnb store", Exit.UNTRUSTED)
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise refusal(f"{path}: cannot read it as SQLite: {exc}", Exit.UNTRUSTED) from exc
    if not {"runs", "events"} <= tables:
        raise refusal(f"{path} is a SQLite file but not an agentnb store (no runs or events table)", Exit.UNTRUSTED)


def open_store(spec: str, *, key_file: str | None, readonly: bool) -> Store:
    """The store named by ``spec``: an existing SQLite file (checked before it is opened) or a PostgreSQL DSN."""
    if is_dsn(spec):
        return PostgresStore(spec, key_file=key_file)
    path = Path(spec)
    _check_sqlite_store(path)
    return SqliteStore(path, key_file=key_file, readonly=readonly)


def close(store: Store) -> None:
    """Close a store that can be closed."""
    closer = getattr(store, "close", None)
    if callable(closer):
        closer()


# -- runs as rows --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """One run as a list shows it."""

    run_id: str
    state: str
    model: str
    events: int
    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    started: str | None
    pending: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data."""
        return {"run_id": self.run_id, "state": self.state, "model": self.model, "events": self.events,
                "turns": self.turns, "tool_calls": self.tool_calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": self.cost_usd, "started": self.started,
                "pending": self.pending}


def summary(events: list[BaseEvent], run_id: str = "") -> Summary:
    """The list row of a run's events (folded once; the cost by the debugger's meter rule)."""
    timeline = Timeline(events)
    rs = timeline.state
    cost = next((v for label, v, _, _ in meters(timeline, len(events) - 1) if label == "cost"), None) if events \
        else None
    pending = [{"call_id": c.call_id, "tool": c.name, "kind": c.kind, "arguments": c.arguments,
                "digest": c.request.arguments_digest if c.request else None, "hides": hides(c.arguments),
                "expires_at": c.request.expires_at.isoformat() if c.request and c.request.expires_at else None}
               for c in rs.pending_approvals()]
    return Summary(rs.run_id or run_id, rs.state.value, rs.model, len(events), rs.turns_completed, rs.tool_calls,
                   rs.input_tokens, rs.output_tokens, cost, events[0].ts.isoformat() if events else None, pending)


# -- sources of runs: transcripts, directories of them, stores ------------------------------------------------


@dataclass(frozen=True)
class Found:
    """A run found in a source: where, under which id, and how to read its events."""

    source: str
    run_id: str
    read: Callable[[], list[BaseEvent]]


def is_parquet(path: Path) -> bool:
    """True for a Parquet dataset of runs (``TranscriptCollection.save_parquet``: a directory with a manifest)."""
    return path.is_dir() and (path / MANIFEST).is_file()


def transcript_files(path: Path) -> list[Path]:
    """The transcripts of a directory: its ``*.jsonl`` files, sorted by name."""
    return sorted(p for p in path.glob("*.jsonl") if p.is_file())


def find_runs(spec: str, *, key_file: str | None, run_ids: tuple[str, ...] = ()) -> Iterator[Found]:
    """Every run of a source: a transcript (JSONL or an HTML export), a directory of them, a Parquet dataset, a store.

    A Parquet dataset is a directory with a ``manifest.json``, as ``TranscriptCollection.save_parquet`` writes it.
    """
    if is_dsn(spec) or (Path(spec).is_file() and is_sqlite(Path(spec))):
        store = open_store(spec, key_file=key_file, readonly=not is_dsn(spec))
        ids = list(run_ids) or [r for r, _ in store.runs()]
        for run_id in ids:
            yield Found(shown(spec), run_id, lambda run_id=run_id: store.load(run_id))  # type: ignore[misc]
        return
    path = Path(spec)
    if is_parquet(path):
        for t in load_transcripts(path).transcripts:
            yield Found(spec, t.run_id or path.name, lambda t=t: t.events)  # type: ignore[misc]
        return
    if path.is_dir():
        files = transcript_files(path)
        if not files:
            raise refusal(f"{path}: no transcript (*.jsonl) in this directory", Exit.NOT_FOUND)
    elif path.exists():
        files = [path]
    else:
        raise refusal(f"{path}: no such file or directory", Exit.NOT_FOUND)
    for f in files:
        yield Found(str(f), f.stem, lambda f=f: Transcript.load(f).events)  # type: ignore[misc]


def stderr(message: str) -> None:
    """One line for a person, on stderr (shown as :func:`say` shows it)."""
    click.echo(visible(message)[0], err=True)


def out_is_tty() -> bool:
    """True when stdout is a terminal."""
    return sys.stdout.isatty()
