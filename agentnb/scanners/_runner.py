"""``anb.scan``: every scanner over every run, concurrently, cached, resumable; the hits as one DataFrame.

Theory of operation. The runs come from a transcript, a collection, a list of transcripts, a directory or
glob of saved transcripts (anything :func:`~agentnb.load_transcripts` reads), a store (every run it holds,
each loaded and its seals checked as :meth:`~agentnb.Store.load` does) or the path of an SQLite store. Each run
is one unit of work on a bounded thread pool: it is loaded, its digest computed (:mod:`._cache`), and each
scanner either read from the cache or run and then written to it, before the next unit's results are in; so
a scan that stops (an error, a ^C, a crash) keeps every run it finished, and the same scan started again runs
no scanner on them. A scanner that raises on a run is reported once the other runs are done
(:class:`~agentnb.exceptions.ScanError`, or a warning with ``on_error="skip"``); its other runs are cached.

The results are one row per hit (:data:`COLUMNS`), keyed as the frames are: ``run_id`` is a categorical of
every run scanned, in order, and ``seq``/``turn``/``call_id`` have the frames' dtypes, so hits join
``frames.events()`` on ``(run_id, seq)``, ``frames.calls()`` on ``(run_id, call_id)`` and ``frames.turns()`` on
``(run_id, turn)``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._collection import TranscriptCollection, load_transcripts
from .._transcript import Transcript
from .._values import exception_text
from ..exceptions import ScanError
from ..frames._builder import string_dtype
from ..store import MemoryStore, PostgresStore, SqliteStore, as_store
from ._cache import Cache, digest
from ._core import Hit, Scanner, as_scanners
from ._views import prime, release, view

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("run_id", "category", "the run (categories: every run scanned, in order), as in the frames"),
    ("scanner", "category", "the scanner that found it (categories: the scanners of the scan, in order)"),
    ("seq", "Int64", "the event the hit is about (for a call: its ``seq`` in ``frames.calls()``); null: the run"),
    ("turn", "Int64", "the turn of that event"),
    ("call_id", "string", "the call the hit is about, if any"),
    ("value", "object", "what the scanner answered: ``True`` for a flag, a question's answer as JSON data"),
    ("score", "Float64", "how strongly, when the scanner measures it"),
    ("message", "string", "what was found, in a sentence"),
)
"""The columns of a scan's results: ``(name, dtype, doc)``."""

SQLITE_MAGIC = b"SQLite format 3\x00"
CHUNK = 64
"""At most this many runs go to a worker at once (their frames are built together)."""

Loader = Callable[[], Transcript]


@dataclass
class _Unit:
    """One run's part of a scan."""

    run_id: str
    hits: dict[str, list[Hit]] = field(default_factory=dict)
    turns: dict[int, int] = field(default_factory=dict)
    ran: int = 0
    errors: list[str] = field(default_factory=list)


