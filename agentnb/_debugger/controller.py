"""The debugger's controller: stepping, threads, breakpoints, approvals and forks, with no widget.

Theory of operation. :class:`Controller` drives a live :class:`~agentnb.Run` (or replays a saved transcript) one
event at a time and keeps a :class:`~.timeline.Timeline` -- the engine's fold, event by event -- of what it has
shown so far. Everything a person can do in the debugger is a public method here (``step``, ``next_turn``,
``cont``, ``pause``, ``restart``, ``select``, ``approve``, ``deny``, ``submit_result``, ``fork``, the breakpoints),
so tests drive exactly what a click does, without a browser or a widget.

Continue can run in a background thread (``cont(background=True)``): the kernel stays free to receive Pause
while a model call streams. Events of a live run arrive through :meth:`Run.on_event` on whichever thread
appends them; the timeline is guarded by one re-entrant lock.

The view (:class:`~.widget.Debugger`) subclasses the controller and overrides the hooks at the end of the class
(:meth:`Controller.refresh`, ``_changed``, ``_set_running``, ``_sync_breakpoints``, ``_on_restart``): the
controller says *that* something changed, the view decides how to show it.

Example:
    >>> import agentnb as anb
    >>> run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
    >>> ctl = Controller(run.start("Refund order 42"))
    >>> ctl.cont().state.value
    'WAITING_APPROVAL'
    >>> ctl.approve(ctl.pending()[0]).state.value
    'COMPLETED'
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

from .._engine import RunState
from .._gc import gc_paused
from .._run import Run
from .._states import TERMINAL, LoopState
from .._transcript import Transcript, folded
from ..events import BaseEvent, ModelRequested, ToolStarted
from ..exceptions import AgentnbError
from . import viewdata
from .intervene import default_by
from .timeline import Timeline

BreakpointKind = Literal["event", "tool", "state", "predicate"]


@dataclass(frozen=True)
class Breakpoint:
    """Stop Continue / Next turn after an event that matches.

    ``tool = X`` stops where a breakpoint on a function stops: after X was approved (if it needs approval)
    and before it runs, i.e. right after its ``ToolStarted`` event; Step then runs it.
    """

    id: int
    kind: BreakpointKind
    value: str = ""
    predicate: Callable[[BaseEvent], bool] | None = None

    def matches(self, ev: BaseEvent) -> bool:
        """Whether ``ev`` hits this breakpoint."""
        if self.kind == "event":
            return ev.type == self.value
        if self.kind == "tool":
            return isinstance(ev, ToolStarted) and ev.name == self.value
        if self.kind == "state":
            return ev.state.value == self.value
        return bool(self.predicate and self.predicate(ev))

    def label(self) -> str:
        """How the breakpoint is listed."""
        if self.kind == "predicate":
            name = getattr(self.predicate, "__name__", "predicate")
            return f"when {name}(event)"
        return f"{self.kind} = {self.value}"



class Controller:
    """A headless debugger for a run (live) or a saved transcript (replay, read-only).

    Args:
        source: a :class:`~agentnb.Run`, a :class:`~agentnb.Transcript`, or a transcript file's path.
        start: for a transcript, ``0`` to start at its first event (step through it) or ``"end"``.
        updates_per_second: at most this many view updates a second while a run streams (for a view).
        by: who the person at the debugger is (default: the OS user name); their approvals, messages,
            cancellations and ends are recorded with it.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> ctl = Controller(run.start("Paris?"))
        >>> ctl.step().type, ctl.next_turn().events[-1].type
        ('RunStarted', 'ModelRequested')
    """

    def __init__(self, source: Run | Transcript | str | Path, *, start: int | str = 0,
                 updates_per_second: float = 10.0, by: str | None = None) -> None:
        if isinstance(source, str | Path):
            source = Transcript.load(source)
        self.run: Run | None = None
        self._replay: list[BaseEvent] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._breakpoints: list[Breakpoint] = []
        self._next_bp = 1
        self._interval = 1.0 / updates_per_second
        self.by = by or default_by()  # who the person at this debugger is (recorded with what they do)
        self.message = ""
        self.follow = True
        self.selected = 0
        self.forks: list[Run] = []
        """The forks made in this debugger (:meth:`branch`, the page's Fork), oldest first: handles in the kernel."""
        self.lineage: dict[str, str] = {}
        """Run id -> how it came about ("fork of run_x at event 12, results replaced"), for the run picker."""
        self._first: Run | None = source if isinstance(source, Run) else None
        self._listening: set[int] = set()
        self._build()
        if isinstance(source, Run):
            self._attach(source)
        else:
            self._replay = list(source.events)
            upto = len(self._replay) if start == "end" else max(1, int(start) + 1)
            if upto >= len(self._replay):  # the whole log: its fold is the transcript's, not done again
                self.timeline = Timeline.after(self._replay, folded(source))
            else:
                self.timeline = Timeline()
                with gc_paused():  # a long log's fold builds much that stays alive (see gc_paused)
                    self.timeline.extend(self._replay[:upto])
            self.selected = len(self.timeline) - 1
        self.refresh()

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> Self:
        """Open a saved transcript read-only."""
        return cls(Transcript.load(path), **options)


    # -- state -----------------------------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """True for a live run, False for a replayed transcript."""
        return self.run is not None

    @property
    def state(self) -> LoopState:
        """The loop state at the latest event shown."""
        return self.timeline.state.state

    @property
    def events(self) -> list[BaseEvent]:
        """The events shown so far."""
        return self.timeline.events

    @property
    def running(self) -> bool:
        """True while Continue runs in the background."""
        return self._worker is not None and self._worker.is_alive()

    def pending(self) -> list[str]:
        """Ids of the calls waiting for approval."""
        if self.run is None:
            return []
        return [c.call_id for c in self.run.pending_approvals()]

    def _attach(self, run: Run) -> None:
        self.run = run
        self.timeline = Timeline(run.events)
        self.selected = max(0, len(self.timeline) - 1)
        self.follow = True
        if id(run) not in self._listening:  # a run shown again (the run picker) keeps its one listener
            self._listening.add(id(run))
            run.on_event(self._on_event)

    def _on_event(self, ev: BaseEvent, state: RunState) -> None:
        if self.run is None or ev.run_id != self.run.run_id:
            return  # an event of a run we no longer show (after Restart)
        with self._lock:
            self.timeline.add(ev, state)
            if self.follow:
                self.selected = ev.seq
        self._changed()

    # -- controls (public: the buttons call these) --------------------------------------------------------

    def step(self) -> BaseEvent | None:
        """One event: the run's next event, or the transcript's next one in replay."""
        self.follow = True
        ev = self._advance()
        self.message = self._why_stopped() if ev is None else ""
        self.refresh()
        return ev

    def _advance(self) -> BaseEvent | None:
        # A live run's step is not done under the lock: it may wait on the network for a fragment, and the
        # page (select, Pause) must not wait with it. Its event comes back through _on_event.
        if self.run is not None:
            return self.run.step()
        with self._lock:
            n = len(self.timeline)
            if n >= len(self._replay):
                return None
            ev = self._replay[n]
            self.timeline.add(ev)
            self.selected = ev.seq
            return ev

    def _why_stopped(self) -> str:
        if self.state is LoopState.WAITING_APPROVAL:
            return "waiting for approval"
        if self.state in TERMINAL:
            return f"the run is over ({self.state.value})"
        if self.run is None and len(self.timeline) >= len(self._replay):
            return "end of the transcript"
        return ""

    def next_turn(self) -> Self:
        """Run to the start of the next model turn (or a breakpoint, a pause for approval, the end)."""
        turn = self.events[-1].turn if self.events else 0
        return self._go(lambda ev: isinstance(ev, ModelRequested) and ev.turn > turn)

    def cont(self, *, background: bool = False) -> Self:
        """Continue until a breakpoint, a pause for approval, Pause, or the end.

        Args:
            background: run in a thread and return at once (what the Continue button does, so Pause works).
        """
        return self._go(None, background=background)

    def _go(self, until: Callable[[BaseEvent], bool] | None, *, background: bool = False) -> Self:
        if self.running:
            return self
        self._stop.clear()
        self.follow = True
        if background:
            self._worker = threading.Thread(target=self._loop, args=(until,), name="agentnb-debugger", daemon=True)
            self._set_running(True)
            self._worker.start()
            return self
        self._loop(until)
        return self

    def _loop(self, until: Callable[[BaseEvent], bool] | None) -> None:
        message = ""
        try:
            while not self._stop.is_set():
                ev = self._advance()
                if ev is None:
                    message = self._why_stopped()
                    break
                hit = next((bp for bp in self._breakpoints if bp.matches(ev)), None)
                if hit is not None:
                    message = f"breakpoint: {hit.label()} (event {ev.seq})"
                    break
                if until is not None and until(ev):
                    break
            else:
                message = "paused"
        except Exception as exc:  # keep the debugger usable; the run itself records model/tool failures
            message = f"error: {type(exc).__name__}: {exc}"
        self.message = message
        self._set_running(False)
        self.refresh()

    def pause(self) -> None:
        """Stop a running Continue between two events."""
        self._stop.set()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout=30)

    def wait(self, timeout: float | None = 60) -> Self:
        """Wait for a background Continue to stop."""
        if self._worker is not None:
            self._worker.join(timeout)
        return self

    def restart(self) -> Self:
        """A new run of the same loop and prompt (live), or back to the first event (replay)."""
        self.pause()
        with self._lock:
            if self.run is not None:
                restarted = self.run.loop.start(self.run.prompt)
                if self.run is self._first:
                    self._first = restarted
                elif self.run in self.forks:
                    self.forks[self.forks.index(self.run)] = restarted
                self._attach(restarted)
            else:
                self.timeline = Timeline(self._replay[:1])
                self.selected = 0
            self.message = "restarted"
            self._on_restart()
        self.refresh()
        return self

    def select(self, seq: int) -> Self:
        """Show the run as it stood after event ``seq`` (time travel)."""
        with self._lock:
            n = len(self.timeline)
            self.selected = max(0, min(int(seq), n - 1))
            self.follow = self.selected == n - 1
        self.refresh()
        return self

    # -- approvals -------------------------------------------------------------------------------------

    def _need_run(self) -> Run:
        if self.run is None:
            raise AgentnbError("a replayed transcript is read-only: nothing can be approved or denied")
        return self.run

    def approve(
        self, call_id: str, *, by: str | None = None, note: str | None = None,
        arguments: dict[str, Any] | None = None, resume: bool = True, background: bool = False,
    ) -> Self:
        """Approve a waiting call (optionally with edited arguments) and, by default, continue the run."""
        self._need_run().approve(call_id, by=by, note=note, arguments=arguments)
        return self._after_decision(resume, background)

    def deny(
        self, call_id: str, reason: str | None = None, *, by: str | None = None, resume: bool = True,
        background: bool = False,
    ) -> Self:
        """Deny a waiting call (the model gets the reason) and, by default, continue the run."""
        self._need_run().deny(call_id, reason, by=by)
        return self._after_decision(resume, background)

    def submit_result(self, call_id: str, value: Any, *, by: str | None = None, resume: bool = True,
                      background: bool = False) -> Self:
        """Answer a waiting call with a result (a client tool's value, or an unknown outcome reconciled)."""
        self._need_run().submit_result(call_id, value, by=by)
        return self._after_decision(resume, background)

    def _after_decision(self, resume: bool, background: bool) -> Self:
        self.follow = True
        if resume and not self.pending():
            return self.cont(background=background)
        self.refresh()
        return self

    # -- breakpoints -----------------------------------------------------------------------------------

    def add_breakpoint(
        self, *, event: str | None = None, tool: str | None = None, state: str | LoopState | None = None,
        when: Callable[[BaseEvent], bool] | None = None,
    ) -> Breakpoint:
        """Break after an event of a type, of a tool, entering a state, or satisfying ``when(event)``."""
        given = [(k, v) for k, v in (("event", event), ("tool", tool), ("state", state), ("predicate", when)) if v]
        if len(given) != 1:
            raise ValueError("give exactly one of event=, tool=, state=, when=")
        kind, value = given[0]
        if kind == "state":
            value = LoopState(value).value  # type: ignore[arg-type]
        if kind == "event" and value not in _event_types():
            raise ValueError(f"no event type {value!r}; types: {', '.join(sorted(_event_types()))}")
        bp = Breakpoint(
            id=self._next_bp, kind=kind,  # type: ignore[arg-type]
            value="" if kind == "predicate" else str(value),
            predicate=value if kind == "predicate" else None,  # type: ignore[arg-type]
        )
        self._next_bp += 1
        self._breakpoints.append(bp)
        self._sync_breakpoints()
        return bp

    def remove_breakpoint(self, bp: Breakpoint | int) -> None:
        """Remove a breakpoint (by object or id)."""
        bp_id = bp.id if isinstance(bp, Breakpoint) else bp
        self._breakpoints = [b for b in self._breakpoints if b.id != bp_id]
        self._sync_breakpoints()

    def toggle_breakpoint(self, seq: int) -> Breakpoint | None:
        """Break on events like event ``seq`` (its tool, else its type), or remove that breakpoint if set.

        Returns the breakpoint added, or None when one was removed. The timeline's row button calls this.
        """
        ev = self.events[seq]
        tool = viewdata.tool_at(self.events, seq)
        kind, value = ("tool", tool) if tool else ("event", ev.type)
        for bp in self._breakpoints:
            if bp.kind == kind and bp.value == value:
                self.remove_breakpoint(bp)
                return None
        if kind == "event" and value not in _event_types():
            raise ValueError(f"no breakpoint for an event kind this version does not know: {value}")
        return self._add_breakpoint_from_page(kind, value)

    def _add_breakpoint_from_page(self, kind: str, value: str) -> Breakpoint:
        value = value.strip()
        if kind == "tool":
            return self.add_breakpoint(tool=value)
        if kind == "state":
            return self.add_breakpoint(state=value)
        if kind == "event":
            return self.add_breakpoint(event=value)
        raise ValueError(f"a breakpoint from the page is on a tool, an event or a state, not {kind!r}")

    @property
    def breakpoints(self) -> list[Breakpoint]:
        """The breakpoints, in the order they were added."""
        return list(self._breakpoints)

    # -- fork ------------------------------------------------------------------------------------------

    def fork(
        self, seq: int | None = None, *, results: dict[str, Any] | None = None,
        arguments: dict[str, dict[str, Any]] | None = None,
    ) -> Self:
        """A new run from the conversation as it stood at event ``seq`` (default: the selected one).

        The fork keeps the history up to the last complete point at or before ``seq``: a turn whose calls
        are not all answered yet, and a final answer, are dropped, so the model is asked again from there.

        Args:
            seq: the moment to fork from.
            results: tool results replaced by call id ("what if the tool had answered this?"); without a
                ``seq`` the fork starts right after those results were bound.
            arguments: call arguments replaced by call id ("what if the model had asked for this?"): the
                fork replays that call's turn with the edited arguments (validated against the schema),
                runs its calls, and goes on with the loop's model.

        Returns a debugger on the forked run; the original run is untouched.
        """
        run = self._need_run()
        at = seq if seq is not None or results or arguments else self.selected
        forked = run.fork(at, results=results, arguments=arguments)  # time travel lives in the driver (Run.fork)
        return type(self)(forked, **self._child_options())

    def _child_options(self) -> dict[str, Any]:
        """What a debugger made from this one (a fork's) keeps: its pace and its person."""
        return {"updates_per_second": 1.0 / self._interval, "by": self.by}

    @property
    def runs(self) -> list[Run]:
        """The runs this debugger can show: the one it was opened on (or its latest restart), then its forks."""
        first = [self._first] if self._first is not None else []
        return first + self.forks

    def branch(
        self, seq: int | None = None, *, results: dict[str, Any] | None = None,
        arguments: dict[str, dict[str, Any]] | None = None, go: bool = False, request: dict[str, Any] | None = None,
    ) -> Run:
        """Fork the shown run (as :meth:`fork` does) and show the fork here; the parent stays one :meth:`show` away.

        The fork is appended to :attr:`forks` (its handle in the kernel) and the debugger switches to it, so the
        page's Fork and edit-then-fork land in the same output. ``go=True`` continues the fork at once (in the
        background: its writes still ask a person, as the fork's effect policy says). ``request`` replays the
        model request at ``seq`` with edits (``Run.fork``'s ``request=``: "Replay this turn with edits").

        Example:
            >>> import agentnb as anb
            >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> ctl = Controller(run.start("Paris?")).cont()
            >>> call = next(e.call_id for e in ctl.events if e.type == "ToolFinished")
            >>> fork = ctl.branch(results={call: {"city": "Paris", "temp_c": -5, "sky": "snow"}})
            >>> ctl.run is fork, ctl.forks == [fork], ctl.cont().state.value
            (True, True, 'COMPLETED')
            >>> ctl.show(0).run is ctl.runs[0]
            True
        """
        parent = self._need_run()
        at = seq if seq is not None or results or arguments else self.selected
        forked = parent.fork(at, results=results, arguments=arguments, request=request)
        what = [w for w, given in (("results replaced", results), ("arguments edited", arguments),
                                   ("request edited", request)) if given]
        where = f"at event {at}" if at is not None else "after the results were bound"
        self.lineage[forked.run_id] = f"fork of {parent.run_id} {where}" + (f", {' and '.join(what)}" if what else "")
        self.forks.append(forked)
        self.show(forked)
        self.message = f"{self.lineage[forked.run_id]}: shown here (dbg.forks[-1]; the run picker goes back)"
        if go:
            self.cont(background=True)
        self.refresh()
        return forked

    def show(self, which: Run | str | int) -> Self:
        """Show another of :attr:`runs` (a run, its id, or its index there): the run picker calls this."""
        runs = self.runs
        if isinstance(which, int):
            if not -len(runs) <= which < len(runs):
                raise AgentnbError(f"no run {which}: this debugger shows {len(runs)} runs (0 to {len(runs) - 1})")
            run = runs[which]
        elif isinstance(which, str):
            found = next((r for r in runs if r.run_id == which), None)
            if found is None:
                raise AgentnbError(f"no run {which!r} in this debugger; its runs: {', '.join(r.run_id for r in runs)}")
            run = found
        else:
            run = which
        if run is self.run:
            return self
        self.pause()
        with self._lock:
            self._attach(run)
            self.message = f"showing {self.lineage.get(run.run_id, 'run ' + run.run_id)}"
            self._on_restart()
        self.refresh()
        return self

    # -- hooks for a view (headless: nothing to show) --------------------------------------------------------

    def refresh(self) -> None:
        """Bring the view up to date (a headless controller has none)."""

    def _changed(self) -> None:
        """A live run appended an event (called on the thread that appended it)."""

    def _set_running(self, running: bool) -> None:
        """A background Continue started or stopped."""

    def _sync_breakpoints(self) -> None:
        """The breakpoints changed."""

    def _on_restart(self) -> None:
        """Restart replaced the timeline."""

    def _build(self) -> None:
        """Set up the view (called once, before the first event is shown)."""

    def __repr__(self) -> str:
        mode = "live" if self.live else "replay"
        return f"<agentnb._debugger.Controller {mode} {self.state.value} {len(self.timeline)} events>"


def _event_types() -> frozenset[str]:
    from ..events import EVENT_CLASSES

    return frozenset(EVENT_CLASSES)
