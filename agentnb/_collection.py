"""Many runs at once: :func:`load_transcripts`, :class:`TranscriptCollection`, JSON Lines and Parquet files.

Theory of operation. A collection is an ordered set of runs with the same frame methods as one transcript
(``collection.frames.calls()``, ``collection.plot.status()``): each frame is built over all runs in one
column-wise pass (:mod:`agentnb.frames`), with ``run_id`` a categorical of every run, in order.

Two file formats, both lossless:

- **JSON Lines** (:meth:`TranscriptCollection.save_jsonl`): the transcript format, one event per line. A file
  may hold one run or many (events are grouped by ``run_id``); a directory gets one ``<run_id>.jsonl`` per run.
- **Parquet** (:meth:`TranscriptCollection.save_parquet`, needs pyarrow): a directory with one dataset per
  frame (``events/``, ``turns/``, ``calls/``, ``messages/``, ``approvals/``, ``guards/``, ``compressions/``), the
  run ids (``runs/``) and a ``manifest.json`` (:mod:`agentnb._parquet`). The events dataset carries each
  event's own fields as JSON (``payload``), which is what makes it lossless: the runs are rebuilt from it.
  The other datasets are the frames as they are, so DuckDB, Polars or Spark query ``calls/*.parquet``
  directly. ``partition_by_run=True`` writes Hive partitions (``calls/run_id=<id>/...``), one directory per
  run: worth it when runs are large and read one at a time; for many small runs one file per frame loads
  much faster. Parquet text is UTF-8, so a lone surrogate in a model's text (half an emoji) is written as six
  characters (a backslash, ``udXXX``) in the frame datasets; the events dataset escapes it in its JSON, so
  the runs read back exactly.

A collection loaded from Parquet is lazy: its frames are read from the files (a second or less for a million
events) and its transcripts are rebuilt from the events dataset only when asked for. When the frame
declarations changed since the files were written, the frame is rebuilt from the events.

Example:
    >>> import agentnb as anb, tempfile
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    >>> runs = anb.TranscriptCollection([loop.start("Paris?", run_id=f"r{i}").run().transcript for i in range(3)])
    >>> folder = tempfile.mkdtemp()
    >>> runs.save_parquet(folder)
    >>> again = anb.load_transcripts(folder)
    >>> len(again), again.frames.calls().groupby("run_id", observed=True).size().tolist()
    (3, [1, 1, 1])
"""

from __future__ import annotations

import glob as globlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pydantic import ValidationError

from ._compare import compare_many
from ._gc import gc_paused
from ._parquet import MANIFEST as MANIFEST  # the CLI tells a dataset by it
from ._parquet import Store as _ParquetStore
from ._parquet import partition_keys
from ._parquet import write as write_dataset
from ._transcript import Transcript
from .events import BaseEvent, event_from_json, event_to_json
from .exceptions import TranscriptError
from .frames import FRAMES, Frames, build, events_with_payload
from .frames._rows import Log

if TYPE_CHECKING:
    import pandas as pd

    from ._plots import Plots

