"""The timeline as a tree: run → turn → (the model call, its fragments folded; each tool call), with times.

Theory of operation. The flat timeline lists every event; half of a streamed run's events are fragments. The
tree groups them the way a reader thinks of a run, the way span viewers do: the run holds its turns; a turn
holds each model call (``ModelRequested`` up to ``TurnCompleted``, with the fragments and retries between)
and each tool call (``CallParsed``, ``CallValidated`` or ``CallRejected``, the approval, ``ToolStarted``,
``ToolFinished``: keyed by its call id, so parallel calls are separate nodes however their events
interleave); what belongs to no call (results bound, a guard, a compression, an interjection) stays in its
turn, the start and the end in the run.

Every *group* is a node with the seqs of its first and last event, its start and end in milliseconds since
the run began (wall time, from the events' stamps: the waterfall), its tokens and cost (the model calls'
usage, added up the tree, priced by the rule the budget applies), a status and, for a tool call, the span it
ran (``ToolStarted`` to ``ToolFinished``) and its effect mark. Events are the leaves: each names the group it
belongs to (``g``), so the front end lays the tree out from two arrays and never interprets an event.

:class:`TreeEncoder` builds the tree event by event (a live run only appends) and says which nodes changed
since it last encoded, so a live page receives the nodes that grew and the leaves that are new. It reads the
events and the card table's statuses and summaries (:mod:`.cards`): the one reading of what an event means.

:class:`SentTree` is the tree a debugger's pages are sent. A short log's is built at once, with the rows; a
long one's (more than :data:`SentTree.AT_ONCE` events: a million take seconds) by a :class:`Building`, in a
thread of its own that holds no lock while it places the events, so the page shows the flat list, and its
clicks are answered, meanwhile. The nodes follow the events' order and the log only grows, so the thread
builds the tree of the events there are, encodes it whole, and hands it over under the debugger's lock, where
the events a live run appended meanwhile are placed as a live update places them: the tree the page gets is
the one built in one go.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._engine.prices import cost
from .._engine.projection import ANSWERS, answer_of
from .._gc import gc_paused
from .._visible import visible
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallParsed,
    GuardTripped,
    ModelRequested,
    ModelRetried,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
)
from ..providers._prices import recorded_table
from . import cards
from .render import short
from .rows import NEAR, ranges

FRAGMENTS = (TextMerged, ArgumentsMerged)
"""The events folded into their model call's row."""

_FRAGMENT_CLASSES: frozenset[type] = frozenset(FRAGMENTS)
_MODEL_CLASSES: frozenset[type] = frozenset({TextMerged, ArgumentsMerged, ModelRetried, TurnCompleted})

FIELDS = ("i", "p", "d", "n", "l", "a", "b", "t0", "t1", "tok", "c", "x", "tool", "e", "x0", "x1", "f")
"""A node record's fields, in order: index, parent (-1: the root), depth, kind (``run``, ``turn``, ``model``,
``call``), label, first and last seq, start and end (ms since the run's first event), tokens, cost (US
dollars, None when unpriced), status, tool, effect mark, the span the tool ran (ms; None before it started),
fragments folded (a model call)."""


@dataclass(slots=True)
class Node:
    """One group of the tree (see the module docstring)."""

    i: int
    parent: int
    depth: int
    kind: str
    label: str
    first: int
    last: int
    start_ms: float
    end_ms: float
    tokens: int = 0
    cost: float | None = 0.0
    status: str = ""
    tool: str = ""
    effect: str = ""
    ran: tuple[float | None, float | None] = (None, None)
    fragments: int = 0

    def record(self) -> list[Any]:
        """The node as the page receives it (:data:`FIELDS`)."""
        return [self.i, self.parent, self.depth, self.kind, self.label, self.first, self.last,
                round(self.start_ms, 3), round(self.end_ms, 3), self.tokens,
                None if self.cost is None else round(self.cost, 8), self.status, self.tool, self.effect,
                None if self.ran[0] is None else round(self.ran[0], 3),
                None if self.ran[1] is None else round(self.ran[1], 3), self.fragments]


