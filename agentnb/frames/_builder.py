"""From aligned row lists to typed pandas columns, one column at a time.

For each declared column the builder reads one list of Python values (``operator.attrgetter`` over the
column's field: a C loop) and turns it into a pandas array of the declared dtype directly: integers and
floats into numpy buffers plus a null mask, categories into integer codes against a vocabulary, strings into
a string array, timestamps through one ``DatetimeIndex``. No per-row dict is ever built, which is what makes
this several times faster than ``pandas.DataFrame([event_to_dict(e) for e in events])``
(``bench/frames.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from .._gc import gc_paused
from ._columns import DATETIME, EVENTS, EVENTS_PAYLOAD, FRAMES, Column
from ._rows import ROW_BUILDERS, Log, Rows, Run

if TYPE_CHECKING:
    import pandas as pd


@functools.cache
def string_dtype() -> Any:
    """Strings with ``<NA>``, stored as Python objects: faster to build from Python strings than Arrow storage."""
    import pandas as pd

    return pd.StringDtype("python")


def _attribute(items: list[Any], name: str) -> list[Any]:
    """Attribute ``name`` of every item (None for a None item, and for one without the attribute)."""
    try:
        return list(map(attrgetter(name), items))  # every item has the attribute: one C loop
    except AttributeError:
        pass
    if not hasattr(None, name):  # None reads as None: no test per item
        return [getattr(x, name, None) for x in items]
    return [getattr(x, name, None) if x is not None else None for x in items]  # pragma: no cover


class Reader:
    """Attribute paths read over a frame's fields, each prefix once.

    ``TurnCompleted.response`` is read one time for the dozen columns under it (``response.model``,
    ``response.usage.input_tokens`` ...). A path reads as None where an item is None or lacks an attribute on
    the way.
    """

    def __init__(self, rows: Rows) -> None:
        self.fields = rows.fields
        self._read: dict[tuple[str, str], list[Any]] = {}

    def read(self, field: str, path: str | None) -> list[Any]:
        """``path`` read on every item of ``field`` (``field`` itself for no path)."""
        if path is None:
            return self.fields[field]
        got = self._read.get((field, path))
        if got is None:
            head, _, name = path.rpartition(".")
            got = self._read[(field, path)] = _attribute(self.read(field, head or None), name)
        return got


def values(col: Column, rows: Rows, reader: Reader | None = None) -> list[Any]:
    """The Python values of one column over the rows (before dtype conversion).

    ``reader``: one :class:`Reader` for all the columns of ``rows``, so that shared path prefixes are read once.
    """
    n = len(rows)
    if col.source is None:
        return [None] * n
    field = col.field
    assert field is not None
    out = (reader or Reader(rows)).read(field, col.path)
    fn = col.value
    if fn is not None:
        out = [fn(v) if v is not None else None for v in out]
    return out


def _masked(vals: list[Any], dtype: Any) -> tuple[Any, Any]:
    arr = np.fromiter(vals, dtype=object, count=len(vals))  # no look for nested sequences, unlike np.array
    mask = arr == None  # noqa: E711 -- elementwise comparison
    if mask.any():
        arr[mask] = 0
    return arr.astype(dtype), mask


@functools.cache
def _string_array() -> Any:
    """``StringArray`` of :func:`string_dtype` from an object array of strings and None (pandas 2 and 3)."""
    import inspect

    import pandas as pd

    make: Any = pd.arrays.StringArray
    if "dtype" in inspect.signature(make).parameters:  # pandas 3 (whose default storage is Arrow's)
        return functools.partial(make, dtype=string_dtype())
    return make


def _strings(vals: list[Any]) -> Any:
    """A string array of ``vals``.

    The values are checked in C (strings or None) and wrapped as they are, not converted one by one: three
    times faster than ``pd.array``, which stays the way for anything else.
    """
    import pandas as pd

    try:
        out = _string_array()(np.fromiter(vals, dtype=object, count=len(vals)))
    except ValueError:  # something else than a string: pd.array converts it to one, as it always did
        out = None
    if out is None or out.dtype != string_dtype():
        out = pd.array(vals, dtype=string_dtype())
    return out


def _codes(vals: list[Any], categories: tuple[str, ...] | None) -> tuple[Any, list[str]]:
    """Integer codes of ``vals`` against a fixed vocabulary, or a sorted one built from the values.

    The values are factorized by identity first (``id`` into an int64 buffer, then one C hash table): event
    types, loop states and names shared by a run's events are the same few objects, and enum members hash in
    Python, so this is several times faster than hashing the values. Equal values that are distinct objects
    only add uniques, merged by name below; with too many of them, the values are factorized by equality.
    """
    import pandas as pd

    n = len(vals)
    raw, uniques = pd.factorize(np.fromiter(map(id, vals), np.int64, n))
    if len(uniques) <= 4096:
        first = np.empty(len(uniques), dtype=np.int64)
        first[raw[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
        objects = [vals[i] for i in first.tolist()]
    else:
        raw, found = pd.factorize(np.array(vals, dtype=object), use_na_sentinel=True)
        objects = list(found)
    names = [None if o is None else str(o) for o in objects]
    present = sorted({x for x in names if x is not None})
    if categories is not None:
        lookup = {c: i for i, c in enumerate(categories)}
        unknown = [x for x in present if x not in lookup]
        if unknown:
            raise ValueError(f"values {unknown} are outside the vocabulary {list(categories)}")
        cats = list(categories)
    else:
        cats = present
        lookup = {c: i for i, c in enumerate(cats)}
    remap = np.array([*(lookup[x] if x is not None else -1 for x in names), -1], dtype=np.int32)
    return remap[raw], cats


def to_array(col: Column, vals: list[Any]) -> Any:
    """One column's values as a pandas array of its declared dtype."""
    import pandas as pd

    dtype = col.dtype
    if dtype == "Int64":
        try:  # no nulls: straight into an int64 buffer
            return pd.arrays.IntegerArray(np.fromiter(vals, dtype=np.int64, count=len(vals)),
                                          np.zeros(len(vals), dtype=np.bool_))
        except TypeError:
            data, mask = _masked(vals, np.int64)
            return pd.arrays.IntegerArray(data, mask)
    if dtype == "Float64":
        data, mask = _masked(vals, np.float64)
        return pd.arrays.FloatingArray(data, mask)
    if dtype == "boolean":
        data, mask = _masked(vals, np.bool_)
        return pd.arrays.BooleanArray(data, mask)
    if dtype == "category":
        codes, cats = _codes(vals, col.categories)
        return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype="str"))
    if dtype == "string":
        return _strings(vals)
    if dtype == "datetime":
        try:
            # from an object array: pandas would look into a list for nested sequences first
            idx = (pd.DatetimeIndex(np.fromiter(vals, dtype=object, count=len(vals))) if len(vals)
                   else pd.DatetimeIndex([], dtype=DATETIME))
        except ValueError:  # a resumed run mixes tz objects (datetime.UTC, pydantic's TzInfo(0) from the log)
            idx = pd.DatetimeIndex(pd.to_datetime(vals, utc=True))
        if idx.tz is None:
            idx = idx.tz_localize("UTC")
        return idx.tz_convert("UTC").as_unit("us").array
    raise ValueError(f"column {col.name!r}: unknown dtype {dtype!r}")  # pragma: no cover