class TranscriptCollection:
    """Many runs, with the frame and plot methods of one transcript over all of them.

    Args:
        transcripts: the runs (each a :class:`~agentnb.Transcript` with a distinct run id).

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
        >>> runs = anb.TranscriptCollection([loop.start("Weather?").run().transcript for _ in range(2)])
        >>> runs.frames.calls()["status"].value_counts()["ok"]
        np.int64(6)
    """

    def __init__(self, transcripts: Iterable[Transcript] = ()) -> None:
        self._transcripts: list[Transcript] | None = list(transcripts)
        self._run_ids = [t.run_id or "" for t in self._transcripts]
        if len(set(self._run_ids)) != len(self._run_ids):
            dup = sorted({r for r in self._run_ids if self._run_ids.count(r) > 1})
            raise ValueError(f"a collection holds each run once; repeated run ids: {dup[:5]}")
        self._store: _ParquetStore | None = None

    @classmethod
    def _from_store(cls, store: _ParquetStore) -> TranscriptCollection:
        self = cls.__new__(cls)
        self._transcripts = None
        self._run_ids = list(store.run_ids)
        self._store = store
        return self

    # -- runs ----------------------------------------------------------------------------------------

    @property
    def run_ids(self) -> list[str]:
        """The runs' ids, in order."""
        return list(self._run_ids)

    @property
    def transcripts(self) -> list[Transcript]:
        """The runs (rebuilt from the events dataset on first use when loaded from Parquet)."""
        if self._transcripts is None:
            assert self._store is not None
            self._transcripts = self._store.transcripts()
        return self._transcripts

    def __len__(self) -> int:
        return len(self._run_ids)

    def __iter__(self) -> Iterator[Transcript]:
        return iter(self.transcripts)

    @overload
    def __getitem__(self, key: int | str) -> Transcript: ...
    @overload
    def __getitem__(self, key: slice) -> TranscriptCollection: ...
    def __getitem__(self, key: int | str | slice) -> Transcript | TranscriptCollection:
        if isinstance(key, slice):
            return TranscriptCollection(self.transcripts[key])
        if isinstance(key, str):
            try:
                return self.transcripts[self._run_ids.index(key)]
            except ValueError:
                raise KeyError(f"no run {key!r} in this collection") from None
        return self.transcripts[key]

    def __repr__(self) -> str:
        where = f" from {self._store.root}" if self._store is not None and self._transcripts is None else ""
        return f"<agentnb.TranscriptCollection {len(self)} runs{where}>"

    # -- frames and plots ----------------------------------------------------------------------------

    @property
    def frames(self) -> Frames:
        """The frames over every run (see :class:`agentnb.frames.Frames`)."""
        return Frames(self._frame)

    @property
    def plot(self) -> Plots:
        """Plots over every run (see :mod:`agentnb._plots`)."""
        from ._plots import Plots

        return Plots(self.frames)

    def _frame(self, name: str, payload: bool) -> pd.DataFrame:
        if self._store is not None and self._transcripts is None:
            stored = self._store.frame(name, payload)
            if stored is not None:
                return stored
        runs = [t.events for t in self.transcripts]
        if payload:
            return events_with_payload(runs, self._run_ids)
        return build(name, runs, run_ids=self._run_ids)

    # -- files ---------------------------------------------------------------------------------------

    def save_jsonl(self, path: str | Path) -> None:
        """Write the events as JSON Lines: to one file, or (for a directory) one ``<run_id>.jsonl`` per run.

        A path ending in ``.jsonl`` is a file; anything else is a directory (created if needed).
        """
        path = Path(path)
        if path.suffix == ".jsonl":
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8") as fh:
                for t in self.transcripts:
                    for ev in t.events:
                        fh.write(event_to_json(ev))
                        fh.write("\n")
            return
        path.mkdir(parents=True, exist_ok=True)
        for t in self.transcripts:
            t.save(path / f"{t.run_id}.jsonl")

    def save_parquet(self, path: str | Path, *, partition_by: str | Sequence[str] | None = None,
                     partition_by_run: bool = False, payload: bool = True, append: bool = False) -> None:
        """Write every frame as a Parquet dataset under directory ``path`` (see the module docs).

        Args:
            path: the directory (created; datasets already in it are replaced unless ``append``).
            partition_by: run-level keys to Hive-partition every dataset by: ``"run_date"`` (the day the run
                started, UTC), ``"run_model"`` (the model the run started with, ``provider:model``) and/or
                ``"run_id"``. Each becomes a column of every dataset (and a directory level:
                ``calls/run_date=2026-05-01/run_model=openai_chat%3Agpt-4.1/part-0-0.parquet``), so a query
                that filters on it reads only those files.
            partition_by_run: the same as ``partition_by="run_id"`` (one directory per run).
            payload: also write each event's own fields as JSON (the ``payload`` column of ``events/``), which
                is what lets :func:`load_transcripts` rebuild the runs. ``False`` writes the frames only (several
                times faster; the dataset then answers frames and SQL, not transcripts).
            append: add these runs to the dataset already at ``path`` (written with the same options), as new
                files: a large dataset can be written one batch at a time.

        Example:
            >>> import agentnb as anb, tempfile
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> runs = anb.TranscriptCollection([loop.start("Paris?").run().transcript for _ in range(3)])
            >>> folder = tempfile.mkdtemp()
            >>> runs.save_parquet(folder, partition_by="run_model")
            >>> anb.load_transcripts(folder).sql("select run_model, count(*) as calls from calls group by 1")
                            run_model  calls
            0  scripted:story:weather      3
        """
        keys = partition_keys(partition_by, partition_by_run)
        with gc_paused():  # frames, tables and files: nothing for the collector to find, millions of objects to walk
            write_dataset(Path(path), self._each_frame(payload), self._run_ids, self._partition_values(keys),
                          keys=keys, payload=payload, append=append)

    def _each_frame(self, payload: bool) -> Iterator[tuple[str, pd.DataFrame]]:
        """Every frame (the events with their payload if asked), built from one log of the runs, one at a time."""
        log: Log | None = None
        for name in FRAMES:
            with_payload = payload and name == "events"
            if self._store is not None and self._transcripts is None:
                stored = self._store.frame(name, with_payload)
                if stored is not None:
                    yield name, stored
                    continue
            if log is None:
                log = Log([t.events for t in self.transcripts])
            yield name, (events_with_payload(log.runs, self._run_ids, log=log) if with_payload
                         else build(name, log.runs, run_ids=self._run_ids, log=log))

    def _partition_values(self, keys: list[str]) -> dict[str, list[str]]:
        """``{key: [the value of each run]}`` for the run-level partition keys (from each run's first event)."""
        out: dict[str, list[str]] = {}
        if "run_id" in keys:
            out["run_id"] = list(self._run_ids)
        if not set(keys) - {"run_id"}:
            return out
        firsts = [t.events[0] if t.events else None for t in self.transcripts]
        if "run_date" in keys:
            out["run_date"] = [f.ts.date().isoformat() if f is not None else "unknown" for f in firsts]
        if "run_model" in keys:
            out["run_model"] = [str(getattr(f, "model", "") or "unknown") for f in firsts]
        return out

    # -- SQL -----------------------------------------------------------------------------------------

    def compare(self, by: Any, *, task: Any = None) -> pd.DataFrame:
        """Runs of the same tasks compared across two groups (two models, two prompts): one row per task.

        ``by``: ``"model"``, a ``RunStarted.settings`` key, or a function of a transcript giving the group;
        ``task``: what makes two runs the same task (default: their prompt). Each row says whether the two runs
        took the same trajectory and, if not, the step where they part and why (see :func:`agentnb.compare`);
        ``attrs["identical_share"]`` is the share of tasks with identical trajectories.

        Example:
            >>> import agentnb as anb
            >>> tools = anb.stories.tools("weather")
            >>> runs = [anb.Loop(model=anb.ScriptedModel(anb.stories.script("weather"), name=n), tools=tools)
            ...         .start(p).run()
            ...         for n in ("a", "b") for p in ("Paris?", "Rome?")]
            >>> table = anb.TranscriptCollection([r.transcript for r in runs]).compare(by="model")
            >>> table.attrs["identical_share"], len(table)
            (1.0, 2)
        """
        return compare_many(self, by, task)

    def sql(self, query: str, *, labels: Any = None) -> pd.DataFrame:
        """Answer a SQL query over the frames (``events``, ``turns``, ``calls`` ...) with DuckDB; a DataFrame.

        A collection loaded from Parquet is queried straight from its files (only the columns and the
        partitions the query needs are read; nothing else goes through pandas). Partition keys
        (``run_date``, ``run_model``) are columns of every table. ``labels`` is a view too (see :meth:`duckdb`).

        Example:
            >>> import agentnb as anb
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
            >>> runs = anb.TranscriptCollection([loop.start("Weather?").run().transcript for _ in range(2)])
            >>> runs.sql("select tool, count(*) as n from calls group by tool")
                      tool  n
            0  get_weather  6
        """
        import pandas as pd

        result: pd.DataFrame = self.duckdb(query, labels=labels).sql(query).df()
        for col in result.columns:  # a registered frame's categoricals come back as ENUMs: answer as files do
            if isinstance(result[col].dtype, pd.CategoricalDtype):
                result[col] = result[col].astype("str")
        return result

    def duckdb(self, query: str | None = None, *, labels: Any = None) -> Any:
        """A DuckDB connection with one view per frame (only those ``query`` names, when given), and ``labels``.

        ``labels`` is the frame of a label book (:meth:`agentnb.Labels.frame`, the collection's runs only): the
        book given, else the labels a Parquet dataset carries (its ``labels/``), else none (the view is there,
        empty). It joins the frames on ``run_id`` with ``seq`` (an event), ``call_id`` (a call) or ``turn``.

        Args:
            query: only the views it names are made.
            labels: a :class:`~agentnb.Labels`, or what makes one (a ``.jsonl`` path, a store, ...).

        Example:
            >>> import agentnb as anb, tempfile, os
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> runs = anb.TranscriptCollection([loop.start("Paris?", run_id="r1").run().transcript])
            >>> book = anb.Labels(os.path.join(tempfile.mkdtemp(), "labels.jsonl"))
            >>> _ = book.add(runs[0], call_id="call_1_1", tag="right tool")
            >>> runs.sql("select c.tool, l.tag from calls c join labels l using (run_id, call_id)", labels=book)
                      tool         tag
            0  get_weather  right tool
        """
        try:
            import duckdb
        except ImportError as exc:
            raise ImportError("SQL over transcripts needs duckdb: pip install 'agentnb[analysis]'") from exc
        import re

        import pandas as pd

        con = duckdb.connect()
        for name in FRAMES:
            if query is not None and not re.search(rf"\b{name}\b", query, re.IGNORECASE):
                continue
            if (self._store is not None and self._transcripts is None and self._store.current(name)
                    and any((self._store.root / name).rglob("*.parquet"))):
                glob = str(self._store.root / name / "**" / "*.parquet").replace("'", "''")
                hive = "true" if self._store.partition_by else "false"
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{glob}', hive_partitioning={hive}, "
                            "union_by_name=true)")
            else:
                df = self._frame("events", True) if name == "events" else self._frame(name, False)
                # categoricals would be ENUMs (sorted in category order): as text they compare as in the files
                con.register(name, df.astype({c: "str" for c in df.columns
                                              if isinstance(df[c].dtype, pd.CategoricalDtype)}))
        if query is None or re.search(r"\blabels\b", query, re.IGNORECASE):
            frame = self._labels_frame(labels)
            con.register("labels", frame.astype({"run_id": "str"}))
        return con

    def _labels_frame(self, labels: Any) -> pd.DataFrame:
        from ._labels import Labels

        if labels is None and self._store is not None and (self._store.root / "labels").is_dir():
            labels = self._store.root
        if labels is None:
            return Labels.empty_frame()
        book = labels if isinstance(labels, Labels) else Labels(labels)
        return book.frame(self._run_ids)


