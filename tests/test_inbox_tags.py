"""Run tags meet the inbox, and a row's run is ended from it: tags checked, stored, listed, grouped and filtered.

``tags=`` on ``loop.start`` and ``anb.batch`` is stored in ``RunStarted.settings["tags"]``; the inbox lists each
waiting call with its run's tags, filters by one (``items(tag=...)``, the page's tag menu) and groups by each.
"End run" ends a row's run with a reason and who ended it, once per run, or says why it could not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.events import RunStarted
from agentnb.exceptions import AgentnbError

from .test_inbox import KEY, make_loop
from .test_inbox_widget import click


def test_tags_are_stored_with_a_run_and_a_batch_and_the_inbox_filters_by_them(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "tags.db", key=KEY)
    loop = make_loop(store)
    anb.batch(loop, ["refund order 1", "refund order 2"], name="vipbatch", tags=("vip", "refunds", "vip"),
              progress=False)
    loop.start("refund order 3", run_id="solo", tags=["refunds"]).run()
    loop.start("refund order 4", run_id="plain").run()
    first = store.load("vipbatch-0")[0]
    assert isinstance(first, RunStarted) and first.settings["tags"] == ["vip", "refunds"]  # repeats dropped
    assert "tags" not in store.load("plain")[0].settings  # type: ignore[attr-defined]
    inbox = anb.Inbox(store, loop=loop, by="ana")
    assert sorted(p.run_id for p in inbox.items(tag="vip")) == ["vipbatch-0", "vipbatch-1"]
    assert sorted(p.run_id for p in inbox.items(tag="refunds")) == ["solo", "vipbatch-0", "vipbatch-1"]
    assert {p.run_id: p.tags for p in inbox.items()}["plain"] == ()
    assert inbox.table(tag="vip")["tags"].tolist() == [["vip", "refunds"]] * 2
    frame = inbox.decisions().set_index("run_id")["run_tags"]
    assert frame["vipbatch-0"] == '["vip","refunds"]' and frame["solo"] == '["refunds"]' and pd.isna(frame["plain"])
    assert "solo <i>#refunds</i>" in inbox._repr_html_()  # a saved notebook's table shows them too
    rows = {r["run_id"]: r["tags"] for r in inbox.widget().view.rows}
    assert rows == {"vipbatch-0": ["vip", "refunds"], "vipbatch-1": ["vip", "refunds"], "solo": ["refunds"],
                    "plain": []}
    again = anb.batch(loop, ["refund order 1", "refund order 2"], name="vipbatch", tags=("other",), progress=False)
    assert again.counts()["paused"] == 2 and store.load("vipbatch-0")[0].settings["tags"] == ["vip", "refunds"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("tags", "message"), [
    ("vip", r"a tuple of strings, e\.g\. tags=\('vip',\)"),
    (("vip", ""), r"tags\[1\] is '': each tag is a non-blank string"),
    (("vip", "  "), r"tags\[1\]"),
    ((3,), r"tags\[0\] is 3"),
    ({"vip"}, "a tuple of strings"),
    (None, "a tuple of strings"),
])
def test_bad_tags_are_refused_before_anything_runs(tags: Any, message: str) -> None:
    store = anb.MemoryStore()
    loop = make_loop(store)
    with pytest.raises(AgentnbError, match=message):
        loop.start("refund order 1", tags=tags)
    with pytest.raises(AgentnbError, match=message):
        anb.batch(loop, ["refund order 1"], tags=tags, progress=False)
    assert store.runs() == []


def test_a_rows_run_is_ended_from_the_inbox_with_who_and_why_once(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "end.db", key=KEY)
    loop = make_loop(store)
    anb.batch(loop, ["refund order 1", "refund order 2"], name="e", progress=False)
    w = anb.Inbox(store, loop=loop, by="ana").widget()
    stale = anb.Inbox(store, loop=loop, by="ben")
    seen = stale.items()  # ben's view, before ana ends the run
    key = next(r["key"] for r in w.view.rows if r["run_id"] == "e-0")
    click(w, "end", keys=[key], reason="")
    assert "needs a reason" in w.view.message and len(w.view.rows) == 2  # nothing ended
    click(w, "end", keys=[key], reason="duplicate ticket")
    assert [r["run_id"] for r in w.view.rows] == ["e-1"] and w.view.message.startswith("1 applied")
    run = anb.Run.resume("e-0", loop=loop)
    assert run.state is S.CANCELLED and run.reason == "ended by ana: duplicate ticket"
    late = stale.end([p for p in seen if p.run_id == "e-0"], "also a duplicate")
    assert late.applied == [] and "CANCELLED" in (late.refused[0].reason or "")  # refused, with why
    assert [e.type for e in store.load("e-0")].count("RunFinished") == 1
