"""A person steps into a running loop: ``run.interject`` while it is paused, read by the model's next request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger.cards import CARDS
from agentnb._states import LoopState as S
from agentnb.events import Interjected, ModelRequested
from agentnb.exceptions import AgentnbError
from agentnb.providers import WIRE_APIS

KEY = "interject-test-key-01"


@anb.tool(risk="write")
def refund(order_id: str, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"


@anb.tool(risk="write", approval=False, name="refund")
def refund_unasked(order_id: str, cents: int) -> str:
    """Refund an order (nobody asked)."""
    return f"refunded {cents}"


def echo(messages: Any) -> dict[str, Any]:
    """The model's second turn: says which user messages it has read since its call."""
    after = [m.text for m in messages[2:] if m.role == "user"]
    return {"text": "I read: " + " | ".join(after)}


def loop(store: Any = None, tool: anb.Tool = refund, **options: Any) -> anb.Loop:
    script: list[Any] = [{"tool_calls": [{"name": "refund", "arguments": {"order_id": "42", "cents": 1999}}]}, echo]
    return anb.Loop(model=anb.ScriptedModel(script), tools=[tool], store=store, **options)


def test_an_interjection_during_an_approval_is_read_with_the_next_request() -> None:
    run = loop().start("refund order 42").run()
    assert run.paused
    ev = run.interject("only refund half, the customer kept one item", by="ana")
    assert isinstance(ev, Interjected) and ev.state is S.WAITING_APPROVAL and run.paused  # nothing else changed
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    assert run.output == "I read: only refund half, the customer kept one item"
    request = [e for e in run.events if isinstance(e, ModelRequested)][-1]
    assert [m.text for m in request.new_messages] == ["only refund half, the customer kept one item"]
    roles = [m.role for m in run.messages]
    assert roles == ["user", "assistant", "tool", "user", "assistant"]  # after the result: no call left unanswered
    turns = run.transcript.frames.turns()
    assert turns["interjected"].isna().tolist() == [True, False]
    assert turns["interjected"].iloc[1] == "only refund half, the customer kept one item"
    assert "a person said: only refund half" in CARDS[Interjected].summary(ev)


@pytest.mark.parametrize("mode", ["step", "run"])
def test_an_interjection_mid_turn_waits_for_the_results(mode: str) -> None:
    run = loop(tool=refund_unasked).start("refund order 42")
    run.run_until(lambda e: e.type == "TurnCompleted")  # paused right after the model asked for the call
    run.interject("be quick")
    run.interject("and polite")
    if mode == "run":
        run.run()
    else:
        while run.step() is not None:
            pass
    assert run.state is S.COMPLETED and run.output == "I read: be quick | and polite"


def test_an_interjection_is_stored_and_read_by_a_resumed_run(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "i.db", key=KEY)
    run = loop(store).start("refund order 42").run()
    run.interject("check the order date first")
    run.release()
    again = anb.Run.resume(run.run_id, loop=loop(anb.SqliteStore(tmp_path / "i.db", key=KEY)))
    again.approve(again.pending_approvals()[0].call_id)
    again.run()
    assert again.output == "I read: check the order date first"
    assert [e.type for e in store.load(run.run_id)].count("Interjected") == 1


def test_every_wire_api_renders_an_interjected_conversation_validly() -> None:
    run = loop().start("refund order 42").run()
    run.interject("only half")
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    for name, api in WIRE_APIS.items():
        body = api.render_request(run.messages[:-1])  # the conversation the last request sent
        errors = [f for f in anb.lint(body, name) if f.severity == "error"]
        assert errors == [], (name, errors)


@pytest.mark.parametrize(("setup", "text", "message"), [
    ("new", "hi", "NEW"),
    ("done", "hi", "COMPLETED"),
    ("headless", "hi", "headless"),
    ("paused", "  ", "needs some text"),
])
def test_an_interjection_nobody_can_read_is_refused(setup: str, text: str, message: str) -> None:
    if setup == "new":
        run = loop().start("x")
    elif setup == "done":
        run = anb.Loop(model=anb.ScriptedModel([{"text": "ok"}])).start("x").run()
    elif setup == "headless":
        run = loop(headless=True).start("x")
        run.step()
    else:
        run = loop().start("x").run()
    before = len(run.events)
    with pytest.raises(AgentnbError, match=message):
        run.interject(text)
    assert len(run.events) == before


def test_an_interjection_made_in_another_process_is_read_after_a_resume(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "p.db"
    loop(anb.SqliteStore(db, key=KEY)).start("refund order 42", run_id="p1").run()  # paused at the approval
    code = ("import sys; sys.path.insert(0, sys.argv[2]); import agentnb as anb; "
            "from tests.test_interject import KEY, loop; "
            "run = anb.Run.resume('p1', loop=loop(anb.SqliteStore(sys.argv[1], key=KEY))); "
            "run.interject('the customer kept one item', by='ana'); run.release()")
    done = subprocess.run([sys.executable, "-c", code, str(db), str(Path(__file__).parent.parent)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run = anb.Run.resume("p1", loop=loop(anb.SqliteStore(db, key=KEY)))
    said = [e for e in run.events if isinstance(e, Interjected)]
    assert [(e.text, e.by) for e in said] == [("the customer kept one item", "ana")] and run.paused
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    assert run.output == "I read: the customer kept one item"
