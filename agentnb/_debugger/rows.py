"""The timeline's rows, as the page receives them: integer columns for every row, texts for the rows in sight.

Theory of operation. The page's timeline filters by type, state, turn, tool and status, and draws a row's
summary and time only while the row is in sight. So a row has two parts, sent differently:

- **Codes** -- type, state, turn, tool and status, each a small integer (an index into a vocabulary, a turn
  number). :class:`RowEncoder` keeps them in :class:`array.array` columns, computed once per event, and
  :meth:`RowEncoder.binary` sends a range of them as binary buffers beside a small JSON header (the
  vocabularies): a few bytes a row, so every row's codes go to the page and the filters stay in the page.
- **Texts** -- the one-line summary and the time (ms since the run began). A summary costs a few
  microseconds to write and tens of bytes to send, most of a row's cost, and nobody reads 100,000 of them:
  :meth:`RowEncoder.texts` writes them on demand, for the ranges the page asks for (the rows in sight and a
  margin), and keeps what it wrote. Short sends (a live run's new rows, a short run) carry their texts along.
- **Search** -- the search box's words match summaries the page may not have: :meth:`RowEncoder.search`
  answers the seqs that match, from every summary (written once, on the first search).

:meth:`RowEncoder.encode` is the old all-in-one JSON form (codes and texts as lists), which the
kernel-less views embed (:func:`.viewdata.static_bundle`, :mod:`.bundle`) and :meth:`Debugger.rows` returns.

Buffers are little-endian typed arrays (``u1``, ``u2``: 8- and 16-bit unsigned, ``i4``: 32-bit signed, ``f8``:
double), the byte order of every machine Python and the browser run on here; the header names each column's
type, the narrowest its values fit (a vocabulary's codes; the turns).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .._visible import visible
from ..events import BaseEvent
from . import cards

CODES = ("k", "s", "u", "t", "x")
"""The integer columns: type, state, turn, tool, status (indices into the vocabularies; the turn itself)."""

TEXTS_WITH_ROWS = 2_000
"""Rows sent with their texts at once: a live run's new rows, a short run (more: the page asks for them)."""

PER_MESSAGE = 250_000
"""Rows' codes per message (a few bytes each: a million rows go in four messages)."""

NEAR = 400
"""Rows before the selected event whose texts go with a long send (the tree's nodes: half as many), unasked:
what the page shows first (a quarter as many after it)."""

MAX_TEXTS = 20_000
"""Texts answered for one request at most (a page asks for what is in sight, and a margin)."""

assert sys.byteorder == "little", "the page reads the row buffers as little-endian typed arrays"


def event_tool(ev: BaseEvent) -> str:
    """The tool an event is about ("" for none)."""
    name = getattr(ev, "name", None)
    return name if isinstance(name, str) and hasattr(ev, "call_id") else ""


def ranges(asked: Any, n: int, cap: int = MAX_TEXTS) -> list[tuple[int, int]]:
    """The ``[start, end)`` ranges a page asked for, clipped to ``0..n``, at most ``cap`` items in all.

    Example:
        >>> ranges([[5, 9], [-3, 2], ["x", 1], [8, 20]], 10, cap=100)
        [(5, 9), (0, 2), (8, 10)]
    """
    out: list[tuple[int, int]] = []
    left = cap
    for r in asked if isinstance(asked, list) else []:
        if not (isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) for v in r)):
            continue
        a, b = max(0, r[0]), min(n, r[1], max(0, r[0]) + left)
        if b > a:
            out.append((a, b))
            left -= b - a
    return out


def _narrow(column: array[int], vocab: int | None) -> tuple[str, bytes]:
    """A column as bytes, 8- or 16-bit when its values allow it (``vocab``: how many there can be; None: look).

    Example:
        >>> [_narrow(array("i", v), None)[0] for v in ([3, 200], [0, 70_000], [-1, 5])]
        ['u1', 'i4', 'i4']
    """
    if vocab is None:  # the turn: look at the values
        vocab = max(column) + 1 if column and min(column) >= 0 else 1 << 31
    if vocab <= 0x100:
        return "u1", _low(column, "B")
    if vocab <= 0x10000:
        return "u2", _low(column, "H")
    return "i4", column.tobytes()


