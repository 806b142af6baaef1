"""The approvals inbox in a notebook: one row per waiting call, decided one at a time or a selection at a time.

Theory of operation. :class:`InboxWidget` holds an :class:`~agentnb._inbox.Inbox` (the plain API, whose state
is the store) and its view, :class:`InboxView`, an anywidget whose front end is ``widgets/inbox.js`` and
``.css``. The rows are the inbox's items as plain data (arguments and texts with their invisible and
direction-changing characters written out, :mod:`agentnb._visible`); the page groups, filters and selects them
and every button sends a message that calls one public method here -- :meth:`InboxWidget.approve`,
:meth:`~InboxWidget.deny`, :meth:`~InboxWidget.edit`, :meth:`~InboxWidget.submit`, :meth:`~InboxWidget.open`,
:meth:`~InboxWidget.end` -- with the keys of the rows the person saw, so tests call the same code a click does,
and every decision carries the widget's ``by``. What each decision did (applied, or refused and why) is the
view's ``outcomes``.

Live updates. While the widget is shown, a thread waits on ``store.wait_for_change`` (PostgreSQL: ``LISTEN``;
SQLite: one ``PRAGMA data_version`` per interval; memory: a listener on append) and lists the inbox again
when the store changed, at most once per ``interval`` (a change made while it lists is news for the next
wait), and every :attr:`InboxWidget.FULL_EVERY` seconds whatever; :meth:`InboxWidget.close` stops it.

In a notebook the widget is two outputs, like the debugger: a static table (what a saved notebook, GitHub or
nbconvert shows), then the widget, which hides the table once it is drawn; a third output holds the debugger of
a row opened with :meth:`InboxWidget.open`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

import anywidget
import traitlets as t

from ._debugger import Debugger, assets
from ._loop import Loop
from ._run import Run
from ._transcript import Transcript
from ._visible import FLAG, hides, visible
from .exceptions import StoreUnavailable

__all__ = ["InboxView", "InboxWidget", "row_of"]

Key = tuple[str, str]
Pending = Any
"""An :class:`agentnb._inbox.Pending` (this module is what ``Inbox.widget()`` loads: it does not import the inbox)."""
Decided = Any
"""An :class:`agentnb._inbox.Decided`."""


class InboxLike(Protocol):
    """What the widget uses of an :class:`~agentnb._inbox.Inbox`."""

    store: Any
    loop: Any
    by: str | None
    problems: dict[str, str]

    def items(self) -> list[Pending]: ...  # noqa: D102
    def approve(self, items: Any, *, by: str | None = None, note: str | None = None,  # noqa: D102
                arguments: dict[str, Any] | None = None, then_run: bool = False) -> Decided: ...
    def deny(self, items: Any, *, by: str | None = None, reason: str | None = None,  # noqa: D102
             then_run: bool = False) -> Decided: ...
    def submit(self, item: Any, value: Any, *, by: str | None = None, note: str | None = None,  # noqa: D102
               then_run: bool = False) -> Decided: ...
    def end(self, items: Any, reason: str, *, by: str | None = None) -> Decided: ...  # noqa: D102
    def loop_for(self, run_id: str) -> Loop: ...  # noqa: D102
    def _repr_html_(self) -> str: ...


def row_of(p: Pending, now: datetime | None = None) -> dict[str, Any]:
    """One waiting call as the page shows it: plain JSON data, every text made visible."""
    args, flagged = visible(json.dumps(p.arguments, ensure_ascii=False, indent=1), json=True)
    reasoning, said = visible(p.reasoning)
    return {"key": f"{p.run_id}\n{p.call_id}", "run_id": p.run_id, "call_id": p.call_id, "tool": visible(p.tool)[0],
            "risk": p.risk, "kind": p.kind, "arguments": args, "reasoning": reasoning, "digest": p.digest,
            "flag": FLAG if flagged or said or hides(p.tool) else "", "batch": p.batch or "",
            "tags": [visible(tag)[0] for tag in p.tags],
            "asked_at": p.asked_at.isoformat(), "age_s": round(p.age_s(now), 1),
            "expires_at": p.expires_at.isoformat() if p.expires_at else "", "note": visible(p.note or "")[0]}


class InboxView(anywidget.AnyWidget):
    """The inbox in the page (``widgets/inbox.js`` and ``.css``): the rows, who decides, and what became of it."""

    _esm = assets.text("inbox.js")
    _css = assets.text("inbox.css")

    rows: t.List[dict[str, Any]] = t.List().tag(sync=True)
    by = t.Unicode("").tag(sync=True)
    outcomes: t.List[dict[str, Any]] = t.List().tag(sync=True)
    """What the last decision did, one per item: ``{run_id, call_id, decision, applied, reason}``."""
    message = t.Unicode("").tag(sync=True)
    problems = t.Dict().tag(sync=True)
    updated = t.Unicode("").tag(sync=True)


class InboxWidget:
    """An :class:`~agentnb._inbox.Inbox` as a widget: ``by`` is who decides from it (recorded with each decision).

    Example:
        >>> import agentnb as anb
        >>> store = anb.MemoryStore()
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
        >>> _ = loop.start("Refund order 42", run_id="r42").run()
        >>> w = anb.Inbox(store, loop=loop, by="ana").widget()
        >>> [r["tool"] for r in w.view.rows]
        ['create_refund']
        >>> w.approve([("r42", w.view.rows[0]["call_id"])]).applied[0].run_id, w.view.rows
        ('r42', [])
    """

    def __init__(self, inbox: InboxLike, *, by: str | None = None, interval: float = 0.5) -> None:
        self.inbox = inbox
        self.by = by if by is not None else inbox.by
        self.interval = interval
        self.view = InboxView(by=self.by or "")
        self.view.add_class("agentnb-inbox-app")
        self._items: dict[Key, Pending] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.output: Any = None
        """The ipywidgets ``Output`` a row's debugger is displayed in (made when the widget is displayed)."""
        self.opened: Debugger | None = None
        self.view.on_msg(self._on_msg)
        self.refresh()

    # -- reading -----------------------------------------------------------------------------------------

    def refresh(self) -> list[Pending]:
        """List the inbox again (from the store) and show it."""
        with self._lock:
            try:
                return self._relist()
            except StoreUnavailable as exc:  # the rows stay as last listed, and the page says why they are old
                self.view.message = f"could not list the inbox again, the rows are as listed before: {exc}"
                return list(self._items.values())

    def _relist(self) -> list[Pending]:
        with self._lock:
            items = self.inbox.items()
            self._items = {p.key: p for p in items}
            now = datetime.now(UTC)
            self.view.rows = [row_of(p, now) for p in items]
            self.view.problems = dict(self.inbox.problems)
            self.view.updated = now.isoformat()
            return items

    def items(self, keys: Iterable[Key | str]) -> list[Pending]:
        """The items the keys name, as the person saw them (a key not shown any more is skipped)."""
        out = []
        for k in keys:
            key = tuple(k.split("\n", 1)) if isinstance(k, str) else tuple(k)
            if key in self._items:
                out.append(self._items[key])
        return out

    # -- deciding: each is what a button calls -------------------------------------------------------------

    def approve(self, keys: Iterable[Key | str], note: str | None = None) -> Decided:
        """Approve the rows ``keys`` name (one or a selection)."""
        return self._decided(lambda items: self.inbox.approve(items, by=self._by(), note=note, then_run=True), keys)

    def deny(self, keys: Iterable[Key | str], reason: str | None = None) -> Decided:
        """Deny the rows, with a reason the model reads."""
        return self._decided(lambda items: self.inbox.deny(items, by=self._by(), reason=reason, then_run=True), keys)

    def edit(self, key: Key | str, arguments: dict[str, Any] | str, note: str | None = None) -> Decided:
        """Approve one row with edited arguments (a JSON object, or its text); checked against the tool's schema.

        Raises:
            ValueError: text that is not a JSON object (the page shows it; nothing is recorded).
        """
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError as exc:
                raise ValueError(f"the edited arguments are not JSON ({exc}); nothing was recorded") from None
        if not isinstance(arguments, dict):
            raise ValueError("the edited arguments must be a JSON object; nothing was recorded")
        edited = arguments
        return self._decided(lambda items: self.inbox.approve(items, by=self._by(), note=note, arguments=edited,
                                                              then_run=True), [key])

    def submit(self, key: Key | str, value: Any, note: str | None = None) -> Decided:
        """Answer one row with a result (a client tool's, or a reconciled outcome); JSON text is read as JSON."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        answer = value
        return self._decided(lambda items: self.inbox.submit(items[0], answer, by=self._by(), note=note,
                                                             then_run=True), [key])

    def end(self, keys: Iterable[Key | str], reason: str) -> Decided:
        """End the runs of the rows ``keys`` name, with a reason (recorded with who ended each)."""
        return self._decided(lambda items: self.inbox.end(items, reason, by=self._by()), keys)

    def open(self, key: Key | str) -> Debugger:
        """The debugger of a row's run at its pause (live when the inbox has a loop), shown below the inbox."""
        (p,) = self.items([key]) or [None]
        if p is None:
            raise KeyError(f"no row {key!r} in the inbox (it was decided, or the inbox changed: refresh)")
        if self.inbox.loop is not None:
            dbg = Debugger(Run.resume(p.run_id, loop=self.inbox.loop_for(p.run_id), store=self.inbox.store))
        else:
            dbg = Debugger(Transcript(self.inbox.store.load(p.run_id)), start="end")
        self.opened = dbg
        if self.output is not None:
            from IPython.display import display

            self.output.clear_output()
            with self.output:
                display(dbg)
        return dbg

    def _by(self) -> str:
        if not self.by:
            raise ValueError("this inbox widget has no by= (who decides): anb.Inbox(store, loop=loop, by='ana')")
        return self.by

    def _decided(self, decide: Callable[[list[Pending]], Decided], keys: Iterable[Key | str]) -> Decided:
        with self._lock:
            items = self.items(keys)
            if not items:
                self.view.message = "nothing decided: those rows are gone (decided elsewhere?); listed again"
                self.refresh()
                return None
            done = decide(items)
            self._show(done)
            try:
                self._relist()
            except Exception as exc:  # the store went away: what was decided (or not) stays on the page
                self.view.message += f" -- the inbox could not be listed again ({exc})"
            return done

    def _show(self, done: Decided) -> None:
        self.view.outcomes = [{"run_id": o.run_id, "call_id": o.call_id, "decision": o.decision,
                               "applied": o.applied, "reason": o.reason or ""} for o in done.outcomes]
        self.view.message = f"{len(done.applied)} applied, {len(done.refused)} refused" + "".join(
            f" -- {o.call_id}: {o.reason}" for o in done.refused[:3])

    # The page's controls: each message names a method above (and its arguments), nothing else.
    _CALLS: dict[str, Callable[[InboxWidget, dict[str, Any]], Any]] = {
        "refresh": lambda w, a: w.refresh(),
        "approve": lambda w, a: w.approve(list(a["keys"]), a.get("note") or None),
        "deny": lambda w, a: w.deny(list(a["keys"]), a.get("reason") or None),
        "edit": lambda w, a: w.edit(str(a["key"]), str(a["arguments"])),
        "submit": lambda w, a: w.submit(str(a["key"]), str(a["value"])),
        "open": lambda w, a: w.open(str(a["key"])),
        "end": lambda w, a: w.end(list(a["keys"]), str(a.get("reason") or "")),
    }

    def _on_msg(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        method = self._CALLS.get(str(content.get("method"))) if content.get("kind") == "call" else None
        if method is None:
            return
        try:
            method(self, content.get("args") or {})
        except Exception as exc:  # a click never leaves a traceback in the notebook
            self.view.message = f"not done: {exc}"

    # -- live updates ------------------------------------------------------------------------------------

    def watch(self) -> None:
        """List the inbox again whenever the store changes (a thread; :meth:`close` stops it)."""
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch, name="agentnb-inbox-watch", daemon=True)
        self._watcher.start()

    FULL_EVERY = 30.0
    """Seconds after which the inbox is listed again even with no news (a store object shared by two watchers)."""

    def _watch(self) -> None:
        wait = self.inbox.store.wait_for_change  # part of the Store protocol: every store has it
        listed = time.monotonic()
        while not self._stop.is_set():
            try:
                changed = wait(timeout=self.interval)
                if self._stop.is_set():
                    return
                if changed or time.monotonic() - listed > self.FULL_EVERY:
                    self.refresh()
                    listed = time.monotonic()
                    self._stop.wait(self.interval)  # at most one listing per interval, however busy the store
            except Exception as exc:  # the store went away: say so, try again after a while
                self.view.message = f"live updates paused: {exc}"
                self._stop.wait(max(self.interval, 1.0))

    def close(self) -> None:
        """Stop the live updates."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None

    # -- display -----------------------------------------------------------------------------------------

    def _ipython_display_(self) -> None:
        """Three outputs: the static table (a saved notebook's view), the widget, and where a row's debugger opens."""
        from IPython import get_ipython
        from IPython.display import display

        static = {"text/html": self.inbox._repr_html_() + assets.stylesheet("inbox.css"),
                  "text/plain": repr(self.inbox)}
        if getattr(get_ipython(), "kernel", None) is None:
            display(static, raw=True)
            return
        import ipywidgets

        display(static, raw=True)
        display(self.view)
        if self.output is None:
            self.output = ipywidgets.Output()
            self.output.add_class("agentnb-inbox-opened")
        display(self.output)
        self.watch()

    def __repr__(self) -> str:
        return f"<agentnb.InboxWidget by={self.by!r} {len(self.view.rows)} waiting>"
