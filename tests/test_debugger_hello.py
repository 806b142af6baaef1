"""A page says hello until the kernel answers: repeats of an answered hello send no row again."""

from __future__ import annotations

from typing import Any

import agentnb as anb


def _debugger() -> tuple[anb.Debugger, list[dict[str, Any]]]:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    dbg = anb.Debugger(loop.start("Paris?")).cont()
    sent: list[dict[str, Any]] = []
    dbg.view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    return dbg, sent


def _rows(sent: list[dict[str, Any]]) -> int:
    return sum(len(m["m"]) for m in sent if m["kind"] == "rows")


def test_hellos_queued_behind_a_busy_cell_send_the_rows_once() -> None:
    dbg, sent = _debugger()
    n = len(dbg.events)
    for retry in (False, True, True, True):  # the first hello and three repeats, heard together
        dbg.view._handle_custom_msg({"kind": "hello", "page": "p1", "retry": retry}, [])
    assert _rows(sent) == n
    assert [m for m in sent if m["kind"] == "welcome"] == [{"kind": "welcome", "page": "p1"}]
    assert [m["kind"] for m in sent].count("reset") == 1


def test_a_lost_first_hello_is_answered_at_its_first_repeat() -> None:
    dbg, sent = _debugger()
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p2", "retry": True}, [])  # the first never came
    assert _rows(sent) == len(dbg.events) and sent[-1] == {"kind": "welcome", "page": "p2"}


def test_another_page_and_a_gap_are_answered_every_time() -> None:
    dbg, sent = _debugger()
    n = len(dbg.events)
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p3"}, [])
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p4", "retry": True}, [])  # a second page
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p3"}, [])  # p3 found a gap in its rows: not a repeat
    dbg.view._handle_custom_msg({"kind": "hello"}, [])  # a page of an older front end names none
    assert _rows(sent) == 4 * n


def test_the_answered_pages_are_bounded() -> None:
    from agentnb._debugger.hello import Hellos

    hellos = Hellos()
    for i in range(Hellos.KEPT + 10):
        assert hellos.wanted({"page": f"p{i}"})
    assert not hellos.wanted({"page": f"p{Hellos.KEPT + 9}", "retry": True})
    assert hellos.wanted({"page": "p0", "retry": True})  # forgotten long ago: answered again


def test_a_page_whose_answer_was_lost_is_answered_again_after_a_while() -> None:
    """The rows and the welcome never reached the page (it keeps saying hello): a repeat heard
    ``AGAIN_AFTER`` seconds after the answer is answered again, one heard sooner is not."""
    from agentnb._debugger.hello import Hellos

    now = [100.0]
    hellos = Hellos(clock=lambda: now[0])
    assert hellos.wanted({"page": "p", "retry": False})
    now[0] += Hellos.AGAIN_AFTER - 0.5
    assert not hellos.wanted({"page": "p", "retry": True})
    now[0] += 1.0
    assert hellos.wanted({"page": "p", "retry": True})
    assert not hellos.wanted({"page": "p", "retry": True})  # answered just now: quiet again


def test_the_quiet_time_starts_when_the_answer_was_sent() -> None:
    """Sending a long run's rows took longer than ``AGAIN_AFTER``: the hellos queued meanwhile, read just
    after, are repeats of an answered page and send nothing again."""
    from agentnb._debugger.hello import Hellos

    now = [0.0]
    hellos = Hellos(clock=lambda: now[0])
    assert hellos.wanted({"page": "p", "retry": False})
    now[0] += Hellos.AGAIN_AFTER * 3  # the rows took this long to send
    hellos.sent({"page": "p"})
    now[0] += 0.01
    assert not any(hellos.wanted({"page": "p", "retry": True}) for _ in range(40))