@dataclass
class TreeEncoder:
    """Builds the tree of a growing log and encodes what changed (see the module docstring).

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
        >>> events = loop.start("Weather in Paris and Rome?").run().events
        >>> tree = TreeEncoder()
        >>> msg = tree.encode(events, 0, len(events))
        >>> [n.kind for n in tree.nodes][:5]
        ['run', 'turn', 'model', 'call', 'call']
        >>> len(msg["g"]) == len(events)
        True
    """

    nodes: list[Node] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    """Per event: the node it belongs to."""
    _turns: dict[int, int] = field(default_factory=dict)
    _model: dict[int, int] = field(default_factory=dict)
    _calls: dict[tuple[int, str], int] = field(default_factory=dict)
    _dirty: set[int] = field(default_factory=set)
    _t0: float = 0.0
    _prices: Any = None
    _table: Any = None
    _fresh: set[int] = field(default_factory=set)
    """Nodes whose last seq or end moved since :meth:`_settle` carried them to their ancestors."""
    _vocab: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per string field of the binary form: its values met so far, in the order of their codes."""

    def _node(self, parent: int, kind: str, label: str, ev: BaseEvent, at: float, **more: Any) -> int:
        i = len(self.nodes)
        depth = self.nodes[parent].depth + 1 if parent >= 0 else 0
        self.nodes.append(Node(i, parent, depth, kind, label, ev.seq, ev.seq, at, at, **more))
        self._dirty.add(i)
        return i

    def _turn(self, ev: BaseEvent, at: float) -> int:
        i = self._turns.get(ev.turn)
        if i is None:
            i = self._turns[ev.turn] = self._node(0, "turn", f"turn {ev.turn}", ev, at)
        return i

    def _group(self, ev: BaseEvent, at: float) -> int:
        """The node ``ev`` belongs to, made when it is the first of its group."""
        cls = type(ev)
        if cls in _FRAGMENT_CLASSES:  # half a streamed run: the shortest way
            model = self._model.get(ev.turn)
            if model is not None:
                return model
        if cls is RunStarted or cls is RunFinished or not self.nodes:
            return 0
        if cls is ModelRequested:
            turn = self._turn(ev, at)
            label = "model call · finalization" if ev.finalize else "model call"  # type: ignore[attr-defined]
            model = self._model[ev.turn] = self._node(turn, "model", label, ev, at)
            return model
        if cls in _MODEL_CLASSES and ev.turn in self._model:
            return self._model[ev.turn]
        call_id = getattr(ev, "call_id", None)
        if isinstance(call_id, str) and not call_id.startswith("guard:") and cls is not ArgumentsMerged:
            key = (ev.turn, call_id)
            found = self._calls.get(key)
            if found is None:
                name = getattr(ev, "name", None) or "?"
                label = visible(str(name))[0]
                args = getattr(ev, "arguments", None)
                if isinstance(ev, CallParsed) and args is not None:
                    shown = ", ".join(f"{k}={json.dumps(cards.jsonable(v), ensure_ascii=False)}"
                                      for k, v in args.items())
                    label = f"{label}({visible(short(shown, 60))[0]})"
                found = self._calls[key] = self._node(self._turn(ev, at), "call", label, ev, at,
                                                      tool=visible(str(name))[0])
            return found
        return self._turn(ev, at)

    def _grow(self, i: int, seq: int, at: float) -> None:
        # events come in order: the group's last event is this one, its end the latest stamp; its ancestors
        # follow when the tree is read (:meth:`_settle`), once per changed node rather than once per event
        node = self.nodes[i]
        node.last = seq
        if node.end_ms < at:
            node.end_ms = at
        self._fresh.add(i)

    def _settle(self) -> None:
        """Carry the moved nodes' last seq and end up to their ancestors, which change with them.

        A level at a time: each parent from every moved child, then the parents' parents.
        """
        nodes = self.nodes
        level = self._fresh
        self._fresh = set()
        while level:
            self._dirty |= level
            up: set[int] = set()
            for i in level:
                node = nodes[i]
                j = node.parent
                if j >= 0:
                    parent = nodes[j]
                    if parent.last < node.last:
                        parent.last = node.last
                    if parent.end_ms < node.end_ms:
                        parent.end_ms = node.end_ms
                    up.add(j)
            level = up

    def _add_usage(self, i: int, tokens: int, spent: float | None) -> None:
        while i >= 0:
            node = self.nodes[i]
            node.tokens += tokens
            node.cost = None if node.cost is None or spent is None else node.cost + spent
            self._dirty.add(i)
            i = node.parent

    def _priced(self, turn: TurnCompleted) -> float | None:
        u = turn.response.usage
        return cost([((turn.response.provider, turn.response.model), (u.input_tokens, u.output_tokens))],
                    self._prices or {}, self._table)

    def _start(self, ev: BaseEvent, at: float) -> None:
        """The root, from the log's first event: the run, its model, its prices, the fork it is."""
        self._t0 = at
        settings = getattr(ev, "settings", {}) or {}
        budget = settings.get("budget") or {}
        self._prices = budget.get("prices") or {}
        self._table = recorded_table(budget.get("price_table", ""))
        model = visible(str(getattr(ev, "model", "") or ""))[0]
        fork = settings.get("fork") if isinstance(ev, RunStarted) else None
        label = f"run {visible(ev.run_id)[0]}" + (f" · {model}" if model else "")
        if isinstance(fork, dict):
            label += f" · fork of {visible(str(fork.get('parent')))[0]} at event {fork.get('at')}"
        self._node(-1, "run", label, ev, 0.0)

    def add(self, ev: BaseEvent) -> None:
        """Place one more event in the tree."""
        at = ev.ts.timestamp() * 1000
        i = self._model.get(ev.turn) if type(ev) in _FRAGMENT_CLASSES else None
        if i is not None:  # a fragment of the model call that is streaming (half a streamed run): the shortest way
            at -= self._t0
            self.groups.append(i)
            node = self.nodes[i]
            node.last = ev.seq
            if node.end_ms < at:
                node.end_ms = at
            node.fragments += 1
            self._fresh.add(i)
            return
        if not self.nodes:
            self._start(ev, at)
        at -= self._t0
        i = self._group(ev, at)
        self.groups.append(i)
        self._grow(i, ev.seq, at)
        node = self.nodes[i]
        cls = type(ev)
        if cls in _FRAGMENT_CLASSES:
            node.fragments += 1
            return
        if isinstance(ev, TurnCompleted):
            u = ev.response.usage
            self._add_usage(i, u.input_tokens + u.output_tokens, self._priced(ev))
            node.status = ev.response.finish_reason
            n = len(ev.response.message.tool_calls)
            node.label += f" · {n} call{'s' if n != 1 else ''}" if n else " · answer"
        elif isinstance(ev, ModelRetried):
            node.status = "retry"
        elif isinstance(ev, ToolStarted):
            node.ran = (at, None)
        elif isinstance(ev, ToolFinished):
            node.ran = (node.ran[0] if node.ran[0] is not None else at - ev.duration_s * 1000, at)
            node.status = ev.status
            node.effect = ev.effect or ""
        elif isinstance(ev, ApprovalRequested):
            node.status = "waiting"
        elif isinstance(ev, ApprovalResolved) and ev.decision != "approved":
            node.status = ev.decision
        elif isinstance(ev, RunFinished):
            node.status = ev.final.value
        elif isinstance(ev, GuardTripped) and node.kind == "turn":
            node.status = "guard"
        if cls in ANSWERS and node.kind == "call":  # a call's status is the fold's answer to it (a skip included)
            answer = answer_of(ev)
            if answer is not None:
                node.status = answer.status

    def prepare(self, events: list[BaseEvent], end: int) -> None:
        """Place the events up to ``end`` (what :meth:`encode` will send does not change)."""
        while len(self.groups) < end:
            self.add(events[len(self.groups)])
        self._settle()

    def _changed(self, events: list[BaseEvent], start: int, end: int) -> range | list[int]:
        self.prepare(events, end)
        changed = range(len(self.nodes)) if start == 0 else sorted(self._dirty)
        self._dirty.clear()
        return changed

    def encode(self, events: list[BaseEvent], start: int, end: int) -> dict[str, Any]:
        """The groups of events ``start`` to ``end`` and every node new or changed since the last encode.

        From ``start == 0`` (a page starting over) every node is sent.
        """
        changed = self._changed(events, start, end)
        return {"kind": "tree", "start": start, "g": self.groups[start:end], "fields": FIELDS,
                "nodes": [self.nodes[i].record() for i in changed]}

    def binary(self, events: list[BaseEvent], start: int, end: int,
               labels: bool | None = None) -> tuple[dict[str, Any], list[bytes]]:
        """What :meth:`encode` says, as binary columns (see :func:`columns`); labels only when ``labels``.

        Default: the labels go along when at most :data:`LABELS_WITH_NODES` nodes changed (a live run's
        update); else the page asks for those of the nodes in sight (:meth:`labels`).
        """
        changed = self._changed(events, start, end)
        with_labels = labels if labels is not None else len(changed) <= LABELS_WITH_NODES
        content, buffers = columns([self.nodes[i] for i in changed], self._vocab)
        content.update(kind="tree", start=start, end=end, count=len(self.nodes))
        if with_labels:
            content["l"] = [self.nodes[i].label for i in changed]
        buffers.insert(0, array("i", self.groups[start:end]).tobytes())
        return content, buffers

    def labels(self, asked: Any) -> dict[str, Any]:
        """The labels of the node ranges a page asked for (``[[first, end], ...]``), as one message's fields."""
        got = ranges(asked, len(self.nodes))
        return {"nodes": [list(r) for r in got], "l": [self.nodes[i].label for a, b in got for i in range(a, b)]}


