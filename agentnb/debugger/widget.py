"""The step-through debugger: a view of a run's event log plus buttons that append events.

Layout, top to bottom: a header (run id, model, state, why it ended), the state machine with the current
state lit, budget meters, the controls (Step, Next turn, Continue, Pause, Restart, Fork), breakpoints, the
approval panel (when the run waits for a person), then the timeline -- a window of event cards around the
selected event with a scrubber -- beside the selected card, expanded, and the conversation as it stood after
that event (time travel).

Every button calls a public method (``step``, ``next_turn``, ``cont``, ``pause``, ``restart``, ``select``,
``approve``, ``deny``, ``fork``), so tests drive the same code a click does. Continue runs in a background
thread when started from a button, so the kernel stays free to receive Pause while a model call streams.
Only a window of cards is drawn at a time, so a 10,000-event transcript opens as fast as a short one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import ipywidgets as w

from ..events import BaseEvent
from ..exceptions import AgentnbError
from ..guards import cost
from ..run import Run
from ..states import TERMINAL, LoopState
from ..transcript import Transcript
from . import cards
from .diagram import state_diagram
from .timeline import Timeline

BreakpointKind = Literal["event", "tool", "state", "predicate"]


@dataclass(frozen=True)
class Breakpoint:
    """Stop Continue / Next turn after an event that matches."""

    id: int
    kind: BreakpointKind
    value: str = ""
    predicate: Callable[[BaseEvent], bool] | None = None

    def matches(self, ev: BaseEvent) -> bool:
        """Whether ``ev`` hits this breakpoint."""
        if self.kind == "event":
            return ev.type == self.value
        if self.kind == "tool":
            return getattr(ev, "name", None) == self.value and hasattr(ev, "call_id")
        if self.kind == "state":
            return ev.state.value == self.value
        return bool(self.predicate and self.predicate(ev))

    def label(self) -> str:
        """How the breakpoint is listed."""
        if self.kind == "predicate":
            name = getattr(self.predicate, "__name__", "predicate")
            return f"when {name}(event)"
        return f"{self.kind} = {self.value}"


def _badge(state: LoopState) -> str:
    if state is LoopState.COMPLETED:
        cls = "agentnb-badge-done"
    elif state in TERMINAL:
        cls = "agentnb-badge-bad"
    elif state is LoopState.WAITING_APPROVAL:
        cls = "agentnb-badge-wait"
    else:
        cls = "agentnb-badge-live"
    return f'<span class="agentnb-badge {cls} agentnb-state-badge">{state.value}</span>'


class Debugger:
    """A debugger for a run (live) or a saved transcript (replay, read-only).

    Args:
        source: a :class:`~agentnb.Run`, a :class:`~agentnb.Transcript`, or a transcript file's path.
        window: how many event cards the timeline draws around the selected one.
        start: for a transcript, ``0`` to start at its first event (step through it) or ``"end"``.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
        >>> dbg = anb.Debugger(run.start("Refund order 42"))
        >>> dbg.cont().state.value
        'WAITING_APPROVAL'
        >>> dbg.approve(dbg.pending()[0]).state.value
        'COMPLETED'
    """

    def __init__(self, source: Run | Transcript | str | Path, *, window: int = 30, start: int | str = 0) -> None:
        if isinstance(source, str | Path):
            source = Transcript.load(source)
        self.window = window
        self.run: Run | None = None
        self._replay: list[BaseEvent] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._breakpoints: list[Breakpoint] = []
        self._next_bp = 1
        self._last_refresh = 0.0
        self._dirty = False
        self._timer: threading.Timer | None = None
        self.message = ""
        self.follow = True
        self.selected = 0
        self._build()
        if isinstance(source, Run):
            self._attach(source)
        else:
            self._replay = list(source.events)
            self.timeline = Timeline()
            upto = len(self._replay) if start == "end" else max(1, int(start) + 1)
            for ev in self._replay[:upto]:
                self.timeline.add(ev)
            self.selected = len(self.timeline) - 1
        self.refresh()

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> Debugger:
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
        run.on_event(self._on_event)

    def _on_event(self, ev: BaseEvent) -> None:
        if self.run is None or ev.run_id != self.run.run_id:
            return  # an event of a run we no longer show (after Restart)
        with self._lock:
            self.timeline.add(ev)
            if self.follow:
                self.selected = ev.seq
        self._schedule_refresh()

    # -- controls (public: the buttons call these) --------------------------------------------------------

    def step(self) -> BaseEvent | None:
        """One event: the run's next event, or the transcript's next one in replay."""
        with self._lock:
            self.follow = True
            ev = self._advance()
            if ev is None:
                self.message = self._why_stopped()
            else:
                self.message = ""
        self.refresh()
        return ev

    def _advance(self) -> BaseEvent | None:
        if self.run is not None:
            return self.run.step()
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

    def next_turn(self) -> Debugger:
        """Run to the start of the next model turn (or a breakpoint, a pause for approval, the end)."""
        turn = self.events[-1].turn if self.events else 0
        return self._go(lambda ev: ev.type == "ModelRequested" and ev.turn > turn)

    def cont(self, *, background: bool = False) -> Debugger:
        """Continue until a breakpoint, a pause for approval, Pause, or the end.

        Args:
            background: run in a thread and return at once (what the Continue button does, so Pause works).
        """
        return self._go(None, background=background)

    def _go(self, until: Callable[[BaseEvent], bool] | None, *, background: bool = False) -> Debugger:
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
                with self._lock:
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

    def wait(self, timeout: float | None = 60) -> Debugger:
        """Wait for a background Continue to stop."""
        if self._worker is not None:
            self._worker.join(timeout)
        return self

    def restart(self) -> Debugger:
        """A new run of the same loop and prompt (live), or back to the first event (replay)."""
        self.pause()
        with self._lock:
            if self.run is not None:
                self._attach(self.run.loop.start(self.run.prompt))
            else:
                self.timeline = Timeline(self._replay[:1])
                self.selected = 0
            self.message = "restarted"
        self.refresh()
        return self

    def select(self, seq: int) -> Debugger:
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
    ) -> Debugger:
        """Approve a waiting call (optionally with edited arguments) and, by default, continue the run."""
        self._need_run().approve(call_id, by=by, note=note, arguments=arguments)
        return self._after_decision(resume, background)

    def deny(
        self, call_id: str, reason: str | None = None, *, by: str | None = None, resume: bool = True,
        background: bool = False,
    ) -> Debugger:
        """Deny a waiting call (the model gets the reason) and, by default, continue the run."""
        self._need_run().deny(call_id, reason, by=by)
        return self._after_decision(resume, background)

    def _after_decision(self, resume: bool, background: bool) -> Debugger:
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
        if kind == "event":
            from ..events import EVENT_CLASSES

            if value not in EVENT_CLASSES:
                raise ValueError(f"no event type {value!r}; types: {', '.join(sorted(EVENT_CLASSES))}")
        bp = Breakpoint(
            id=self._next_bp, kind=kind,  # type: ignore[arg-type]
            value="" if kind == "predicate" else str(value),
            predicate=value if kind == "predicate" else None,  # type: ignore[arg-type]
        )
        self._next_bp += 1
        self._breakpoints.append(bp)
        self._render_breakpoints()
        return bp

    def remove_breakpoint(self, bp: Breakpoint | int) -> None:
        """Remove a breakpoint (by object or id)."""
        bp_id = bp.id if isinstance(bp, Breakpoint) else bp
        self._breakpoints = [b for b in self._breakpoints if b.id != bp_id]
        self._render_breakpoints()

    @property
    def breakpoints(self) -> list[Breakpoint]:
        """The breakpoints, in the order they were added."""
        return list(self._breakpoints)

    # -- fork ------------------------------------------------------------------------------------------

    def fork(
        self, seq: int | None = None, *, results: dict[str, Any] | None = None,
        arguments: dict[str, dict[str, Any]] | None = None,
    ) -> Debugger:
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
        if arguments:
            return self._fork_with_arguments(run, arguments)
        if seq is None and results:
            wanted = set(results)
            bound = [e.seq for e in self.events if wanted & set(getattr(e, "call_ids", ()))]
            seq = max(bound) if bound else self.selected
        seq = self.selected if seq is None else seq
        history = self.timeline.messages_at(seq)
        while history and history[-1].role == "assistant":
            history = history[:-1]
        if results:
            history = _replace_results(history, results)
        forked = run.loop.start(history[1:] if run.loop.system else history)
        self._seek(run, forked, history, replayed=0)
        return Debugger(forked, window=self.window)

    def _seek(self, run: Run, forked: Run, history: list[Any], replayed: int) -> None:
        """A scripted model goes on from the turn the fork starts at (other models need nothing)."""
        model = forked.loop.model
        target = getattr(model, "then", model)
        seek = getattr(target, "seek", None)
        if callable(seek):
            kept = sum(m.role == "assistant" for m in history) - sum(m.role == "assistant" for m in run.prompt)
            kept += replayed
            attempts = sum(e.type in ("ModelRequested", "ModelRetried") and e.turn <= kept for e in self.events)
            seek(forked.run_id, attempts)

    def _fork_with_arguments(self, run: Run, arguments: dict[str, dict[str, Any]]) -> Debugger:
        import copy
        from dataclasses import replace

        turn_ev = next((e for e in self.events if e.type == "TurnCompleted" and
                        set(arguments) & {c.call_id for c in e.response.message.tool_calls}), None)  # type: ignore[attr-defined]
        if turn_ev is None:
            raise AgentnbError(f"no turn made the call(s) {', '.join(sorted(arguments))}")
        response = turn_ev.response  # type: ignore[attr-defined]
        parts = []
        for p in response.message.parts:
            if getattr(p, "kind", "") == "tool_call" and p.call_id in arguments:
                tool = run.loop.registry.get(p.name)
                args = tool.dump(tool.validate(arguments[p.call_id])) if tool else dict(arguments[p.call_id])
                p = replace(p, arguments=args, arguments_raw=json.dumps(args, ensure_ascii=False))
            parts.append(p)
        edited = replace(response, message=replace(response.message, parts=tuple(parts)),
                         raw={"forked_from": run.run_id, "edited_calls": sorted(arguments)})
        history = self.timeline.messages_at(turn_ev.seq - 1)
        while history and history[-1].role == "assistant":
            history = history[:-1]
        loop = copy.copy(run.loop)
        loop.model = _ReplayFirst(edited, run.loop.model)
        forked = loop.start(history[1:] if loop.system else history)
        self._seek(run, forked, history, replayed=1)
        return Debugger(forked, window=self.window)

    # -- view ------------------------------------------------------------------------------------------

    def _build(self) -> None:
        lay = w.Layout
        self.header = w.HTML()
        self.header.add_class("agentnb-header")
        self.diagram = w.HTML(layout=lay(width="100%"))
        self.diagram.add_class("agentnb-diagram")
        self.meter_bars = [w.FloatProgress(min=0, max=1, value=0, layout=lay(width="190px")) for _ in range(5)]
        for bar, name in zip(self.meter_bars, ("turns", "tool-calls", "tokens", "cost", "time"), strict=True):
            bar.add_class(f"agentnb-meter-{name}")
        self.meter_turns = self.meter_bars[0]
        self.meter_label = w.HTML()
        self.meters = w.HBox([*self.meter_bars, self.meter_label],
                             layout=lay(align_items="center", flex_flow="row wrap"))
        self.meters.add_class("agentnb-meters")

        def button(label: str, icon: str, tip: str, handler: Callable[[], Any], name: str) -> w.Button:
            b = w.Button(description=label, icon=icon, tooltip=tip, layout=lay(width="auto"))
            b.add_class(f"agentnb-btn-{name}")
            b.on_click(lambda _b: self._safely(handler))
            return b

        self.btn_step = button("Step", "step-forward", "one event", self.step, "step")
        self.btn_turn = button("Next turn", "forward", "run to the next model turn", self.next_turn, "next-turn")
        self.btn_cont = button("Continue", "play", "until a breakpoint, a pause or the end",
                               lambda: self.cont(background=True), "continue")
        self.btn_pause = button("Pause", "pause", "stop between two events", self.pause, "pause")
        self.btn_restart = button("Restart", "refresh", "a new run of the same loop and prompt", self.restart,
                                  "restart")
        self.btn_fork = button("Fork here", "code-fork", "a new run from the selected moment", self._fork_ui, "fork")
        self.status = w.HTML()
        self.status.add_class("agentnb-status")
        self.controls = w.HBox(
            [self.btn_step, self.btn_turn, self.btn_cont, self.btn_pause, self.btn_restart, self.btn_fork, self.status],
            layout=lay(flex_flow="row wrap", align_items="center"),
        )
        self.controls.add_class("agentnb-controls")

        self.bp_kind = w.Dropdown(options=["event", "tool", "state"], value="event", layout=lay(width="90px"))
        self.bp_value = w.Text(placeholder="e.g. ToolFinished, get_weather, WAITING_APPROVAL",
                               layout=lay(width="300px"))
        self.bp_add = w.Button(description="Add breakpoint", icon="plus", layout=lay(width="auto"))
        self.bp_add.add_class("agentnb-btn-add-breakpoint")
        self.bp_add.on_click(lambda _b: self._safely(self._add_bp_ui))
        self.bp_list = w.HBox(layout=lay(flex_flow="row wrap"))
        self.bp_list.add_class("agentnb-breakpoints")
        self.bp_row = w.HBox([self.bp_kind, self.bp_value, self.bp_add, self.bp_list],
                             layout=lay(flex_flow="row wrap", align_items="center"))

        self.approvals = w.VBox()
        self.approvals.add_class("agentnb-approvals")
        self._approval_key: tuple[str, ...] = ()

        self.btn_first = w.Button(icon="fast-backward", tooltip="first event", layout=lay(width="40px"))
        self.btn_prev = w.Button(icon="chevron-left", tooltip="previous event", layout=lay(width="40px"))
        self.btn_next = w.Button(icon="chevron-right", tooltip="next event", layout=lay(width="40px"))
        self.btn_last = w.Button(icon="fast-forward", tooltip="latest event", layout=lay(width="40px"))
        for b, name, fn in ((self.btn_first, "first", lambda: self.select(0)),
                            (self.btn_prev, "prev", lambda: self.select(self.selected - 1)),
                            (self.btn_next, "next", lambda: self.select(self.selected + 1)),
                            (self.btn_last, "last", lambda: self.select(len(self.timeline) - 1))):
            b.add_class(f"agentnb-btn-{name}")
            b.on_click(lambda _b, fn=fn: self._safely(fn))
        self.scrubber = w.IntSlider(min=0, max=0, value=0, description="event", continuous_update=False,
                                    layout=lay(width="100%"))
        self.scrubber.add_class("agentnb-scrubber")
        self.scrubber.observe(self._on_scrub, names="value")
        nav = w.HBox([self.btn_first, self.btn_prev, self.scrubber, self.btn_next, self.btn_last],
                     layout=lay(align_items="center"))
        self.cards = w.HTML(layout=lay(max_height="560px", overflow="auto"))
        self.cards.add_class("agentnb-timeline")
        left = w.VBox([nav, self.cards], layout=lay(width="50%", min_width="0"))
        self.detail = w.HTML()
        self.detail.add_class("agentnb-detail")
        self.conversation = w.HTML()
        self.conversation.add_class("agentnb-conversation")
        self.wire = w.HTML()
        self.wire.add_class("agentnb-wire-view")
        self.plots = w.HTML()
        self.plots.add_class("agentnb-plots")
        self.tabs = w.Tab([self.detail, self.conversation, self.wire, self.plots],
                          layout=lay(width="50%", min_width="0"))
        self.tabs.titles = ("Event", "Conversation", "Wire", "Plots")
        self.tabs.observe(lambda _c: self._safely(self._render_wire), names="selected_index")
        body = w.HBox([left, self.tabs], layout=lay(width="100%"))

        self.style = w.HTML(cards.CSS)
        self.widget = w.VBox(
            [self.style, self.header, self.diagram, self.meters, self.controls, self.bp_row, self.approvals, body],
            layout=lay(width="100%", overflow="hidden"),
        )
        self.widget.add_class("agentnb-root")
        self.widget.add_class("agentnb-debugger")

    def _safely(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # a click must never leave a traceback in the notebook
            self.message = f"{type(exc).__name__}: {exc}"
            self.refresh()

    def _on_scrub(self, change: dict[str, Any]) -> None:
        if change["new"] != self.selected:
            self._safely(lambda: self.select(change["new"]))

    def _add_bp_ui(self) -> None:
        value = self.bp_value.value.strip()
        kind = self.bp_kind.value
        self.add_breakpoint(**{kind: value})
        self.bp_value.value = ""

    def _fork_ui(self) -> None:
        from IPython.display import display

        child = self.fork()
        self.message = f"forked at event {self.selected}: new run {child.run.run_id if child.run else ''} below"
        self.refresh()
        display(child)

    def _render_breakpoints(self) -> None:
        chips = []
        for bp in self._breakpoints:
            x = w.Button(description=f"✕ {bp.label()}", tooltip="remove", layout=w.Layout(width="auto"))
            x.add_class("agentnb-breakpoint")
            x.on_click(lambda _b, bid=bp.id: self._safely(lambda: self.remove_breakpoint(bid)))
            chips.append(x)
        self.bp_list.children = tuple(chips)

    def _render_approvals(self) -> None:
        run = self.run
        pending = run.pending_approvals() if run is not None else []
        key = tuple(c.call_id for c in pending)
        if key == self._approval_key:
            return
        self._approval_key = key
        tools = {t.name: t for t in (run.loop.tools if run is not None else [])}
        self.approvals.children = tuple(self._approval_row(call, tools.get(call.name)) for call in pending)

    _ASKS = {
        "approval": "wants to run",
        "client_result": "runs on the client: submit its result",
        "outcome_unknown": "was running when the process stopped: did it happen? Retry it or record its result",
        "escalation": "ran out: grant one more allowance, or deny to finalize with what the model has",
    }

    def _approval_row(self, call: Any, tool: Any) -> w.Widget:
        risk = tool.risk if tool else "?"
        info = w.HTML(
            f'<div class="agentnb-root"><b>{cards.esc(call.name)}</b> {cards.esc(self._ASKS.get(call.kind, ""))} '
            f'<span class="agentnb-badge agentnb-badge-wait">risk {cards.esc(risk)}</span> '
            f"<code>{cards.esc(call.call_id)}</code>{cards.json_tree(call.arguments)}</div>"
        )
        reason = w.Text(placeholder="reason (sent to the model)", layout=w.Layout(width="260px"))
        reason.add_class("agentnb-deny-reason")
        error = w.HTML()
        error.add_class("agentnb-edit-error")
        cid = call.call_id
        deny = w.Button(description="Deny", icon="times", button_style="danger", layout=w.Layout(width="auto"))
        deny.add_class("agentnb-btn-deny")
        deny.on_click(lambda _b: self._safely(lambda: self.deny(cid, reason.value or None, background=True)))
        buttons: list[w.Widget] = []
        if call.kind != "client_result":
            label = {"outcome_unknown": "Retry with the same key", "escalation": "Grant more"}.get(call.kind, "Approve")
            approve = w.Button(description=label, icon="check", button_style="success", layout=w.Layout(width="auto"))
            approve.add_class("agentnb-btn-approve")
            approve.on_click(lambda _b: self._safely(lambda: self.approve(cid, background=True)))
            buttons.append(approve)
        buttons += [deny, reason]
        parts: list[w.Widget] = [info, w.HBox(buttons, layout=w.Layout(align_items="center", flex_flow="row wrap"))]
        if call.kind == "approval":
            edit = w.Textarea(value=json.dumps(call.arguments, indent=2), layout=w.Layout(width="100%", height="90px"))
            edit.add_class("agentnb-edit-arguments")
            edited = w.Button(description="Approve edited arguments", icon="edit", layout=w.Layout(width="auto"))
            edited.add_class("agentnb-btn-approve-edited")
            edited.on_click(lambda _b: self._approve_edited(cid, edit.value, error))
            parts += [w.HTML('<span class="agentnb-muted">edit the arguments (checked against the schema):</span>'),
                      edit, w.HBox([edited, error], layout=w.Layout(align_items="center"))]
        elif call.kind != "escalation":
            result = w.Textarea(placeholder="the result, as JSON (or plain text)",
                                layout=w.Layout(width="100%", height="70px"))
            result.add_class("agentnb-submit-value")
            submit = w.Button(description="Submit result", icon="upload", layout=w.Layout(width="auto"))
            submit.add_class("agentnb-btn-submit-result")
            submit.on_click(lambda _b: self._submit(cid, result.value, error))
            parts += [result, w.HBox([submit, error], layout=w.Layout(align_items="center"))]
        return w.VBox(parts, layout=w.Layout(border="1px solid var(--jp-warn-color1)", padding="6px", margin="4px 0"))

    def submit_result(self, call_id: str, value: Any, *, by: str | None = None, resume: bool = True,
                      background: bool = False) -> Debugger:
        """Answer a waiting call with a result (a client tool's value, or an unknown outcome reconciled)."""
        self._need_run().submit_result(call_id, value, by=by)
        return self._after_decision(resume, background)

    def _submit(self, call_id: str, text: str, error: w.HTML) -> None:
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        try:
            self.submit_result(call_id, value, by="debugger", background=True)
        except Exception as exc:
            error.value = f'<span class="agentnb-err">{cards.esc(exc)}</span>'

    def _approve_edited(self, call_id: str, text: str, error: w.HTML) -> None:
        try:
            arguments = json.loads(text)
        except ValueError as exc:
            error.value = f'<span class="agentnb-err">not JSON: {cards.esc(exc)}</span>'
            return
        if not isinstance(arguments, dict):
            error.value = '<span class="agentnb-err">the arguments must be a JSON object</span>'
            return
        try:
            self.approve(call_id, arguments=arguments, by="debugger", background=True)
        except Exception as exc:
            from pydantic import ValidationError

            if isinstance(exc, ValidationError):
                msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                error.value = f'<span class="agentnb-err">{cards.esc(msgs)}</span>'
            else:
                error.value = f'<span class="agentnb-err">{cards.esc(exc)}</span>'

    def _set_running(self, running: bool) -> None:
        for b in (self.btn_step, self.btn_turn, self.btn_cont, self.btn_restart, self.btn_fork):
            b.disabled = running
        self.btn_pause.disabled = not running

    def _schedule_refresh(self) -> None:
        now = time.monotonic()
        if now - self._last_refresh > 0.1:
            self.refresh()
            return
        self._dirty = True
        if self._timer is None:
            self._timer = threading.Timer(0.15, self._flush)
            self._timer.daemon = True
            self._timer.start()

    def _flush(self) -> None:
        self._timer = None
        if self._dirty:
            self.refresh()

    def refresh(self) -> None:
        """Redraw everything from the timeline (cheap: only a window of cards is drawn)."""
        with self._lock:
            self._dirty = False
            self._last_refresh = time.monotonic()
            tl = self.timeline
            n = len(tl)
            sel = max(0, min(self.selected, n - 1))
            self.selected = sel
            state = tl.state.state
            rs = tl.state
            first = tl.events[0] if n else None
            model = getattr(first, "model", "?")
            mode = "live" if self.live else f"replay · {n}/{len(self._replay)} events"
            reason = f" — {cards.esc(rs.reason)}" if rs.reason else ""
            self.header.value = (
                f'<div class="agentnb-root"><b>agentnb</b> · run <code>{cards.esc(rs.run_id or "-")}</code> · '
                f"{cards.esc(model)} · {mode} · {_badge(state)}{reason}</div>"
            )
            shown_state = tl.events[sel].state if n else state
            self.diagram.value = f'<div class="agentnb-root agentnb-diagram">{state_diagram(shown_state)}</div>'
            self._render_meters(sel)
            msg = cards.esc(self.message)
            at = "" if self.follow else f' · <span class="agentnb-muted">viewing event {sel} of {n - 1}</span>'
            self.status.value = f'<span class="agentnb-root">{msg}{at}</span>'
            done = state in TERMINAL
            if not self.running:
                self.btn_step.disabled = done or (self.live and state is LoopState.WAITING_APPROVAL)
                self.btn_cont.disabled = self.btn_step.disabled
                self.btn_turn.disabled = self.btn_step.disabled
                self.btn_pause.disabled = True
                self.btn_fork.disabled = not self.live
            self.scrubber.unobserve(self._on_scrub, names="value")
            self.scrubber.max = max(0, n - 1)
            self.scrubber.value = sel
            self.scrubber.observe(self._on_scrub, names="value")
            ctx = cards.CardContext(tl)
            light = cards.CardContext(tl, light=True)
            start = max(0, min(sel - self.window // 2, n - self.window))
            end = min(n, start + self.window)
            more_before = f'<div class="agentnb-muted">… {start} earlier events</div>' if start else ""
            more_after = f'<div class="agentnb-muted">… {n - end} later events</div>' if end < n else ""
            self.cards.value = (
                f'<div class="agentnb-root">{more_before}'
                + "".join(cards.card(tl.events[i], light, selected=i == sel) for i in range(start, end))
                + f"{more_after}</div>"
            )
            if n:
                ev = tl.events[sel]
                self.detail.value = (
                    f'<div class="agentnb-root"><div class="agentnb-card agentnb-selected-detail">'
                    f'<div style="padding:4px 6px">{cards.summary_html(ev)}</div>'
                    f'<div class="agentnb-body">{cards.body_html(ev, ctx)}</div></div></div>'
                )
                msgs = tl.messages_at(sel)
                self.conversation.value = (
                    f'<div class="agentnb-root agentnb-time-travel" data-seq="{sel}">'
                    f'<div class="agentnb-muted">the conversation after event {sel} ({cards.esc(ev.type)}): '
                    f"{len(msgs)} messages</div>{cards.conversation_html(msgs)}</div>"
                )
            self._render_approvals()
            self._render_wire()

    def _render_wire(self) -> None:
        """The wire and plot tabs are drawn only while open: four renderings or four figures are not free."""
        if self.tabs.selected_index == 3 and len(self.timeline):
            self.plots.value = f'<div class="agentnb-root">{plots_html(self.timeline.events)}</div>'
            return
        if self.tabs.selected_index != 2 or not len(self.timeline):
            return
        from .wire import wire_html

        self.wire.value = f'<div class="agentnb-root">{wire_html(self.timeline, self.selected)}</div>'

    def _render_meters(self, sel: int) -> None:
        tl = self.timeline
        c = tl.counters_at(sel)
        first = tl.events[0] if len(tl) else None
        settings = getattr(first, "settings", {}) or {}
        budget = settings.get("budget") or {"max_turns": settings.get("max_turns")}
        tokens = c.input_tokens + c.output_tokens
        elapsed = (tl.events[sel].ts - first.ts).total_seconds() if first is not None and len(tl) else 0.0
        prices = budget.get("prices") or {}
        spent = cost(c.tokens_by_model, prices) if prices else None
        rows = [
            ("turns", c.turns, budget.get("max_turns"), f"{c.turns}"),
            ("tool calls", c.tool_calls, budget.get("max_tool_calls"), f"{c.tool_calls}"),
            ("tokens", tokens, budget.get("max_total_tokens"), f"{tokens:,}"),
            ("cost", spent, budget.get("max_cost"), "—" if spent is None else f"${spent:.4f}"),
            ("time", elapsed, budget.get("deadline_s"), f"{elapsed:.1f} s"),
        ]
        for (label, value, limit, _), bar in zip(rows, self.meter_bars, strict=True):
            bar.layout.display = "" if limit else "none"
            if limit:
                bar.max = float(limit)
                bar.value = min(float(value or 0), float(limit))
                bar.description = label
                bar.bar_style = "danger" if value is not None and value >= limit else ""
        parts = [f"{label} {shown}" + (f" / {limit:g}" if limit else "") for label, _, limit, shown in rows
                 if label != "cost" or spent is not None]
        self.meter_label.value = (
            f'<span class="agentnb-root">{" · ".join(parts)} '
            f'<span class="agentnb-muted">({c.input_tokens:,} in, {c.output_tokens:,} out)</span></span>'
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        mode = "live" if self.live else "replay"
        return f"<agentnb.Debugger {mode} {self.state.value} {len(self.timeline)} events>"


class _ReplayFirst:
    """A model that answers a fork's first request with a given (edited) turn, then hands over."""

    def __init__(self, first: Any, then: Any) -> None:
        self.first = first
        self.then = then
        self.provider = getattr(then, "provider", "?")
        self.name = getattr(then, "name", "?")
        self._served: set[str] = set()

    def respond(self, request: Any) -> Any:
        if request.run_id not in self._served:
            self._served.add(request.run_id)
            return iter((self.first,))
        return self.then.respond(request)


def plots_html(events: list[BaseEvent]) -> str:
    """The run's timeline, tokens per turn, tool latency and status per tool, as inline PNG images."""
    try:
        from matplotlib.figure import Figure  # a figure outside pyplot: nothing shows up in the cell
    except ImportError:
        return '<span class="agentnb-muted">plots need matplotlib: pip install "agentnb[analysis]"</span>'
    import base64

    from .. import plots

    frames = Transcript(list(events)).frames
    images = []
    for name, size in (("timeline", (7.0, 2.8)), ("tokens", (7.0, 2.4)), ("latency", (7.0, 2.4)),
                       ("status", (7.0, 2.4))):
        fig = Figure(figsize=size, layout="constrained")
        try:
            getattr(plots, name)(frames, ax=fig.subplots())
            data = base64.b64encode(plots.to_png(fig, dpi=80)).decode()
            images.append(f'<img alt="{name}" src="data:image/png;base64,{data}" style="max-width:100%">')
        except Exception as exc:  # a plot that has nothing to show must not break the debugger
            images.append(f'<div class="agentnb-muted">{name}: {cards.esc(exc)}</div>')
    return "".join(images)


def _replace_results(history: list[Any], results: dict[str, Any]) -> list[Any]:
    from dataclasses import replace

    from ..messages import Message, ToolResultPart
    from ..tools import jsonable, render_value

    out: list[Message] = []
    found: set[str] = set()
    for m in history:
        if m.role == "tool":
            parts = []
            for p in m.parts:
                if isinstance(p, ToolResultPart) and p.call_id in results:
                    value = results[p.call_id]
                    parts.append(replace(p, status="ok", content=render_value(value), audit=jsonable(value)))
                    found.add(p.call_id)
                else:
                    parts.append(p)
            m = replace(m, parts=tuple(parts))
        out.append(m)
    missing = set(results) - found
    if missing:
        raise AgentnbError(f"no result for call(s) {', '.join(sorted(missing))} before the fork point")
    return out
