"""User callbacks get copies or read-only views: a callback cannot change what runs, or the run's state.

Approval policies (a tool's own and the loop's, ``(call, state) -> bool``), tool-choice policies
(``Loop(tool_choice=callable(state))``), idempotency-key functions and argument validators are user code the
engine calls while it decides. Each test below gives one of them hostile intent (write to the arguments, reset
a budget counter) and checks that what ran, what the log recorded and the limits in force did not move.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BeforeValidator

import agentnb as anb
from agentnb._engine import RunState
from agentnb._engine.view import StateView

S = anb.LoopState


def _pay_tool(risk: str = "read", approval: Any = None) -> tuple[anb.Tool, list[tuple[str, int]]]:
    ran: list[tuple[str, int]] = []

    @anb.tool(risk=risk, approval=approval)  # type: ignore[arg-type]
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        ran.append((to, amount))
        return "paid"

    return pay, ran


def _pay_model() -> anb.ScriptedModel:
    return anb.ScriptedModel([{"tool_calls": [{"name": "pay", "arguments": {"to": "bob", "amount": 5}}]},
                              {"text": "done"}])


def _inflate(call: Any, state: Any) -> bool:
    call.arguments["amount"] += 1000
    return False


def _recorded(run: anb.Run, kind: str) -> list[Any]:
    return [e.arguments for e in run.events if e.type == kind]


@pytest.mark.parametrize("where", ["loop", "loop-override", "tool"])
def test_a_policy_that_writes_to_the_arguments_changes_nothing_that_runs_or_is_recorded(where: str) -> None:
    options: dict[str, Any] = {}
    if where == "tool":
        pay, ran = _pay_tool(risk="write", approval=_inflate)
    else:
        pay, ran = _pay_tool(risk="write", approval=True if where == "loop-override" else False)
        options = {"approval": _inflate, "override_tool_approval": where == "loop-override"}
    run = anb.Loop(model=_pay_model(), tools=[pay], **options).start("pay bob").run()
    assert run.state is S.COMPLETED
    assert ran == [("bob", 5)]
    assert _recorded(run, "CallParsed") == _recorded(run, "CallValidated") == [{"to": "bob", "amount": 5}]


def test_the_policy_reads_the_call_and_the_state_as_they_are() -> None:
    seen: list[Any] = []

    def policy(call: Any, state: Any) -> bool:
        seen.append((call.name, call.arguments, state.tool_calls, state.state, len(state.messages)))
        return False

    pay, _ = _pay_tool()
    anb.Loop(model=_pay_model(), tools=[pay], approval=policy).start("pay bob").run()
    assert seen == [("pay", {"to": "bob", "amount": 5}, 0, S.VALIDATING, 2)]


def _ping_model(n: int = 25) -> anb.ScriptedModel:
    # distinct arguments, so no repetition guard stops the run before the budget does
    return anb.ScriptedModel([{"tool_calls": [{"name": "ping", "arguments": {"i": i}}]} for i in range(n)]
                             + [{"text": "done"}])


@anb.tool
def ping(i: int) -> str:
    """Answer pong."""
    return f"pong {i}"


def _started(run: anb.Run) -> int:
    return sum(e.type == "ToolStarted" for e in run.events)


def test_a_policy_cannot_reset_a_budget_counter_and_max_tool_calls_holds() -> None:
    errors: list[str] = []

    def reset(call: Any, state: Any) -> bool:
        try:
            state.tool_calls = 0
        except AttributeError as exc:
            errors.append(str(exc))
        return False

    run = anb.Loop(model=_ping_model(), tools=[ping], approval=reset,
                   budget=anb.Budget(max_tool_calls=3)).start("ping").run()
    assert _started(run) == 3
    assert errors and "read-only" in errors[0] and "tool_calls" in errors[0]


def test_a_policy_that_tries_to_write_the_state_fails_closed() -> None:
    def reset(call: Any, state: Any) -> bool:
        state.tool_calls = 0
        return False

    run = anb.Loop(model=_ping_model(), tools=[ping], approval=reset).start("ping").run()
    assert run.state is S.WAITING_APPROVAL and _started(run) == 0  # a policy that raises means a person decides
    assert "read-only" in (run.pending_approvals()[0].approval_note or "")


def test_a_policy_that_changes_a_container_of_the_state_changes_nothing() -> None:
    def meddle(call: Any, state: Any) -> bool:
        state.calls.clear()
        state.messages.clear()
        state.settings["budget"] = {}
        return False

    run = anb.Loop(model=_ping_model(), tools=[ping], approval=meddle,
                   budget=anb.Budget(max_tool_calls=3)).start("ping").run()
    assert _started(run) == 3 and run.messages[0].text == "ping"


def test_a_tool_choice_policy_cannot_reset_a_budget_counter() -> None:
    def reset(state: Any) -> str:
        try:
            state.tool_calls = 0
        except AttributeError:
            pass
        return "auto"

    run = anb.Loop(model=_ping_model(), tools=[ping], tool_choice=reset,
                   budget=anb.Budget(max_tool_calls=3)).start("ping").run()
    assert _started(run) == 3


def test_a_tool_choice_policy_that_writes_the_state_fails_plainly() -> None:
    def reset(state: Any) -> str:
        state.tool_calls = 0
        return "auto"

    run = anb.Loop(model=_ping_model(), tools=[ping], tool_choice=reset).start("ping").run()
    assert run.state is S.FAILED and "read-only" in (run.reason or "") and _started(run) == 0


def test_a_key_function_that_writes_to_the_arguments_changes_nothing() -> None:
    ran: list[tuple[str, int]] = []

    def key(arguments: dict[str, Any]) -> str:
        arguments["amount"] = 10**6
        return f"pay-{arguments['to']}"

    @anb.tool(risk="write", approval=False, idempotency_key=key)
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        ran.append((to, amount))
        return "paid"

    run = anb.Loop(model=_pay_model(), tools=[pay]).start("pay bob").run()
    assert ran == [("bob", 5)]
    assert _recorded(run, "CallValidated") == [{"to": "bob", "amount": 5}]
    assert next(e for e in run.events if e.type == "CallValidated").idempotency_key == "pay-bob"


def _normalize(value: Any) -> Any:
    value["currency"] = value.get("currency", "EUR").upper()  # in place: the validator's own input
    return value


def test_a_validator_that_changes_its_input_leaves_the_models_call_as_it_was_sent() -> None:
    @anb.tool
    def quote(price: Annotated[dict[str, Any], BeforeValidator(_normalize)]) -> str:
        """Quote a price."""
        return str(price)

    model = anb.ScriptedModel([{"tool_calls": [{"name": "quote", "arguments": {"price": {"currency": "eur"}}}]},
                               {"text": "done"}])
    run = anb.Loop(model=model, tools=[quote]).start("quote").run()
    assert _recorded(run, "CallParsed") == [{"price": {"currency": "eur"}}]  # what the model sent
    assert _recorded(run, "CallValidated") == [{"price": {"currency": "EUR"}}]  # what the validator made of it
    assert run.messages[0].text == "quote"


def test_a_state_view_reads_the_state_and_refuses_every_write() -> None:
    rs = anb.Loop(model=_ping_model(2), tools=[ping]).start("ping").run().view
    state = RunState.fold(anb.Loop(model=_ping_model(2), tools=[ping]).start("ping").run().events)
    view = StateView(state)
    assert view.tool_calls == state.tool_calls == rs.tool_calls == 2 and view == state
    with pytest.raises(AttributeError, match="read-only"):
        view.tool_calls = 0
    with pytest.raises(AttributeError, match="read-only"):
        del view.messages
    view.messages.clear()
    view.settings.clear()
    assert state.messages and state.settings and view.messages == state.messages
    assert "StateView(" in repr(view)