LABELS_WITH_NODES = 1_000
"""Changed nodes sent with their labels at once (more: the page asks for the labels of the nodes in sight)."""

INT_FIELDS = ("i", "p", "d", "a", "b", "f")
FLOAT_FIELDS = ("t0", "t1", "tok", "c", "x0", "x1")
CODE_FIELDS = ("n", "x", "tool", "e")
"""A node's fields as binary columns: integers (32-bit), times, tokens and cost (doubles, NaN for None), and
strings as indices into a vocabulary per field (32-bit)."""


def columns(nodes: list[Node], vocab: dict[str, dict[str, int]]) -> tuple[dict[str, Any], list[bytes]]:
    """Nodes as one buffer per field, and a header with each string field's vocabulary.

    The buffers are :data:`INT_FIELDS`, :data:`FLOAT_FIELDS` and :data:`CODE_FIELDS`, in that order; ``vocab``
    grows with the strings met, so a code keeps its meaning from one message to the next.
    """
    nan = float("nan")
    ints: list[array[int]] = [array("i", [n.i for n in nodes]), array("i", [n.parent for n in nodes]),
            array("i", [n.depth for n in nodes]), array("i", [n.first for n in nodes]),
            array("i", [n.last for n in nodes]), array("i", [n.fragments for n in nodes])]
    floats: list[array[float]] = [array("d", [n.start_ms for n in nodes]), array("d", [n.end_ms for n in nodes]),
              array("d", [n.tokens for n in nodes]),
              array("d", [nan if n.cost is None else n.cost for n in nodes]),
              array("d", [nan if n.ran[0] is None else n.ran[0] for n in nodes]),
              array("d", [nan if n.ran[1] is None else n.ran[1] for n in nodes])]
    codes: list[array[int]] = []
    for name, attr in zip(CODE_FIELDS, ("kind", "status", "tool", "effect"), strict=True):
        known = vocab.setdefault(name, {})
        values = [getattr(n, attr) for n in nodes]
        for v in dict.fromkeys(values):
            known.setdefault(v, len(known))
        codes.append(array("i", map(known.__getitem__, values)))
    header = {"ints": INT_FIELDS, "floats": FLOAT_FIELDS, "codes": CODE_FIELDS,
              "vocab": {name: list(vocab.get(name, {})) for name in CODE_FIELDS}}
    return header, [a.tobytes() for a in ints] + [a.tobytes() for a in floats] + [a.tobytes() for a in codes]


