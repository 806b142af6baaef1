"""Parquet datasets of runs: what ``TranscriptCollection.save_parquet`` writes and ``load_transcripts`` reads.

Theory of operation. A dataset is a directory: one Parquet dataset per frame (``events/``, ``turns/`` ...), the
run ids of each batch written (``runs/part-<n>.parquet``: one ``run_id`` column, the batch's runs in order) and a
small ``manifest.json`` (the format, the options, the frames' column signatures and the batches' run-id files).

Writing a batch costs what the batch holds, whatever the dataset holds already, so a dataset of any size is
written one batch at a time (``append=True``) in the memory of one batch:

- the frames are built from one :class:`~agentnb.frames._rows.Log` of the batch's runs (the event classes found
  once for all seven frames);
- each frame's rows are cut into their partitions by run: every partition key is a fact of the run, so the
  rows of a partition are a slice of the frame when the runs come in key order (dates do), else one stable
  sort; each piece is written where a Hive partitioning puts it (``pyarrow``'s own directory names);
- Parquet encodes and compresses each frame's files on a second thread (it releases the GIL) while the next
  frame is built;
- the manifest gains one line per batch and keeps no run id: to refuse a run written twice, an append scans
  the earlier batches' ids against a hash set of its own (files whose statistics leave them out are skipped),
  and rewrites nothing of theirs.

A dataset written before the run-id files (``version`` 2: the ids in the manifest) is read as it is, and an
append to it moves its ids to a file first.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._gc import gc_paused
from ._transcript import Transcript
from .events import BaseEvent, event_from_json
from .exceptions import TranscriptError
from .frames import FRAMES, conform, empty

if TYPE_CHECKING:
    import pandas as pd

MANIFEST = "manifest.json"
FORMAT = "agentnb-transcripts"
VERSION = 3
RUNS = "runs"
"""The directory of the run-id files, one per batch written."""

_PARTITION_KEYS = ("run_date", "run_model", "run_id")
_ROW_GROUP = 256 * 1024
"""Rows per row group of an unpartitioned file (a partition's file keeps pyarrow's dataset default)."""
_PARTITION_ROW_GROUP = 1024 * 1024


def pyarrow_module() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 -- loads the submodule
    except ImportError as exc:
        raise ImportError("Parquet files need pyarrow: pip install 'agentnb[analysis]'") from exc
    return pyarrow


def signature(name: str) -> list[list[str]]:
    return [[c.name, c.dtype] for c in FRAMES[name]]


def partition_keys(partition_by: str | Sequence[str] | None, partition_by_run: bool) -> list[str]:
    keys = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    if partition_by_run and "run_id" not in keys:
        keys.append("run_id")
    for key in keys:
        if key not in _PARTITION_KEYS:
            raise ValueError(f"cannot partition by {key!r}: choose from {', '.join(_PARTITION_KEYS)}")
    return keys


def utf8(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each lone surrogate in its text written as six characters (a backslash, ``udXXX``).

    Only the frames' text columns change; the ``payload`` column (what the runs are rebuilt from) escapes
    such text in its JSON already, so the events read back exactly.
    """
    out = df.copy()
    for name in out.columns:
        col = out[name]
        if col.dtype == object or str(col.dtype).startswith(("str", "string")):
            out[name] = col.map(
                lambda v: v.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(v, str) else v,
                na_action="ignore",
            ).astype(col.dtype)
    return out