def _run_ids(run_index: Any, run_ids: Sequence[str]) -> Any:
    import pandas as pd

    codes = np.asarray(run_index, dtype=np.int32) if len(run_index) else np.array([], dtype=np.int32)
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(dict.fromkeys(run_ids)), dtype="str"))


def build(name: str, runs: Sequence[Run], *, run_ids: Sequence[str] | None = None,
          extra: Sequence[Column] = (), log: Log | None = None) -> pd.DataFrame:
    """Build frame ``name`` over ``runs`` (each a list of one run's events).

    Args:
        name: one of :data:`~agentnb.frames._columns.FRAME_NAMES`.
        runs: the runs' events.
        run_ids: the runs' ids, in the order of ``runs`` (read from their first events when omitted).
        extra: columns to add after the declared ones (their sources read this frame's fields).
        log: ``Log(runs)``, when several frames are built from the same runs (it is built once, not per frame).

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> events = run.start("Paris?", run_id="r1").run().events
        >>> build("calls", [events])[["run_id", "tool", "status"]]
          run_id         tool status
        0     r1  get_weather     ok
    """
    import pandas as pd

    try:
        columns = FRAMES[name]
    except KeyError:
        raise KeyError(f"no frame {name!r}; frames: {', '.join(FRAMES)}") from None
    if run_ids is None:
        run_ids = [r[0].run_id if len(r) else "" for r in runs]
    # millions of short-lived lists and keys, no cycle among them: the collector would walk every live event for
    # nothing, again and again (as much time as the frame itself)
    with gc_paused():
        rows = ROW_BUILDERS[name](log if log is not None else Log(runs))
        reader = Reader(rows)
        data: dict[str, Any] = {}
        for col in (*columns, *extra):
            if col.name == "run_id":
                data[col.name] = _run_ids(rows.run_index, run_ids)
            else:
                data[col.name] = to_array(col, values(col, rows, reader))
        return pd.DataFrame(data, copy=False)