def tree_of(events: list[BaseEvent]) -> TreeEncoder:
    """The whole tree of a log (for tests and the kernel-less views)."""
    tree = TreeEncoder()
    tree.encode(events, 0, len(events))
    return tree


def outline(events: list[BaseEvent], *, fragments: bool = False) -> list[str]:
    """The tree in text, one line per node (and event leaf), indented: what the page shows expanded.

    ``fragments=False`` folds a model call's fragments as the page does by default.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> lines = outline(loop.start("Paris?").run().events)
        >>> lines[0].startswith("run "), lines[2].strip(), lines[3].strip().startswith("model call")
        (True, 'turn 1', True)
    """
    tree = tree_of(events)
    kids: dict[int, list[tuple[int, str, int]]] = {}
    for node in tree.nodes[1:]:
        kids.setdefault(node.parent, []).append((node.first, "node", node.i))
    for seq, g in enumerate(tree.groups):
        kids.setdefault(g, []).append((seq, "event", seq))
    lines: list[str] = []

    def walk(i: int) -> None:
        node = tree.nodes[i]
        lines.append("  " * node.depth + f"{node.label} [{node.status}]".replace(" []", ""))
        for _, what, j in sorted(kids.get(i, []), key=lambda k: (k[0], k[1] != "node")):
            if what == "node":
                walk(j)
            elif fragments or not isinstance(events[j], FRAGMENTS):
                lines.append("  " * (node.depth + 1) + f"{j} {events[j].type}")

    walk(0)
    return lines