def write(root: Path, frames: Iterable[tuple[str, pd.DataFrame]], run_ids: Sequence[str],
          values: Mapping[str, Sequence[str]], *, keys: list[str], payload: bool, append: bool) -> None:
    """Write one batch: ``frames`` (each frame's rows over ``run_ids``), partitioned by ``keys``.

    Args:
        root: the dataset's directory.
        frames: ``(name, frame)`` of every frame, built lazily (one is built while the one before is written).
        run_ids: the batch's runs, in order (the categories of every frame's ``run_id``).
        values: for each key, its value for each run (in the order of ``run_ids``).
        keys: the partition keys.
        payload: whether the events frame carries its payload (recorded: an append must match it).
        append: add the batch to the dataset at ``root`` (else its frames are replaced).
    """
    pa = pyarrow_module()
    root.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "partition_by": keys, "partition_by_run": keys == ["run_id"],
        "payload": payload, "frames": {name: signature(name) for name in FRAMES},
    }
    part, run_files = 0, []
    if append and (root / MANIFEST).exists():
        old = Store(root)
        if old.partition_by != keys or old.payload != payload or old.signatures != manifest["frames"]:
            raise TranscriptError(f"{root} was written with other options (partition_by={old.partition_by}, "
                                  f"payload={old.payload}) or frame columns; append with the same ones")
        clash = old.holding(run_ids)
        if clash:
            raise TranscriptError(f"{root} already holds runs {sorted(clash)[:5]}; a dataset holds each run once")
        part, run_files = old.parts, old.keep_run_files()
    groups = _groups(values, keys, len(run_ids))
    # the files are encoded on the second thread (Parquet releases the GIL) while the next frame is built; the
    # frame becomes Arrow here: that conversion holds the GIL, and would hold up the building if done there
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentnb-parquet") as pool:
        pending: list[Future[None]] = []
        for name, df in frames:
            target = root / name
            if target.exists() and not append:
                shutil.rmtree(target)
            target.mkdir(exist_ok=True)
            for path, table, rows in _files(df, target, part, keys, values, groups):
                pending.append(pool.submit(pa.parquet.write_table, table, path, row_group_size=rows))
            del df
            for done in [f for f in pending if f.done()]:
                done.result()  # a failed write stops the batch now
        for f in pending:
            f.result()
    run_files.append(_write_run_ids(root, part, run_ids))
    manifest["parts"] = part + 1
    manifest["run_files"] = run_files
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def _files(df: pd.DataFrame, target: Path, part: int, keys: list[str], values: Mapping[str, Sequence[str]],
           groups: tuple[Any, list[tuple[str, ...]]]) -> Iterable[tuple[Path, Any, int]]:
    """The files of one frame of a batch, with their table and rows per row group.

    One file, or one per partition (an empty frame has none then).
    """
    pa = pyarrow_module()
    codes = df["run_id"].cat.codes.to_numpy()  # each row's run
    for key in keys:  # partition keys as plain text: Dask refuses a categorical hive partition column
        df[key] = _spread(values[key], codes, df)
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except UnicodeEncodeError:  # a lone surrogate in a model's text: Parquet strings are UTF-8
        table = pa.Table.from_pandas(utf8(df), preserve_index=False)
    del df
    if not keys:
        yield target / f"part-{part}.parquet", table, _ROW_GROUP
        return
    for where, piece in _pieces(table, codes, keys, groups):  # a file outside the key directories would not merge
        (target / where).mkdir(parents=True, exist_ok=True)
        yield target / where / f"part-{part}-0.parquet", piece, _PARTITION_ROW_GROUP


def _spread(per_run: Sequence[str], codes: Any, df: pd.DataFrame) -> Any:
    """A run-level value on every row of ``df`` (``codes``: the run of each row), as text."""
    import numpy as np
    import pandas as pd

    values = np.empty(len(per_run), dtype=object)
    values[:] = per_run
    return pd.Series(values[codes], index=df.index, dtype=object).astype(str)


def _groups(values: Mapping[str, Sequence[str]], keys: list[str], n_runs: int) -> tuple[Any, list[tuple[str, ...]]]:
    """The partition of each run (an index into the list of distinct key values, also returned)."""
    import numpy as np

    if not keys:
        return np.zeros(n_runs, dtype=np.int64), [()]
    index: dict[tuple[str, ...], int] = {}
    of_run = [index.setdefault(combo, len(index)) for combo in zip(*(values[k] for k in keys), strict=True)]
    return np.asarray(of_run, dtype=np.int64), list(index)


