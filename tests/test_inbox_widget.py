"""The inbox as a widget, without a browser: the rows it shows, the buttons' methods, live updates per store.

The page's buttons send messages that call the same methods (``_on_msg``), so these tests drive the code a click
does; ``tests/browser/test_inbox_browser.py`` clicks them in JupyterLab.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._inbox_widget import InboxWidget
from agentnb._states import LoopState as S
from agentnb._visible import FLAG

from .test_inbox import KEY, make_loop, refund

HERE = Path(__file__).parent


def until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Wait for ``check()`` to be true (the watcher's thread refreshes the rows), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.02)
    raise AssertionError(f"not true after {timeout} s")


def paused_widget(store: Any, n: int, by: str | None = "ana") -> InboxWidget:
    loop = make_loop(store)
    anb.batch(loop, [f"refund order {i}" for i in range(n)], name="support", progress=False)
    return anb.Inbox(store, loop=loop, by=by).widget(interval=0.05)  # type: ignore[no-any-return]


def click(w: InboxWidget, method: str, **args: Any) -> None:
    w._on_msg(w.view, {"kind": "call", "method": method, "args": args}, [])


def test_the_rows_show_each_waiting_call_with_hidden_characters_written_out() -> None:
    store = anb.MemoryStore()
    loop = make_loop(store)
    loop.start("refund order 1", run_id="plain").run()
    sneaky = anb.Loop(model=anb.ScriptedModel([{"text": "ok \u202egnp.exe", "tool_calls": [
        {"name": "refund", "arguments": {"order_id": "7\u200b", "cents": 5}}]}, {"text": "done"}]),
        tools=[refund], store=store)
    sneaky.start("refund", run_id="sneaky").run()
    w = anb.Inbox(store, loop=loop, by="ana").widget()
    rows = {r["run_id"]: r for r in w.view.rows}
    assert rows["plain"]["flag"] == "" and rows["plain"]["tool"] == "refund" and rows["plain"]["risk"] == "write"
    assert rows["sneaky"]["flag"] == FLAG and "\\u200b" in rows["sneaky"]["arguments"]
    assert "⟨U+202E⟩" in rows["sneaky"]["reasoning"] and "\u202e" not in rows["sneaky"]["reasoning"]
    static = anb.Inbox(store)._repr_html_()
    assert "\\u200b" in static and FLAG in static and "\u200b" not in static  # arguments as JSON, escaped


def test_one_row_and_a_selection_are_decided_by_the_widgets_person(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "w.db", key=KEY)
    w = paused_widget(store, 5)
    keys = {r["run_id"]: r["key"] for r in w.view.rows}
    click(w, "approve", keys=[keys["support-0"]], note="fine")
    assert "support-0" not in {r["run_id"] for r in w.view.rows} and w.view.message == "1 applied, 0 refused"
    click(w, "deny", keys=[keys["support-1"], keys["support-2"]], reason="ask the customer first")
    assert {r["run_id"] for r in w.view.rows} == {"support-3", "support-4"}
    loop = make_loop(store)
    assert anb.Run.resume("support-0", loop=loop).output == "done: refunded 0 cents on order 0"
    assert anb.Run.resume("support-2", loop=loop).output == "done: Denied by the user: ask the customer first"
    decisions = anb.Inbox(store).decisions()
    assert set(decisions.dropna(subset=["decision"])["decided_by"]) == {"ana"}
    click(w, "edit", key=keys["support-3"], arguments='{"order_id": "3", "cents": "lots"}')
    assert "schema" in w.view.outcomes[0]["reason"] and len(w.view.rows) == 2  # refused, still waiting
    click(w, "edit", key=keys["support-3"], arguments="{not json")
    assert w.view.message.startswith("not done: the edited arguments are not JSON")
    click(w, "edit", key=keys["support-3"], arguments='{"order_id": "3", "cents": 30}')
    assert anb.Run.resume("support-3", loop=loop).output == "done: refunded 30 cents on order 3"
    stale = keys["support-3"]  # decided: a second click finds no row and says so
    click(w, "approve", keys=[stale])
    assert "nothing decided" in w.view.message


def test_a_second_widget_deciding_the_same_call_is_refused_with_who_decided(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "w.db", key=KEY)
    ana = paused_widget(store, 1)
    ben = anb.Inbox(anb.SqliteStore(tmp_path / "w.db", key=KEY), loop=make_loop(store), by="ben").widget()
    key = ana.view.rows[0]["key"]
    assert ana.approve([key]).applied
    done = ben.deny([key], "no")  # ben's rows are from before ana decided
    assert done.applied == [] and done.refused[0].reason.startswith("already approved by ana at ")
    assert ben.view.outcomes[0]["applied"] is False and ben.view.rows == []


def test_a_client_result_is_submitted_and_a_row_opens_its_runs_debugger() -> None:
    @anb.tool(client=True)
    def pick_date(question: str) -> str:
        """Ask the user for a date (the client answers)."""
        return ""

    store = anb.MemoryStore()
    ask = {"tool_calls": [{"name": "pick_date", "arguments": {"question": "when?"}}]}
    loop = anb.Loop(model=anb.ScriptedModel([ask, lambda m: {"text": f"on {m[-1].tool_results[0].content}"}]),
                    tools=[pick_date], store=store)
    loop.start("book", run_id="book").run()
    w = anb.Inbox(store, loop=loop, by="ana").widget()
    (row,) = w.view.rows
    assert row["kind"] == "client_result"
    dbg = w.open(row["key"])
    assert dbg.state is S.WAITING_APPROVAL and dbg.run is not None and dbg.run.run_id == "book"
    dbg.run.release()
    click(w, "submit", key=row["key"], value='"2026-12-24"')
    assert anb.Run.resume("book", loop=loop).output == "on 2026-12-24"
    with pytest.raises(KeyError, match="no row"):
        w.open(row["key"])


def test_a_widget_without_a_person_decides_nothing() -> None:
    store = anb.MemoryStore()
    w = paused_widget(store, 1, by=None)
    click(w, "approve", keys=[w.view.rows[0]["key"]])
    assert "has no by= (who decides)" in w.view.message and len(w.view.rows) == 1


def test_live_updates_from_a_memory_store_listener() -> None:
    store = anb.MemoryStore()
    w = paused_widget(store, 1)
    w.watch()
    try:
        threading.Thread(target=lambda: make_loop(store).start("refund order 9", run_id="late").run()).start()
        until(lambda: "late" in {r["run_id"] for r in w.view.rows})
    finally:
        w.close()


def test_live_updates_when_another_process_pauses_a_run_in_sqlite(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "w.db", key=KEY)
    w = paused_widget(store, 1)
    w.watch()
    try:
        code = ("import sys; sys.path.insert(0, sys.argv[2]); import agentnb as anb; "
                "from tests.test_inbox import KEY, make_loop; "
                "make_loop(anb.SqliteStore(sys.argv[1], key=KEY)).start('refund order 7', run_id='other').run()")
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "w.db"), str(HERE.parent)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        until(lambda: "other" in {r["run_id"] for r in w.view.rows})
    finally:
        w.close()


def test_waiting_for_a_change_in_memory_and_sqlite(tmp_path: Path) -> None:
    for store in (anb.MemoryStore(), anb.SqliteStore(tmp_path / "c.db", key=KEY)):
        run = make_loop(store).start("refund order 1").run()
        seen = len(run.events)
        assert store.wait_for_change(run.run_id, seen=seen, timeout=0.1) is None  # nothing happened
        assert store.wait_for_change(run.run_id, seen=seen - 1, timeout=0.1) == (run.run_id, "WAITING_APPROVAL")
        got: list[Any] = []
        watcher = threading.Thread(target=lambda s=store, g=got: g.append(s.wait_for_change(timeout=30)))
        watcher.start()
        time.sleep(0.2)
        make_loop(store).start("refund order 2", run_id="second").run()
        watcher.join(timeout=30)
        assert got and got[0] is not None and got[0][0] == "second"


def test_a_change_between_two_waits_is_news_for_the_next(tmp_path: Path) -> None:
    for store, other in ((m := anb.MemoryStore(), m),
                         (anb.SqliteStore(tmp_path / "b.db", key=KEY), anb.SqliteStore(tmp_path / "b.db", key=KEY))):
        make_loop(store).start("refund order 1").run()
        assert store.wait_for_change(timeout=0.05) is None  # a watcher listed, then looked away (listing again)
        make_loop(other).start("refund order 2", run_id="meanwhile").run()  # another writer, nobody waiting
        assert store.wait_for_change(timeout=0.05) == ("meanwhile", "WAITING_APPROVAL")
        assert store.wait_for_change(timeout=0.05) is None  # reported once