class Building:
    """The tree of a long log, built in a thread of its own a chunk at a time, holding no lock (module docstring).

    It places the events there are (a live run may append more meanwhile: it goes on until it has caught up),
    encodes the tree whole, then calls ``done`` with itself -- :attr:`tree`, :attr:`end` (the events it
    holds), :attr:`encoded` (:meth:`TreeEncoder.binary` from 0 to :attr:`end`) or :attr:`error`.
    """

    CHUNK = 20_000
    """Events placed between two looks at :meth:`stop` (where the other threads are let in, too)."""

    def __init__(self, events: list[BaseEvent], done: Callable[[Building], None],
                 before: Callable[[], object] = lambda: None) -> None:
        self.events = events
        self._before = before
        self.tree = TreeEncoder()
        self.end = 0
        self.encoded: tuple[dict[str, Any], list[bytes]] | None = None
        self.error = ""
        self.finished = threading.Event()
        """Set when the thread is over (done, stopped or failed)."""
        self._stop = threading.Event()
        self._done = done
        self._thread = threading.Thread(target=self._run, name="agentnb-tree", daemon=True)

    def start(self) -> Building:
        """Start the thread (and return this building)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop at the next chunk (the log it builds is no longer shown); ``done`` is not called."""
        self._stop.set()

    def _run(self) -> None:
        try:
            try:
                self._before()  # the thread's first work (a loaded log's time-travel index: widget.py)
            except Exception as exc:  # a thread's error would go unseen; the queries build what they need
                warnings.warn(f"agentnb: the work before the tree failed: {type(exc).__name__}: {exc}",
                              RuntimeWarning, stacklevel=1)
            self._build()
            if not self._stop.is_set():
                self._done(self)
        finally:
            self.finished.set()

    def _build(self) -> None:
        events, tree = self.events, self.tree
        try:
            # the collector paused, as for the fold (gc_paused): the nodes all stay alive, and a collection would
            # walk the heap for nothing (a million events': seconds, holding up the threads that answer the page)
            with gc_paused():
                while len(tree.groups) < len(events):
                    time.sleep(0)  # let the other threads in between two chunks
                    if self._stop.is_set():
                        return
                    tree.prepare(events, min(len(events), len(tree.groups) + self.CHUNK))
                self.end = len(tree.groups)
                self.encoded = tree.binary(events, 0, self.end)
        except Exception as exc:  # a thread's error would go unseen: the page says the tree failed
            self.error = f"{type(exc).__name__}: {exc}"