def scan(runs: Any, *scanners: Any, cache: str | Path | None = None, concurrency: int = 8,
         progress: bool | None = None, on_error: Literal["raise", "skip"] = "raise") -> pd.DataFrame:
    """Run scanners over runs; one row per hit, keyed like the frames (``run_id``, ``seq``, ``turn``, ``call_id``).

    Args:
        runs: a :class:`~agentnb.Transcript`, a :class:`~agentnb.TranscriptCollection`, a list of transcripts,
            a directory, file or glob of saved transcripts, a store, or the path of an SQLite store.
        *scanners: :class:`~agentnb.Scanner` objects (``@anb.scanner``, ``anb.scanner.ask(...)``, the
            built-ins) or plain functions of a run; none: every built-in (``anb.scanner.builtins()``).
        cache: a directory for results, one file per run (named by its digest) holding each scanner's hits
            under its name and version: a scan with the same cache runs a scanner only on runs it has not seen.
        concurrency: runs scanned at once (threads: a question to a model waits on its answer).
        progress: show a ``tqdm`` bar (default: when there are more than 20 runs).
        on_error: a scanner that raises on a run: ``"raise"`` a :class:`~agentnb.exceptions.ScanError` once
            every other run is scanned (and cached), or ``"skip"`` that run for that scanner with a warning.

    Raises:
        ScanError: a scanner raised, or a run could not be loaded (naming each, with what it raised).
        TypeError: ``runs`` or a scanner is something else.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("looping"), tools=anb.stories.tools("looping"))
        >>> runs = anb.TranscriptCollection([loop.start("Status?", run_id=f"r{i}").run().transcript for i in range(2)])
        >>> hits = anb.scan(runs, anb.scanner.repeated_calls())
        >>> hits[["run_id", "scanner", "call_id"]].head(2)
          run_id         scanner   call_id
        0     r0  repeated_calls  call_2_1
        1     r0  repeated_calls  call_3_1
    """
    chosen = as_scanners(scanners) if scanners else _builtins()
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    sources = _sources(runs)
    ids = [rid for rid, _ in sources]
    store = Cache(cache) if cache is not None else None
    bar = _Progress(len(sources), progress if progress is not None else len(sources) > 20)
    units: list[_Unit | None] = [None] * len(sources)
    # Runs go to the workers in chunks: a chunk's frames are built in one pass (views.prime), which is what
    # makes many small runs fast; small enough chunks keep every worker busy (a question waits on a model).
    size = max(1, min(CHUNK, -(-len(sources) // (concurrency * 4))))
    chunks = [list(range(i, min(i + size, len(sources)))) for i in range(0, len(sources), size)]

    stop = threading.Event()  # set when the scan is stopping (an error, a ^C): workers end after their run

    def work(chunk: list[int]) -> list[tuple[int, _Unit]]:
        if stop.is_set():
            return []
        return [(i, unit) for i, unit in zip(chunk, _scan_chunk([sources[i] for i in chunk], chosen, store, bar,
                                                                stop), strict=True)]

    try:
        if concurrency == 1 or len(chunks) <= 1:
            for chunk in chunks:
                for i, unit in work(chunk):
                    units[i] = unit
        else:
            with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="agentnb-scan") as pool:
                futures = [pool.submit(work, chunk) for chunk in chunks]
                try:
                    for fut in concurrent.futures.as_completed(futures):
                        for i, unit in fut.result():
                            units[i] = unit
                except BaseException:
                    stop.set()
                    for f in futures:
                        f.cancel()
                    raise
    finally:
        bar.close()
    done = [u for u in units if u is not None]
    errors = [e for u in done for e in u.errors]
    if errors:
        text = (f"{len(errors)} scanner run(s) failed: " + "; ".join(errors[:5])
                + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
                + (". The other results are cached: fix the scanner (or give it a new version) and scan again"
                   if store is not None else ""))
        if on_error == "raise":
            raise ScanError(text, errors=errors)
        warnings.warn(text, ScanWarning, stacklevel=2)
    return frame(done, ids, [s.name for s in chosen])


class ScanWarning(UserWarning):
    """``anb.scan(..., on_error="skip")`` left out runs a scanner raised on (each named, with its error)."""


def _builtins() -> list[Scanner]:
    from ._builtin import builtins

    return list(builtins())


def _sources(runs: Any) -> list[tuple[str, Loader]]:
    """``(run_id, load)`` for each run to scan, in order (a store's runs are loaded by the worker)."""
    if isinstance(runs, Transcript):
        return [(runs.run_id or "", lambda: runs)]
    if isinstance(runs, TranscriptCollection):
        return [(t.run_id or "", _const(t)) for t in runs.transcripts]
    if isinstance(runs, MemoryStore | SqliteStore | PostgresStore):
        store = runs
        return [(rid, _stored(store, rid)) for rid, _ in store.runs()]
    if isinstance(runs, str | Path):
        text = str(runs)
        if text.startswith(("postgresql://", "postgres://")):
            return _sources(as_store(text))
        path = Path(runs)
        if path.is_file() and _is_sqlite(path):
            return _sources(SqliteStore(path, readonly=True))
        return _sources(load_transcripts(runs))
    if isinstance(runs, Iterable) and not isinstance(runs, bytes | dict):
        items = list(runs)
        if all(isinstance(t, Transcript) for t in items):
            return _sources(TranscriptCollection(items))
        if all(isinstance(t, str | Path) for t in items):
            return _sources(load_transcripts(items))
    raise TypeError(f"anb.scan reads a Transcript, a TranscriptCollection, a list of transcripts, a store, or the "
                    f"path of saved transcripts or of an SQLite store; got {type(runs).__name__}")


def _const(t: Transcript) -> Loader:
    return lambda: t


def _stored(store: Any, run_id: str) -> Loader:
    return lambda: Transcript(store.load(run_id))


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _scan_chunk(sources: list[tuple[str, Loader]], scanners: list[Scanner], cache: Cache | None,
                bar: _Progress, stop: threading.Event) -> list[_Unit]:
    """Scan a few runs: load them, read what the cache has, prime the frames of the rest, scan them one by one."""
    units = [_Unit(run_id) for run_id, _ in sources]
    loaded: list[tuple[_Unit, Transcript, str]] = []
    for unit, (run_id, load) in zip(units, sources, strict=True):
        try:
            transcript = load()
        except Exception as exc:
            unit.errors.append(f"run {run_id!r} could not be loaded: {exception_text(exc)}")
            bar.update(unit)
            continue
        unit.turns = {ev.seq: ev.turn for ev in transcript.events}
        run_digest = digest(transcript) if cache is not None else ""
        if cache is not None:
            unit.hits.update(cache.get(scanners, run_digest))
        loaded.append((unit, transcript, run_digest))
    todo = [(u, t, d) for u, t, d in loaded if len(u.hits) < len(scanners)]
    for unit, _, _ in loaded:
        if len(unit.hits) == len(scanners):
            bar.update(unit)
    runs = [t for _, t, _ in todo]
    prime(runs)
    try:
        for unit, transcript, run_digest in todo:
            if stop.is_set():
                break
            found = {s: hits for s in scanners if s.name not in unit.hits
                     if (hits := _run_scanner(s, unit, transcript)) is not None}
            if cache is not None:
                cache.put(run_digest, unit.run_id, found)  # as soon as the run is done: a stopped scan resumes here
            unit.hits.update({s.name: hits for s, hits in found.items()})
            bar.update(unit)
    finally:
        release(runs)
    return units


def _run_scanner(s: Scanner, unit: _Unit, transcript: Transcript) -> list[Hit] | None:
    try:
        hits = s(transcript)
    except Exception as exc:
        unit.errors.append(f"scanner {s.name!r} on run {unit.run_id!r}: {exception_text(exc)}")
        return None
    unit.ran += 1
    if any(h.seq is None and h.call_id is not None for h in hits):
        calls = view(transcript).calls
        anchors = dict(zip(calls["call_id"].tolist(), calls["seq"].tolist(), strict=True))
        hits = [replace(h, seq=anchors.get(h.call_id)) if h.seq is None and h.call_id else h for h in hits]
    return hits


def frame(units: list[_Unit], run_ids: list[str], scanner_names: list[str]) -> pd.DataFrame:
    """The hits of every run as the results DataFrame (:data:`COLUMNS`)."""
    import pandas as pd

    cols: dict[str, list[Any]] = {name: [] for name, _, _ in COLUMNS}
    for u in units:
        for name in scanner_names:
            for h in u.hits.get(name, ()):
                cols["run_id"].append(u.run_id)
                cols["scanner"].append(name)
                cols["seq"].append(h.seq)
                cols["turn"].append(u.turns.get(h.seq) if h.seq is not None else None)
                cols["call_id"].append(h.call_id)
                cols["value"].append(h.value)
                cols["score"].append(h.score)
                cols["message"].append(h.message)
    run_cats = list(dict.fromkeys(run_ids))
    data = {
        "run_id": pd.Categorical(cols["run_id"], categories=run_cats),
        "scanner": pd.Categorical(cols["scanner"], categories=scanner_names),
        "seq": pd.array(cols["seq"], dtype="Int64"),
        "turn": pd.array(cols["turn"], dtype="Int64"),
        "call_id": pd.array(cols["call_id"], dtype=string_dtype()),
        "value": pd.Series(cols["value"], dtype=object),
        "score": pd.array(cols["score"], dtype="Float64"),
        "message": pd.array(cols["message"], dtype=string_dtype()),
    }
    return pd.DataFrame({k: (v.to_numpy() if isinstance(v, pd.Series) else v) for k, v in data.items()})


class _Progress:
    """Runs scanned, hits found and scanners run (the rest came from the cache) on a tqdm bar."""

    def __init__(self, total: int, show: bool) -> None:
        self.bar: Any = None
        self._lock = threading.Lock()
        self.hits = self.ran = self.failed = 0
        if show:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="scan", unit="run", dynamic_ncols=True)

    def update(self, unit: _Unit | None) -> None:
        if unit is None:
            return
        with self._lock:
            self.hits += sum(len(h) for h in unit.hits.values())
            self.ran += unit.ran
            self.failed += len(unit.errors)
            if self.bar is not None:
                self.bar.set_postfix(hits=self.hits, ran=self.ran, failed=self.failed, refresh=False)
                self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