def _low(column: array[int], code: Literal["B", "H"]) -> bytes:
    """The low byte (``B``) or two bytes (``H``) of each 32-bit value, all of them known to fit.

    A strided view of the column's own bytes (one C copy) where the machine is little-endian, as every one a
    kernel runs on is; the conversion value by value else (a million values: ~0.1 s more).
    """
    if sys.byteorder != "little" or column.itemsize != 4:
        return array(code, column).tobytes()
    view = memoryview(column).cast("B").cast(code)
    return view[:: 4 // view.itemsize].tobytes()


@dataclass
class RowEncoder:
    """The rows of a growing log: codes for every event it has seen, texts as they are asked for.

    The codes of an event are computed once however often they are sent (a second view, a page reloaded): a
    log only grows, and each event's row depends on that event alone (and on the calls named before it).

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> events = run.start("Paris?").run().events
        >>> rows = RowEncoder().encode(events, 0, len(events))
        >>> rows["types"][rows["k"][0]], rows["m"][0][:9]
        ('RunStarted', 'scripted:')
    """

    types: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=lambda: [""])
    statuses: list[str] = field(default_factory=lambda: [""])
    codes: dict[str, array[int]] = field(default_factory=lambda: {c: array("i") for c in CODES})
    summaries: list[str | None] = field(default_factory=list)
    """Per event: its summary once written (None: not yet asked for)."""
    _codes: tuple[dict[str, int], ...] = field(default_factory=lambda: ({}, {}, {"": 0}, {"": 0}))
    _names: dict[str, str] = field(default_factory=dict)
    """Call id -> tool name, so an event that names only the call (an approval's answer) is the tool's too."""

    def __len__(self) -> int:
        return len(self.codes["k"])

    def extend(self, events: list[BaseEvent], end: int) -> None:
        """Compute the codes of the events up to ``end``.

        What an event class says once (its type's code, whether it names a call and a tool, how its status
        is read) is looked up once per class, not per event: a million events are a few dozen classes.
        """
        k, s, u, t, x = (self.codes[c] for c in CODES)
        type_codes, state_codes, tool_codes, status_codes = self._codes
        names = self._names

        def code(codes: dict[str, int], vocab: list[str], value: str) -> int:
            c = codes.get(value)
            if c is None:
                c = codes[value] = len(vocab)
                vocab.append(visible(value)[0])  # a tool name is the model's text: the page shows it written out
            return c

        classes: dict[type, tuple[int, bool, bool, Callable[[Any], str]]] = {}
        states: dict[Any, int] = {}
        k_add, s_add, u_add, t_add, x_add = k.append, s.append, u.append, t.append, x.append
        for ev in events[len(k):end]:
            cls = type(ev)
            known = classes.get(cls)
            if known is None:
                spec = cards.CARDS.get(cls)
                known = classes[cls] = (code(type_codes, self.types, ev.type), hasattr(ev, "call_id"),
                                        hasattr(ev, "name"), spec.status if spec is not None else cards.event_status)
            kc, calls, named, status_of = known
            k_add(kc)
            sc = states.get(ev.state)
            if sc is None:
                sc = states[ev.state] = code(state_codes, self.states, ev.state.value)
            s_add(sc)
            u_add(ev.turn)
            tool = ""
            if calls:
                call_id = ev.call_id  # type: ignore[attr-defined]
                name = ev.name if named else None  # type: ignore[attr-defined]
                tool = name if isinstance(name, str) else ""
                if isinstance(call_id, str):
                    if tool:
                        names[call_id] = tool
                    else:
                        tool = names.get(call_id, "")
            tc = tool_codes.get(tool)
            t_add(tc if tc is not None else code(tool_codes, self.tools, tool))
            status = status_of(ev)
            xc = status_codes.get(status)
            x_add(xc if xc is not None else code(status_codes, self.statuses, status))
        self.summaries.extend([None] * (len(k) - len(self.summaries)))

    def _vocab(self) -> dict[str, Any]:
        return {"types": self.types, "states": self.states, "tools": self.tools, "statuses": self.statuses,
                "type_classes": [cards.kind_class(n) for n in self.types]}

    def texts(self, events: list[BaseEvent], start: int, end: int) -> tuple[list[str], list[float]]:
        """The summaries and times (ms since the run began) of events ``start`` to ``end``, written once."""
        if end > len(self):
            self.extend(events, end)
        out = self.summaries
        for seq in range(start, end):
            if out[seq] is None:
                out[seq] = cards.summary_text(events[seq])
        t0 = events[0].ts.timestamp() if events else 0.0
        times = [round((ev.ts.timestamp() - t0) * 1000, 1) for ev in events[start:end]]
        return [m or "" for m in out[start:end]], times

    def encode(self, events: list[BaseEvent], start: int, end: int) -> dict[str, Any]:
        """Rows ``start`` to ``end`` (exclusive) as JSON lists, codes and texts, with the vocabularies so far."""
        if end > len(self):
            self.extend(events, end)
        m, w = self.texts(events, start, end)
        last = events[end - 1] if end > start else None
        return {"kind": "rows", "start": start, **self._vocab(),
                **{c: self.codes[c][start:end].tolist() for c in CODES}, "m": m, "w": w,
                "ts_last": last.ts.timestamp() * 1000 if last is not None else None}

    def binary(self, events: list[BaseEvent], start: int, end: int,
               texts: bool | None = None) -> tuple[dict[str, Any], list[bytes]]:
        """Rows ``start`` to ``end``: the codes as buffers (one per column, in ``cols`` order) and a header.

        ``texts``: send the summaries and times too (default: when there are at most :data:`TEXTS_WITH_ROWS`).
        """
        if end > len(self):
            self.extend(events, end)
        sizes = {"k": len(self.types), "s": len(self.states), "u": None, "t": len(self.tools),
                 "x": len(self.statuses)}
        cols, buffers = [], []
        for c in CODES:
            dtype, data = _narrow(self.codes[c][start:end], sizes[c])
            cols.append([c, dtype])
            buffers.append(data)
        last = events[end - 1] if end > start else None
        content: dict[str, Any] = {"kind": "rows", "start": start, "end": end, **self._vocab(), "cols": cols,
                                   "ts_last": last.ts.timestamp() * 1000 if last is not None else None}
        if texts if texts is not None else end - start <= TEXTS_WITH_ROWS:
            content["m"], content["w"] = self.texts(events, start, end)
        return content, buffers

    def answer(self, events: list[BaseEvent], asked: Any) -> dict[str, Any]:
        """The texts of the ranges a page asked for (``[[start, end], ...]``), as one message's fields."""
        got = ranges(asked, len(events))
        m: list[str] = []
        w: list[float] = []
        for a, b in got:
            ms, ws = self.texts(events, a, b)
            m += ms
            w += ws
        return {"rows": [list(r) for r in got], "m": m, "w": w}

    def search(self, events: list[BaseEvent], words: Iterable[str]) -> array[int]:
        """The seqs whose summary or type holds every word (lower case), as the page's search box matches."""
        words = [str(w).lower() for w in words if str(w)]
        n = len(events)
        self.texts(events, 0, n)
        types = [t.lower() for t in self.types]
        k = self.codes["k"]
        out = array("i")
        for seq, m in enumerate(self.summaries[:n]):
            low = (m or "").lower()
            kind = types[k[seq]]
            if all(w in low or w in kind for w in words):
                out.append(seq)
        return out


def answer(rows: RowEncoder, labels: Callable[[Any], dict[str, Any]], events: list[BaseEvent],
           content: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    """The answer to a page's ``texts?`` (rows' texts, and ``labels`` of tree nodes) or ``search?`` (the seqs)."""
    if content.get("kind") == "texts?":
        return {"kind": "texts", **rows.answer(events, content.get("rows")), **labels(content.get("nodes"))}, []
    words = content.get("words")
    words = [w for w in words if isinstance(w, str)] if isinstance(words, list) else []
    seqs = rows.search(events, words)
    return {"kind": "found", "id": content.get("id"), "words": words, "n": len(events)}, [seqs.tobytes()]