class SentTree:
    """The tree of a debugger's timeline as its pages are sent it (see the module docstring).

    Every method but :meth:`_adopt` (the building thread's) is called holding ``lock``; ``send`` sends a
    message to the pages, ``selected`` says which event is selected (the labels around it go unasked).
    """

    AT_ONCE = 5_000
    """Events whose tree is built at once, with the rows (a few tens of milliseconds); more: in the background."""

    def __init__(self, lock: Any, send: Callable[[dict[str, Any], list[bytes]], None],
                 selected: Callable[[], int], before: Callable[[], object] = lambda: None) -> None:
        self._lock = lock
        self._send = send
        self._selected = selected
        self._before = before  # the building thread's first work, before the tree (holding no lock)
        self.building: Building | None = None
        """The thread building the tree, while it does."""
        self.restart([])

    def restart(self, events: list[BaseEvent]) -> None:
        """Another log (a new timeline): nothing of it built or sent; a build of the old one stops."""
        if self.building is not None:
            self.building.stop()
        self.events = events
        self.tree = TreeEncoder()
        self.ready = False
        """The tree is built: it holds the log as far as the pages were sent it, and follows it from there."""
        self.building = None
        self.error = ""
        self._full: tuple[dict[str, Any], list[bytes]] | None = None
        self.page_reset()

    def page_reset(self) -> None:
        """The pages start again: they have no node, and the rows come again."""
        self.sent = 0
        self.upto = 0
        self._long = False
        self._noted = False

    def built(self) -> TreeEncoder | None:
        """The tree, when it is built (the static view draws it)."""
        return self.tree if self.ready else None

    def labels(self, asked: Any) -> dict[str, Any]:
        """The labels of the nodes a page asked for (none before the tree is built)."""
        return self.tree.labels(asked)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no tree is being built (a test's, a benchmark's); False when ``timeout`` ran out first.

        Call it without the lock: the building thread takes it to hand the tree over.
        """
        building = self.building
        return building is None or building.finished.wait(timeout)

    def update(self, n: int, long: bool) -> None:
        """The pages have the rows up to ``n``: send them the tree up to there, or say it is being built.

        ``long``: the rows went without their texts; so do the labels of a tree sent whole, but those around
        the selected event, which go along.
        """
        self.upto, self._long = n, self._long or long  # the page got rows without their texts since its reset
        if not self.ready:
            if self.building is None and not self.error and n <= self.AT_ONCE:
                self.tree.prepare(self.events, n)
                self.ready = True
            else:
                if self.building is None and not self.error:  # after the rows: it does not slow them down
                    self.building = Building(self.events, self._adopt, before=self._before).start()
                if not self._noted:
                    self._noted = True
                    self._send({"kind": "building", "what": "tree", "error": self.error}, [])
                return
        whole, full = None, self._full
        if self.sent == 0 and full is not None and (full[0]["end"] >= n or n > self.AT_ONCE):
            # the tree is still what was last encoded whole (a short one that grew since: encoded again, below)
            whole = full
            self._send(*whole)
            self.sent = whole[0]["end"]
        if self.sent < n:
            start = self.sent
            content, buffers = self.tree.binary(self.events, start, n)
            self._full = (content, buffers) if start == 0 else None
            whole = self._full or whole
            self._send(content, buffers)
            self.sent = n
        if whole is not None and self._long and self.tree.groups:
            group = self.tree.groups[max(0, min(self._selected(), len(self.tree.groups) - 1))]
            self._send({"kind": "texts", **self.tree.labels([[0, 1], [group - NEAR // 2, group + NEAR // 8]])}, [])

    def _adopt(self, building: Building) -> None:
        """The building thread's end: the tree (up to the events it held) replaces the empty one, and is sent."""
        with self._lock:
            if building is not self.building:
                return  # another log is shown now
            self.building = None
            if building.encoded is None:
                self.error = building.error or "not built"
                self._noted = False
            else:
                self.tree, self.ready, self._full = building.tree, True, building.encoded
            if self.upto:
                self.update(self.upto, self._long)
