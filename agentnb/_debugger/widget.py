"""The step-through debugger's view: the controller's state in the browser, through anywidget.

:class:`Debugger` is the :class:`~.controller.Controller` (``step``, ``next_turn``, ``cont``, ``pause``,
``restart``, ``select``, ``approve``, ``deny``, ``submit_result``, ``fork``, breakpoints) plus its view.
:class:`DebuggerView` is the anywidget, whose front end is ``widgets/debugger.js``: a virtualized timeline of
every event (click to select, filters, search, keyboard), the selected event's card, the conversation as it
stood after it (time travel), the wire view one provider at a time, the approval panel. Every control in the
page sends a message that calls the same public method a test calls, so tests drive the same code a click does.

Data flow. Event rows (see :mod:`.rows`) go to the page once, in custom messages, and a live run sends
only the new ones: every row's codes (type, state, turn, tool, status) as binary buffers, and its texts
(summary, time) only while it is in sight, when the page asks (``texts?``; a search over summaries is
``search?``; the cards of the rows in sight, so a click shows at once, ``cards?``); the widget's synced
state holds just the selected moment (a card, the conversation, the meters, the header), so a saved
notebook's widget state stays small however long the run. A live run
updates the page at most ``updates_per_second`` times a second however fast fragments stream in: each event
only marks the view dirty, and a timer flushes it. Continue started from the page runs in a background
thread, so the kernel stays free to receive Pause while a model call streams.

In a notebook the debugger is two outputs (:meth:`Debugger._ipython_display_`): a static ``text/html``
rendering (header, meters, event table, conversation; ``text/plain`` = the run's repr), then the widget,
which replaces it when its model exists. So a notebook saved without widget state -- JupyterLab's default --
still reads as the run when reopened without the kernel that ran it, and so do GitHub, nbviewer and
nbconvert.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from .._states import TERMINAL, LoopState
from .._transcript import Transcript
from .._visible import FLAG, hides, visible
from ..events import ApprovalRequested
from ..exceptions import AgentnbError
from . import assets, hello, intervene, replay_edit, viewdata, whatif
from . import rows as rows_mod
from .controller import Breakpoint, BreakpointKind
from .labelling import Labelling
from .plots_tab import plots_html
from .timeline import Timeline
from .tree import SentTree, TreeEncoder

__all__ = ["Breakpoint", "BreakpointKind", "Debugger", "DebuggerView", "plots_html"]


class Debugger(Labelling, intervene.Intervening):
    """A debugger for a run (live) or a saved transcript (replay, read-only), shown as a widget.

    The controls are the :class:`~.controller.Controller`'s methods; this class adds the view: the anywidget,
    the rows sent to the page, the selected moment, the tabs and the static HTML of the display bundle.

    Args:
        source: a :class:`~agentnb.Run`, a :class:`~agentnb.Transcript`, or a transcript file's path.
        start: for a transcript, ``0`` to start at its first event (step through it) or ``"end"``.
        updates_per_second: at most this many view updates a second while a run streams.
        labels: where the Label buttons write (a :class:`~agentnb.Labels` or what makes one; default: the
            run's store, else beside its file; see :mod:`.labelling`).
        by: who labels (default: the operating system's user name).
        dataset: what the header's "Add to dataset" adds the run to (a Dataset or a dataset file's path).

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
        >>> dbg = anb.Debugger(run.start("Refund order 42"))
        >>> dbg.cont().state.value
        'WAITING_APPROVAL'
        >>> dbg.approve(dbg.pending()[0]).state.value
        'COMPLETED'
    """

    # -- view ------------------------------------------------------------------------------------------

    def _build(self) -> None:
        self.view = DebuggerView(key=uuid.uuid4().hex)
        self.updates = 0
        """View updates sent so far (the streaming throttle is measured on it)."""
        self._last_refresh = 0.0
        self._dirty = False
        self._timer: threading.Timer | None = None
        self._rows = rows_mod.RowEncoder()
        self._tree = SentTree(self._lock, lambda c, b: self.view.send(c, b), lambda: self.selected,
                              before=self._index_timeline)
        self._rows_of: Timeline | None = None
        self._rows_sent = 0
        self._shown: tuple[Any, ...] = ()
        self._wire_key: tuple[Any, ...] = ()
        self._plots_key = -1
        self._displayed = False  # no page listens before the debugger is displayed (or a page says hello)
        self._heard = False  # a page said hello: it receives what is sent from now on
        self._asked = False  # a hello is being answered
        self._snapshot_key: tuple[Any, ...] | None = None
        self._snapshot_at = 0.0
        self._snapshot_timer: threading.Timer | None = None
        self._static_id = f"agentnb-static-{uuid.uuid4().hex}"
        self._static_shown = False  # displayed as two outputs (the static view has a display id to update)
        self._hellos = hello.Hellos()
        self.view.on_msg(self._on_msg)
        self.view.observe(self._on_selected, names="selected")
        self.view.observe(lambda _c: self._safely(self._render_tabs), names=["tab", "wire_provider"])

    def _changed(self) -> None:
        self._schedule_refresh()

    def _on_restart(self) -> None:
        self._reset_rows()

    # The page's controls: each message names a public method (and its arguments), nothing else.
    _CALLS: dict[str, Callable[[Debugger, dict[str, Any]], Any]] = {
        "step": lambda d, a: d.step(),
        "next_turn": lambda d, a: d.next_turn(),
        "cont": lambda d, a: d.cont(background=True),
        "pause": lambda d, a: d.pause(),
        "restart": lambda d, a: d.restart(),
        "fork": lambda d, a: d._fork_ui(a),
        "replay": lambda d, a: replay_edit.replay_from_page(d, a),
        "show": lambda d, a: d.show(str(a["run_id"])),
        "select": lambda d, a: d.select(int(a["seq"])),
        "toggle_breakpoint": lambda d, a: d.toggle_breakpoint(int(a["seq"])),
        "add_breakpoint": lambda d, a: d._add_breakpoint_from_page(str(a["kind"]), str(a["value"])),
        "remove_breakpoint": lambda d, a: d.remove_breakpoint(int(a["id"])),
        "approve": lambda d, a: d._approve_from_page(str(a["call_id"]), a.get("arguments")),
        "deny": lambda d, a: d.deny(str(a["call_id"]), str(a.get("reason") or "") or None, by=d.by,
                                    background=True),
        "submit_result": lambda d, a: d._submit_from_page(str(a["call_id"]), str(a.get("value", ""))),
        "label": lambda d, a: d._label_from_page(a),
        "add_to_dataset": lambda d, a: d._dataset_from_page(a),
        "intervene": intervene.from_page,  # interject, cancel a call, end the run (debugger/intervene.py)
    }

    def _on_msg(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        kind = content.get("kind")
        if kind == "hello":  # a page (re)opened the widget: it needs every row
            if not self._hellos.wanted(content):
                return  # a repeat of a hello already answered (see .hello)
            self._asked = True  # the encoding started at display stops: this answer does the rest (_encode_rows)
            with self._lock:
                self._displayed = self._heard = True
                self._reset_rows()
                self._send_rows()
                self.view.send(hello.welcome(content))
                self._hellos.sent(content)
            return
        if kind == "call":
            method = self._CALLS.get(str(content.get("method")))
            if method is not None:
                args = content.get("args") or {}
                self._safely(lambda: method(self, args))
        elif kind in ("texts?", "search?", "cards?"):
            self._safely(lambda: self._answer(content))

    def _answer(self, content: dict[str, Any]) -> None:
        """A page's request for what it was not sent at once: texts, a search's seqs, the cards of rows in sight."""
        with self._lock:
            if self._rows_of is not self.timeline:  # the rows start again (a reset is on its way): it asks again
                return
            if content.get("kind") == "cards?":
                self.view.send(viewdata.cards_answer(self.timeline, content))
            else:
                self.view.send(*rows_mod.answer(self._rows, self._tree.labels, self.timeline.events, content))

    def _on_selected(self, change: dict[str, Any]) -> None:
        if change["new"] != self.selected:
            self._safely(lambda: self.select(change["new"]))

    def _safely(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # a click must never leave a traceback in the notebook
            self.message = f"{type(exc).__name__}: {exc}"
            self.refresh()

    def _fork_ui(self, args: dict[str, Any]) -> None:
        """Fork from the page: the fork shows in this widget (see :meth:`branch`); an edit is checked first."""
        self.view.error = ""
        results, arguments, error = whatif.page_edit(args)
        if error:
            self.view.error = error
            return
        seq = args.get("seq")
        at = int(seq) if isinstance(seq, int) and not (results or arguments) else None
        try:
            self.branch(at, results=results, arguments=arguments, go=True)
        except (AgentnbError, ValueError) as exc:
            self.view.error = str(exc)
            self.refresh()

    def _approve_from_page(self, call_id: str, arguments: Any) -> None:
        parsed, self.view.error = whatif.approval_edit(arguments)
        if self.view.error:
            return
        from pydantic import ValidationError

        try:
            self.approve(call_id, arguments=parsed, by=self.by, background=True)
        except ValidationError as exc:
            self.view.error = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())

    def _submit_from_page(self, call_id: str, text: str) -> None:
        self.view.error = ""
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        self.submit_result(call_id, value, by=self.by, background=True)

    def _sync_breakpoints(self) -> None:
        self.view.breakpoints = [{"id": b.id, "kind": b.kind, "value": b.value, "label": b.label()}
                                 for b in self._breakpoints]

    def _set_running(self, running: bool) -> None:
        self.view.running = running
        self._sync_controls()

    def _sync_controls(self) -> None:
        state = self.state
        blocked = state in TERMINAL or (self.live and state is LoopState.WAITING_APPROVAL)
        if not self.live and len(self.timeline) >= len(self._replay):
            blocked = True
        running = self.view.running
        self.view.controls = {
            "step": not (blocked or running), "next_turn": not (blocked or running), "cont": not (blocked or running),
            "pause": running, "restart": not running, "fork": self.live and not running and len(self.timeline) > 0,
        }

    # -- rows and updates ------------------------------------------------------------------------------

    def _reset_rows(self) -> None:
        """The page starts its rows again; the encoded rows are kept unless the timeline itself is new."""
        if self._rows_of is not self.timeline:
            if self._rows_of is not None:
                self._rows_of.stop_indexing()  # the old timeline's background index: no longer wanted
            self._rows = rows_mod.RowEncoder()
            self._tree.restart(self.timeline.events)
            self._rows_of = self.timeline
        self._rows_sent = 0
        self._tree.page_reset()
        self.view.send({"kind": "reset"})

    EARLY_ROWS = 2_000
    """Before a page said hello, every update resends the rows from the start, up to this many (see below)."""

    def _send_rows(self) -> None:
        """Send the rows the page has not got yet (none before the debugger is displayed).

        Every row's codes go, as binary columns, and the tree's nodes; a long send leaves the texts to the page's
        asking (:meth:`_answer`). Rows sent before the page's module has loaded are lost, and a page that says
        hello while the cell that displayed the debugger still runs (``display(dbg); dbg.cont()``) is not heard
        until the cell ends. So until a hello arrives, each update starts over from row 0 -- for a short run; a
        long one waits for the hello.
        """
        if not self._displayed:
            return  # no page listens yet; displaying sends everything
        if self._rows_of is not self.timeline:
            self._reset_rows()
        n = len(self.timeline)
        if not self._heard:
            if n > self.EARLY_ROWS or n == self._rows_sent:
                return
            if self._rows_sent:
                self._reset_rows()
        start = self._rows_sent
        events = self.timeline.events
        texts = n - start <= rows_mod.TEXTS_WITH_ROWS  # a few new rows carry their texts; else the page asks
        while self._rows_sent < n:
            end = min(n, self._rows_sent + rows_mod.PER_MESSAGE)
            self.view.send(*self._rows.binary(events, self._rows_sent, end, texts=texts))
            self._rows_sent = end
        # unasked, the texts the page shows first (those around the selected event), then the tree (the page
        # shows the list until it has come: a long run's is built in the background, see .tree.SentTree)
        sel, near = max(0, min(self.selected, n - 1)), rows_mod.NEAR
        if not texts:
            self.view.send({"kind": "texts", **self._rows.answer(events, [[sel - near, sel + near // 4]])})
        self._tree.update(n, long=not texts)
        if self._tree.ready:  # a short log's index, at once (a long one's: in the tree's thread, before its tree)
            self.timeline.build_index()

    def _index_timeline(self) -> None:
        """In the tree's thread, before the tree: a loaded log's index; then the moment shown as recorded, whole."""
        tl = self.timeline
        tl.build_index()
        with self._lock:
            if tl is self.timeline and self._shown[-1:] != (True,):  # the shown moment was provisional
                self.refresh()

    def _encode_rows(self) -> None:
        """The codes, a piece at a time: a hello heard meanwhile sends the rows without waiting.

        Not the tree: it is built once the rows are sent (see :class:`.tree.SentTree`), not beside them.
        """
        for end in range(viewdata.CHUNK, len(self.timeline) + viewdata.CHUNK, viewdata.CHUNK):
            with self._lock:
                if self._rows_of is not self.timeline or self._asked:
                    return
                self._rows.extend(self.timeline.events, min(end, len(self.timeline)))

    def rows(self, start: int = 0, end: int | None = None) -> dict[str, Any]:
        """The timeline rows ``start`` to ``end``, codes and texts, as JSON lists (see :mod:`.rows`)."""
        return rows_mod.RowEncoder().encode(self.timeline.events, start, len(self.timeline) if end is None else end)

    def _schedule_refresh(self) -> None:
        """At most one view update per interval: the first event after a quiet spell shows at once."""
        now = time.monotonic()
        with self._lock:
            if self._timer is not None:
                self._dirty = True
                return
            wait = self._last_refresh + self._interval - now
            if wait > 0:
                self._dirty = True
                self._timer = threading.Timer(wait, self._flush)
                self._timer.daemon = True
                self._timer.start()
                return
        self.refresh()

    def _flush(self) -> None:
        with self._lock:
            self._timer = None
            dirty = self._dirty
        if dirty:
            self.refresh()

    def refresh(self) -> None:
        """Bring the page up to date: new rows, the header, and the selected moment (cheap when unchanged)."""
        with self._lock:
            self._dirty = False
            self._last_refresh = time.monotonic()
            self.updates += 1
            tl = self.timeline
            n = len(tl)
            sel = max(0, min(self.selected, n - 1))
            self.selected = sel
            v = self.view
            with v.hold_sync():
                self._send_rows()
                v.header = self._header()
                v.count = n
                v.selected = sel
                v.follow = self.follow
                v.message = self.message
                self._sync_controls()
                # a card can change after later events (an approval's status), so the key has the length
                ready = not n or tl.has_moment(sel)  # a loaded log's index may still be building (Timeline.after)
                key = (id(tl), sel, n if sel >= n - 2 or isinstance(tl.events[sel], ApprovalRequested) else -1, ready)
                if n and key != self._shown:
                    self._shown = key
                    v.detail = viewdata.detail_html(tl, sel)
                    v.conversation = viewdata.conversation_html(tl, sel)
                    v.meters = viewdata.meters_html(tl, sel) if ready else ""
                    v.diagram = viewdata.diagram_html(tl, sel)
                    v.fork_edit = whatif.fork_edit(tl, sel) if self.live else {}
                elif not n:
                    self._shown = ()
                    v.detail, v.conversation = viewdata.detail_html(tl, 0), ""
                    v.meters, v.diagram = "", viewdata.diagram_html(tl, 0)
                self._sync_pending()
                v.labels = self.labels_view()
                v.intervene = intervene.state(self)
                self._sync_runs()
                self._render_tabs()
                self._sync_snapshot()

    def _sync_runs(self) -> None:
        runs = self.runs
        if len(runs) < 2:
            self.view.runs = []
            return
        picks = []
        for r in runs:
            # once a fork has its first event, its lineage reads from it (where it was cut, what it replaced)
            said = viewdata.header(Timeline(r.events[:1]), live=True)["lineage"] if r.events else ""
            known = self.lineage.get(r.run_id, f"run {r.run_id}")
            label = f"{visible(r.run_id)[0]} · {said}" if said else visible(known)[0]
            picks.append({"run_id": r.run_id, "shown_id": visible(r.run_id)[0], "active": r is self.run,
                          "label": label})
        self.view.runs = picks

    def _named(self) -> tuple[str, str]:
        """The run's id and model before its first event says them (as ``RunStarted`` will)."""
        run = self.run
        if run is None:
            return "", ""
        model = run.loop.model
        return run.run_id, f"{getattr(model, 'provider', '?')}:{getattr(model, 'name', '?')}"

    def _header(self) -> dict[str, Any]:
        if self.run is None:
            return viewdata.header(self.timeline, live=False, total=len(self._replay))
        run_id, model = self._named()
        return viewdata.header(self.timeline, live=True, run_id=run_id, model=model)

    SNAPSHOT_ROWS = 200
    """Events listed in the snapshot the widget state keeps for kernel-less views (first and last halves)."""

    def _sync_snapshot(self, force: bool = False) -> None:
        """The saved view for a page without a kernel: redrawn when the run settles, at most once a second."""
        if not self._displayed:
            return  # never displayed: nobody will save it
        state = self.state
        key = (id(self.timeline), len(self.timeline), state)
        if key == self._snapshot_key or (self.view.running and not force):
            return
        settled = state in TERMINAL or state is LoopState.WAITING_APPROVAL
        wait = self._snapshot_at + 1.0 - time.monotonic()
        if not (force or settled or wait <= 0):
            if self._snapshot_timer is None:  # the last of a quick series of steps is saved too, a second later
                self._snapshot_timer = threading.Timer(wait, self._trailing_snapshot)
                self._snapshot_timer.daemon = True
                self._snapshot_timer.start()
            return
        self._snapshot_key = key
        self._snapshot_at = time.monotonic()
        run_id, model = self._named()
        self.view.snapshot = viewdata.fallback_html(self.timeline, live=self.live, rows=self.SNAPSHOT_ROWS,
                                                    style=False, run_id=run_id, model=model, built=self._built())
        if self._static_shown:  # the saved view in the output above the widget follows too (see _ipython_display_)
            from IPython.display import update_display

            update_display(self._static_bundle(), raw=True, display_id=self._static_id)

    def _trailing_snapshot(self) -> None:
        with self._lock:
            self._snapshot_timer = None
            self._safely(self._sync_snapshot)

    def _sync_pending(self) -> None:
        run = self.run
        pending = run.pending_approvals() if run is not None else []
        tools = {tool.name: tool for tool in (run.loop.registry if run is not None else [])}
        # What a person approves is shown as it runs: names and ids with their invisible or direction-changing
        # characters written out, the arguments (which the page may send back edited) with them as JSON escapes.
        self.view.pending = [
            {"call_id": c.call_id, "shown_id": visible(c.call_id)[0], "name": visible(c.name)[0], "kind": c.kind,
             "risk": getattr(tools.get(c.name), "risk", "?"), "ask": self._ASKS.get(c.kind, ""),
             "arguments": visible(json.dumps(c.arguments, indent=2, ensure_ascii=False), json=True)[0],
             "flag": FLAG if hides([c.call_id, c.name, c.arguments]) else ""}
            for c in pending
        ]

    _ASKS = {
        "approval": "wants to run",
        "client_result": "runs on the client: submit its result",
        "outcome_unknown": "was running when the process stopped: did it happen? Retry it or record its result",
        "escalation": "ran out: grant one more allowance, or deny to finalize with what the model has",
    }

    def _render_tabs(self) -> None:
        """The wire and plot tabs are computed only while open: a rendering or four figures are not free."""
        tl = self.timeline
        v = self.view
        if v.tab == "wire" and len(tl):
            key = (id(tl), self.selected, v.wire_provider, len(tl) if self.selected >= len(tl) - 2 else -1)
            if key != self._wire_key:
                self._wire_key = key
                v.wire = viewdata.wire_view(tl, self.selected, v.wire_provider)
        elif v.tab == "plots" and len(tl) and self._plots_key != len(tl):
            self._plots_key = len(tl)
            v.plots = plots_html(tl.events)

    # -- display ---------------------------------------------------------------------------------------

    def fallback_html(self) -> str:
        """The static HTML of the display bundle (header, meters, events, conversation), for kernel-less readers."""
        with self._lock:
            run_id, model = self._named()
            return viewdata.fallback_html(self.timeline, live=self.live, run_id=run_id, model=model,
                                          built=self._built())

    def _built(self) -> TreeEncoder | None:
        """The tree the page's rows were sent with, for the static view (None: not of this timeline, or not built)."""
        return self._tree.built() if self._rows_of is self.timeline else None

    def export_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write the events shown so far as one self-contained HTML file: a read-only debugger, no network.

        The run's labels in :attr:`label_book` go into the page too, which shows them on its header and cards.

        Example:
            >>> import agentnb as anb, tempfile, os
            >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> dbg = anb.Debugger(run.start("Paris?")).cont()
            >>> path = dbg.export_html(os.path.join(tempfile.mkdtemp(), "run.html"))
            >>> path.read_text(encoding="utf-8").startswith("<!doctype html>")
            True
        """
        from .export import write_html

        with self._lock:
            page = write_html(self.timeline, path, title=title)
        return self._labels_into(page)  # the run's labels travel with the page

    LIVE_NOTE = ("the live debugger shows here once this cell runs in a kernel, in a trusted notebook; "
                 "above is the run as it was saved")
    """What the widget's output says where no widget can be drawn (an untrusted notebook, GitHub, nbconvert)."""

    def _static_bundle(self) -> dict[str, str]:
        return {"text/html": self.fallback_html(),
                "text/plain": repr(self.run) if self.run is not None else repr(Transcript(self._replay))}

    def _ipython_display_(self) -> None:
        """Display in two outputs: the static view, then the widget, which replaces it when its model exists.

        JupyterLab and Notebook 7 draw one MIME type per output, the widget's whenever the notebook is trusted;
        a saved notebook reopened without its widget state (the default) has no model for it and reads
        "Error displaying widget: model not found". So the static view is an output of its own, and the
        stylesheet it carries (``debugger.css``) hides, of the two, the one that has nothing to show: the
        widget's output while it holds no debugger (loading, or its model gone), the static view once the
        live debugger is drawn below it. The static view follows the run (an update of its display, at most
        once a second and when the run settles), so what is saved is where the run got to: JupyterLab routes
        the update by display id while the page that displayed it is open, also for steps taken later from
        the page or another cell. Outside a kernel (a terminal) only the static view's text is shown.
        """
        from IPython import get_ipython
        from IPython.display import display

        data, metadata = self._repr_mimebundle_()
        static = {k: data[k] for k in ("text/html", "text/plain")}
        if getattr(get_ipython(), "kernel", None) is None:
            display(static, raw=True)
            return
        display(static, raw=True, display_id=self._static_id)
        self._static_shown = True
        live = {k: v for k, v in data.items() if k not in ("text/html", "text/plain")}
        live["text/plain"] = self.LIVE_NOTE
        live["text/html"] = f'<div class="agentnb-muted agentnb-live-note">{self.LIVE_NOTE}</div>'
        display(live, metadata=metadata, raw=True)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        shown = self.view._repr_mimebundle_(**kwargs)
        data, metadata = shown if isinstance(shown, tuple) else (shown or {}, {})
        data = dict(data)
        with self._lock:
            self._displayed = True
            self._sync_snapshot(force=True)
            self._reset_rows()  # a new view: every row again (lost if the page is not listening yet: it asks)
            self._send_rows()
            if len(self.timeline) > self.EARLY_ROWS and not self._heard:
                # a long run's rows wait for the page's hello: encode them meanwhile, while the page loads
                threading.Thread(target=self._encode_rows, name="agentnb-rows", daemon=True).start()
        data.update(self._static_bundle())
        return data, metadata

    def __repr__(self) -> str:
        mode = "live" if self.live else "replay"
        return f"<agentnb.Debugger {mode} {self.state.value} {viewdata.events_text(len(self.timeline))}>"


class DebuggerView(anywidget.AnyWidget):
    """The debugger in the page: ``widgets/debugger.js`` and ``widgets/debugger.css`` served by anywidget.

    The traits are the selected moment only; event rows arrive as custom messages (see :mod:`.viewdata`).
    The page sets ``selected``, ``tab`` and ``wire_provider``; everything else flows from Python.
    """

    _esm = assets.text("debugger.js")
    _css = assets.text("debugger.css")

    key = t.Unicode("").tag(sync=True)  # names the model: the page keeps one store per model, not per proxy
    header = t.Dict().tag(sync=True)
    count = t.Int(0).tag(sync=True)
    selected = t.Int(0).tag(sync=True)
    follow = t.Bool(True).tag(sync=True)
    running = t.Bool(False).tag(sync=True)
    message = t.Unicode("").tag(sync=True)
    controls = t.Dict().tag(sync=True)
    meters = t.Unicode("").tag(sync=True)
    diagram = t.Unicode("").tag(sync=True)
    detail = t.Unicode("").tag(sync=True)
    conversation = t.Unicode("").tag(sync=True)
    tab = t.Unicode("event").tag(sync=True)
    wire_provider = t.Unicode("").tag(sync=True)
    wire = t.Dict().tag(sync=True)
    plots = t.Unicode("").tag(sync=True)
    breakpoints: t.List[dict[str, Any]] = t.List().tag(sync=True)
    pending: t.List[dict[str, Any]] = t.List().tag(sync=True)
    error = t.Unicode("").tag(sync=True)
    runs: t.List[dict[str, Any]] = t.List().tag(sync=True)
    """The runs the picker offers (this run and its forks), when there is more than one."""
    fork_edit = t.Dict().tag(sync=True)
    """The selected event's call result or arguments, to edit and fork from (empty: nothing to edit)."""
    snapshot = t.Unicode("").tag(sync=True)
    """The static view (header, meters, events, conversation) a page shows when no kernel answers."""
    labels = t.Dict().tag(sync=True)
    """The run's labels and what the Label and Add-to-dataset forms offer (see :mod:`.labelling`)."""
    intervene = t.Dict().tag(sync=True)
    """The box to step into a paused run: may one now, the calls to cancel, who, the last outcome."""
