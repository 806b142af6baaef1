"""Stepping into a paused run from the debugger: tell the model something, cancel one call, end the run.

Theory of operation. :class:`Intervening` is a mixin of :class:`~agentnb._debugger.Debugger`: three public methods,
:meth:`~Intervening.interject`, :meth:`~Intervening.cancel_call` and :meth:`~Intervening.end_run`, each of which
calls the run's own method (:meth:`agentnb.Run.interject`, :meth:`~agentnb.Run.cancel_call`,
:meth:`~agentnb.Run.end`) with the debugger's ``by`` -- who the person is, given to the debugger or the OS user
name. The rules and refusals are the engine's (:func:`agentnb._engine.receive.intervention`): a headless run, a
run not started or over, a blank reason, a call answered already. A debugger that is continuing refuses too
(press Pause first): a person steps into a run that stands still.

The page's box (``widgets/debugger.js``: ``drawIntervene``) reads the view's ``intervene`` trait, which
:func:`state` writes at each refresh: whether the run can be stepped into now (and why not), the calls that can
be cancelled, who speaks, and what became of the last try. Its buttons send ``intervene`` messages that
:func:`from_page` turns into the methods above; a refusal is the trait's ``error``, shown on the page, never a
traceback. The event each one appends is selected (the debugger follows), so its card shows at once.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any

from .._run import Run
from .._states import TERMINAL, LoopState
from .._visible import visible
from ..events import BaseEvent
from ..exceptions import AgentnbError

__all__ = ["Intervening", "default_by", "from_page", "state"]

_OPEN_STATES = frozenset({LoopState.VALIDATING, LoopState.WAITING_APPROVAL, LoopState.EXECUTING})
"""The states in which a turn's calls are read and not all answered: calls may be cancelled."""


def default_by() -> str:
    """Who a debugger's person is when it is given no ``by=``: the OS user name (``"the user"`` if none)."""
    try:
        return getpass.getuser() or "the user"
    except Exception:  # no user name in this environment (a container without an entry in /etc/passwd)
        return "the user"


class Intervening:
    """A person steps into the debugger's paused run (a mixin: the debugger gives ``run``, ``by``, ``refresh``).

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
        >>> dbg = anb.Debugger(run.start("Refund order 42"), by="ana").cont()
        >>> dbg.interject("only refund half").type, dbg.end_run("a duplicate ticket").type
        ('Interjected', 'RunFinished')
        >>> dbg.run.reason
        'ended by ana: a duplicate ticket'
    """

    run: Run | None
    by: str
    follow: bool
    intervene_said = ""
    """What the last step-in did, in words (the page shows it)."""
    intervene_error = ""
    """Why the last step-in was refused (the page shows it; empty after one that worked)."""

    def interject(self, text: str) -> BaseEvent:
        """Tell the paused run's model something: a user message its next request sends after the results."""
        return self._step_in(lambda run: run.interject(text, by=self.by), "told the model")

    def cancel_call(self, call_id: str, reason: str) -> BaseEvent:
        """Cancel one running or queued call of the paused run; the model reads "Cancelled by <by>: <reason>"."""
        return self._step_in(lambda run: run.cancel_call(call_id, reason, by=self.by), f"cancelled {call_id}")

    def end_run(self, reason: str) -> BaseEvent:
        """End the paused run (``CANCELLED``); its reason says who ended it and why."""
        return self._step_in(lambda run: run.end(reason, by=self.by), "ended the run")

    def _step_in(self, act: Callable[[Run], BaseEvent], what: str) -> BaseEvent:
        self.intervene_error = self.intervene_said = ""
        try:
            run = self.run
            if run is None:
                raise AgentnbError("a replayed transcript is read-only: there is no run to step into")
            if self.running:
                raise AgentnbError("the run is going: press Pause first (a person steps into a run that stands "
                                   "still)")
            self.follow = True  # the event appended is selected: its card shows
            event = act(run)
        except AgentnbError as exc:
            self.intervene_error = str(exc)
            self.refresh()
            raise
        self.intervene_said = f"{self.by} {what} (event {event.seq})"
        self.refresh()
        return event

    @property
    def running(self) -> bool:
        """True while Continue runs in the background (the controller's, which comes first)."""
        raise NotImplementedError

    def refresh(self) -> None:
        """Bring the page up to date (the view's, which comes first)."""
        raise NotImplementedError


def state(dbg: Intervening) -> dict[str, Any]:
    """The page's ``intervene`` trait: may a person step in now, which calls can be cancelled, what happened."""
    run = dbg.run
    if run is None:
        return {}
    rs = run.view
    now = rs.state
    why = ("a headless run: nobody is there to step in" if run.loop.config.headless else
           "the run has not started: step it first" if now is LoopState.NEW else
           f"the run is over ({now.value})" if now in TERMINAL else
           "the run is going: press Pause first" if dbg.running else "")
    calls = [{"call_id": c.call_id, "shown_id": visible(c.call_id)[0], "name": visible(c.name)[0],
              "status": c.status.replace("_", " ")}
             for c in rs.calls.values() if c.status != "done" and c.kind != "escalation"] if now in _OPEN_STATES else []
    return {"by": dbg.by, "why": why, "calls": calls, "said": dbg.intervene_said, "error": dbg.intervene_error}


_METHODS: dict[str, Callable[[Intervening, dict[str, Any]], Any]] = {
    "interject": lambda d, a: d.interject(str(a.get("text") or "")),
    "cancel_call": lambda d, a: d.cancel_call(str(a.get("call_id") or ""), str(a.get("reason") or "")),
    "end": lambda d, a: d.end_run(str(a.get("reason") or "")),
}


def from_page(dbg: Intervening, args: dict[str, Any]) -> None:
    """A click in the page's box: ``{"what": "interject" | "cancel_call" | "end", ...}``; a refusal is shown."""
    method = _METHODS.get(str(args.get("what")))
    if method is None:
        dbg.intervene_error = f"no such control: {args.get('what')!r}"
        dbg.refresh()
        return
    try:
        method(dbg, args)
    except AgentnbError:
        pass  # intervene_error holds it, and the page shows it