_COMMON = {"seq", "ts", "run_id", "turn", "state", "type"}


_NO_WIRE: dict[str, Any] = {**dict.fromkeys(_COMMON, True), "response": {"wire": True}}
"""What a turn's payload leaves out besides the common fields: its HTTP capture (large; asked for with wire=)."""
_NO_FAILED_WIRE: dict[str, Any] = {**dict.fromkeys(_COMMON, True), "wire": True}
"""The same for a failed or broken request's capture, on ``ModelRetried`` and ``RunFinished``."""


def payloads(events: list[Any], *, wire: bool = False, log: Log | None = None) -> list[str]:
    """Each event's own fields (all but the common ones) as compact JSON text; HTTP captures only if asked.

    The events of each class are serialized together (:func:`~agentnb.events.json_texts`: one call of pydantic's
    serializer per batch); ``log``: the events' :class:`Log`, if made already (its class codes are reused).
    """
    from ..events import ModelRetried, RunFinished, TurnCompleted, json_texts

    log = log if log is not None and log.flat is events else Log([events])
    out = np.empty(len(events), dtype=object)
    for code, cls in enumerate(log.classes):
        at = np.flatnonzero(log.codes == code)
        # the log's encoding: NaN kept, surrogates escaped; HTTP captures (large) only with wire=True
        exclude = _COMMON if wire else _NO_WIRE if cls is TurnCompleted else _NO_FAILED_WIRE if cls in (
            ModelRetried, RunFinished) else _COMMON
        texts = json_texts(log.take(at), exclude=exclude)
        out[at] = np.fromiter(texts, dtype=object, count=len(texts))
    texts_in_order: list[str] = out.tolist()
    return texts_in_order


def events_with_payload(runs: Sequence[Run], run_ids: Sequence[str] | None = None, *,
                        wire: bool = False, log: Log | None = None) -> pd.DataFrame:
    """The events frame plus the ``payload`` column (each event's own fields as JSON).

    ``wire=True`` keeps the HTTP captures (a turn's ``response.wire``, a failed request's ``wire``) in their
    payloads; they are left out otherwise. ``log``: ``Log(runs)``, if made already.
    """
    log = log if log is not None else Log(runs)
    df = build("events", runs, run_ids=run_ids, log=log)
    with gc_paused():
        df[EVENTS_PAYLOAD.name] = to_array(EVENTS_PAYLOAD, payloads(log.flat, wire=wire, log=log))
    return df


def empty(name: str, run_ids: Sequence[str] = ()) -> pd.DataFrame:
    """Frame ``name`` with no rows (its columns and dtypes only)."""
    return build(name, [], run_ids=run_ids)


def conform(df: pd.DataFrame, name: str, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """``df`` (read back from a file) with the declared column order and dtypes of frame ``name``."""
    import pandas as pd

    cols = FRAMES[name] + ((EVENTS_PAYLOAD,) if name == "events" and EVENTS_PAYLOAD.name in df else ())
    out: dict[str, Any] = {}
    for col in cols:
        s = df[col.name]
        if col.dtype == "category":
            if col.name == "run_id" and run_ids is not None:
                cats = list(dict.fromkeys(run_ids))
            elif col.categories is not None:
                cats = list(col.categories)
            else:
                cats = sorted({str(v) for v in s.dropna().unique()})
            if not isinstance(s.dtype, pd.CategoricalDtype):
                s = s.astype(object).where(s.notna(), None).astype("category")
            s = s.cat.set_categories(pd.Index(cats, dtype="str"))
            out[col.name] = s.array
        elif col.dtype == "datetime":
            out[col.name] = s.array if str(s.dtype) == DATETIME else pd.to_datetime(s, utc=True).dt.as_unit("us").array
        elif col.dtype == "string":
            out[col.name] = s.array if s.dtype == string_dtype() else s.astype(string_dtype()).array
        else:
            out[col.name] = s.array if str(s.dtype) == col.dtype else s.astype(col.dtype).array
    return pd.DataFrame(out)


__all__ = ["EVENTS", "Reader", "build", "conform", "empty", "events_with_payload", "payloads", "to_array", "values"]