def _expand(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    out: list[Path] = []
    for item in items:
        text = str(item)
        if any(ch in text for ch in "*?["):
            matches = sorted(globlib.glob(text, recursive=True))
            if not matches:
                raise FileNotFoundError(f"no file matches {text!r}")
            out.extend(Path(m) for m in matches)
            continue
        p = Path(item)
        if p.is_dir() and not (p / MANIFEST).exists():
            found = sorted(p.glob("*.jsonl"))
            if not found:
                raise FileNotFoundError(f"{p}: no *.jsonl files and no {MANIFEST}")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such file or directory: {p}")
    return out


def _read_jsonl(path: Path, validate: bool) -> list[Transcript]:
    runs: dict[str, list[BaseEvent]] = {}
    with path.open(encoding="utf-8") as fh, gc_paused():
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                ev = event_from_json(line)
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(str(x) for x in first["loc"])
                raise TranscriptError(f"{path}:{lineno}: not a valid event ({where}: {first['msg']})") from None
            runs.setdefault(ev.run_id, []).append(ev)
    out = [Transcript(events) for events in runs.values()]
    if validate:
        for t in out:
            try:
                t.fold()
            except TranscriptError as exc:
                raise TranscriptError(f"{path}: run {t.run_id}: the events do not form a valid run: {exc}",
                                      seq=exc.seq, event_type=exc.event_type) from exc
    return out


def load_transcripts(paths_or_glob: str | Path | Iterable[str | Path], *, validate: bool = True
                     ) -> TranscriptCollection:
    """Load runs from JSON Lines files, a glob of them, a directory of them, or a Parquet directory.

    Args:
        paths_or_glob: a path, a glob (``"runs/**/*.jsonl"``), a directory (its ``*.jsonl``, or the Parquet
            datasets when it holds a ``manifest.json``), or a list of these.
        validate: fold every JSONL run through the state machine (as :meth:`Transcript.load` does).

    Raises:
        FileNotFoundError: when nothing matches.
        TranscriptError: naming the file and line of an invalid event, or a run that is not valid.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> folder = tempfile.mkdtemp()
        >>> for i in range(2):
        ...     loop.start("Paris?", run_id=f"r{i}").run().transcript.save(os.path.join(folder, f"r{i}.jsonl"))
        >>> anb.load_transcripts(os.path.join(folder, "*.jsonl")).run_ids
        ['r0', 'r1']
    """
    paths = _expand(paths_or_glob)
    stores = [p for p in paths if p.is_dir()]
    if len(paths) == 1 and stores:
        return TranscriptCollection._from_store(_ParquetStore(stores[0]))
    transcripts: list[Transcript] = []
    for p in paths:
        if p.is_dir():
            transcripts.extend(TranscriptCollection._from_store(_ParquetStore(p)).transcripts)
        else:
            transcripts.extend(_read_jsonl(p, validate))
    return TranscriptCollection(transcripts)


__all__ = ["TranscriptCollection", "load_transcripts"]