def _pieces(table: Any, codes: Any, keys: list[str], groups: tuple[Any, list[tuple[str, ...]]]
            ) -> Iterable[tuple[str, Any]]:
    """Each partition's rows of ``table`` (its key columns left out: the directory holds them) and its directory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    of_run, combos = groups
    if not len(codes):
        return
    row_group = of_run[codes]
    table = table.drop_columns(keys)
    if (np.diff(row_group) < 0).any():  # runs out of key order (or a frame not in run order): one stable sort
        order = np.argsort(row_group, kind="stable")
        table, row_group = table.take(pa.array(order)), row_group[order]
    bounds = [0, *(np.flatnonzero(np.diff(row_group)) + 1).tolist(), len(row_group)]
    hive = ds.partitioning(pa.schema([(k, pa.string()) for k in keys]), flavor="hive")
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        combo = combos[int(row_group[start])]
        expr = pc.field(keys[0]) == combo[0]
        for k, v in zip(keys[1:], combo[1:], strict=True):
            expr = expr & (pc.field(k) == v)
        yield hive.format(expr)[0], table.slice(start, end - start)


def _write_run_ids(root: Path, part: int, run_ids: Sequence[str]) -> str:
    pa = pyarrow_module()
    name = f"{RUNS}/part-{part}.parquet"
    (root / RUNS).mkdir(exist_ok=True)
    pa.parquet.write_table(pa.table({"run_id": pa.array(list(run_ids), type=pa.string())}), root / name)
    return name


class Store:
    """A directory written by :meth:`TranscriptCollection.save_parquet`, read lazily."""

    def __init__(self, root: Path) -> None:
        self.root = root
        try:
            manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        except ValueError:
            raise TranscriptError(f"{root / MANIFEST}: not JSON; not an agentnb transcripts directory") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise TranscriptError(f"{root / MANIFEST}: not an agentnb transcripts directory")
        self._listed: list[str] | None = manifest.get("run_ids")  # version 2 kept them here
        self.run_files: list[str] = manifest.get("run_files", [])
        self.partition_by: list[str] = manifest.get(
            "partition_by", ["run_id"] if manifest.get("partition_by_run", False) else [])
        self.payload: bool = manifest.get("payload", True)
        self.parts: int = manifest.get("parts", 1)
        self.signatures: dict[str, Any] = manifest.get("frames", {})
        self._run_ids: list[str] | None = None

    def _id_column(self) -> Any:
        """Every run id, in order, as one Arrow array."""
        pa = pyarrow_module()
        if self._listed is not None:
            return pa.array(self._listed, type=pa.string())
        chunks = [pa.parquet.read_table(self.root / f, columns=["run_id"]).column("run_id") for f in self.run_files]
        return pa.chunked_array([c for chunk in chunks for c in chunk.chunks], type=pa.string())

    @property
    def run_ids(self) -> list[str]:
        if self._run_ids is None:
            self._run_ids = self._listed if self._listed is not None else self._id_column().to_pylist()
        return self._run_ids

    def holding(self, run_ids: Sequence[str]) -> list[str]:
        """Which of ``run_ids`` the dataset holds already.

        The earlier batches' ids are scanned against a hash set of the new ones, and a file (a row group) whose
        smallest and largest id leave the new ones out is skipped on its statistics alone: runs named in order
        cost one look at each file's footer.
        """
        pa = pyarrow_module()
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        new = pa.array(list(run_ids), type=pa.string())
        if self._listed is not None:
            old = self._id_column()
            return [str(r) for r in old.filter(pc.is_in(old, value_set=new)).to_pylist()]
        files = ds.dataset([str(self.root / f) for f in self.run_files], format="parquet")
        found = files.to_table(columns=["run_id"], filter=pc.field("run_id").isin(new)).column("run_id")
        return [str(r) for r in found.to_pylist()]

    def keep_run_files(self) -> list[str]:
        """The run-id files to list in the manifest again (a version 2 dataset's ids written to one first)."""
        if self._listed is None:
            return list(self.run_files)
        return [_write_run_ids(self.root, self.parts - 1, self._listed)] if self._listed else []

    def current(self, name: str) -> bool:
        """Whether frame ``name`` was written with today's declarations."""
        return bool(self.signatures.get(name) == signature(name))

    def read(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
        pyarrow_module()
        import pyarrow.dataset as ds

        target = self.root / name
        if not target.exists() or not any(target.rglob("*.parquet")):
            return None
        dataset = ds.dataset(target, format="parquet", partitioning="hive" if self.partition_by else None)
        df: pd.DataFrame = dataset.to_table(columns=list(columns) if columns is not None else None).to_pandas()
        if self.partition_by or self.parts > 1:  # files come back in directory order: put the runs in order
            order = {r: i for i, r in enumerate(self.run_ids)}
            key = df["run_id"].astype(str).map(order)
            df = df.iloc[key.argsort(kind="stable")].reset_index(drop=True)
        return df

    def frame(self, name: str, payload: bool) -> pd.DataFrame | None:
        """Frame ``name`` as stored, or None when the declarations changed since it was written."""
        if not self.current(name) or (payload and not self.payload):
            return None
        cols = [c.name for c in FRAMES[name]] + (["payload"] if payload else [])
        df = self.read(name, cols)
        if df is None:
            return empty(name, self.run_ids)
        return conform(df[cols], name, self.run_ids)

    def transcripts(self) -> list[Transcript]:
        if not self.payload:
            raise TranscriptError(f"{self.root} holds frames only (written with payload=False): its runs cannot be "
                                  "rebuilt; ask for frames or sql() instead")
        df = self.read("events", ["run_id", "seq", "ts", "turn", "type", "state", "payload"])
        if df is None:
            return [Transcript([]) for _ in self.run_ids]
        runs: dict[str, list[BaseEvent]] = {r: [] for r in self.run_ids}
        cols = zip(df["run_id"].astype(str), df["seq"], df["ts"], df["turn"], df["type"].astype(str),
                   df["state"].astype(str), df["payload"], strict=True)
        with gc_paused():  # millions of events that all stay alive: nothing for the collector to find
            for run_id, seq, ts, turn, etype, state, payload in cols:
                head = json.dumps({"type": etype, "seq": int(seq), "ts": ts.isoformat(), "run_id": run_id,
                                   "turn": int(turn), "state": state}, ensure_ascii=False)
                text = head[:-1] + ("," + payload[1:] if payload != "{}" else "}")
                runs[run_id].append(event_from_json(text))
        return [Transcript(events) for events in runs.values()]
