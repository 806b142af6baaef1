"""The workshop kit: checks pass right answers, explain wrong ones without raising; the provider switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb import workshop

ORDERS = workshop.SHOP_ORDERS


def fixes(report: workshop.Report) -> list[str]:
    return [line.what for line in report.failures]


# -- right answers pass ----------------------------------------------------------------------------------


@anb.tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text.
    """
    return len(text.split())


@anb.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id}")
    return dict(ORDERS[order_id])


REFUNDED: dict[str, int] = {}


@anb.tool(risk="write")
def refund(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Refund an order.

    Args:
        order_id: The order id.
        amount_cents: The amount, in cents.
    """
    if order_id not in ORDERS or not 1 <= amount_cents <= ORDERS[order_id]["amount_cents"] - REFUNDED.get(order_id, 0):
        raise ValueError(f"order {order_id} has less than {amount_cents} cents left to refund")
    REFUNDED[order_id] = REFUNDED.get(order_id, 0) + amount_cents
    return {"refund_id": f"rf_{order_id}", "order_id": order_id, "amount_cents": amount_cents}


def policy(call: Any, state: Any) -> bool:
    return bool(call.name in ("refund", "create_refund") and (call.arguments or {}).get("amount_cents", 0) >= 5000)


def stop_at(event: Any) -> bool:
    return bool(event.type == "CallValidated" and event.name == "create_refund")


@pytest.mark.parametrize(("exercise", "args", "kwargs"), [
    ("tool", (word_count,), {}),
    ("stop_at", (stop_at,), {}),
    ("policy", (policy,), {}),
    ("budget", (anb.Budget(max_tool_calls=4),), {}),
    ("capstone", (), {"tools": [lookup_order, refund], "policy": policy, "budget": anb.Budget(max_tool_calls=6)}),
])
def test_right_answers_pass(exercise: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    report = workshop.check(exercise, *args, **kwargs)
    assert report.passed, str(report)
    assert str(report).endswith("All checks pass. Well done!")
    assert len(report.lines) >= 3 or exercise == "stop_at"


def test_every_exercise_is_listed() -> None:
    assert set(workshop.exercises()) == {"tool", "stop_at", "policy", "budget", "wire", "capstone",
                                         "output", "mcp", "errors", "injection", "cost"}


# -- wrong answers get a FIX line, never a traceback ------------------------------------------------------


def test_unwritten_answers() -> None:
    for exercise in ("tool", "stop_at", "policy", "budget", "wire", "capstone"):
        report = workshop.check(exercise)
        assert not report.passed
        assert "not written yet" in str(report) or "pass them as a list" in str(report)


def test_a_tool_without_the_decorator_or_docs() -> None:
    def plain(text: str) -> int:
        return 0

    assert "plain function" in str(workshop.check("tool", plain))

    @anb.tool
    def bare(text: str) -> int:
        return len(text.split())

    assert fixes(workshop.check("tool", bare)) == ["it has a description", "the argument is described"]


def test_a_tool_that_is_wrong_or_raises() -> None:
    @anb.tool
    def by_space(text: str) -> int:
        """Count.

        Args:
            text: The text.
        """
        return len(text.split(" "))

    report = workshop.check("tool", by_space, seed=7)
    assert "0 and 1 words (empty, blank, one word): by_space('')" in fixes(report)
    assert "returned 1 (an int), expected 0" in str(report)
    assert report.kinds[0] == "split-one-space"

    @anb.tool
    def broken(text: str) -> int:
        """Count.

        Args:
            text: The text.
        """
        raise RuntimeError("oops")

    report = workshop.check("tool", broken, seed=7)
    assert len(report.failures) == 6 and "RuntimeError: oops" in str(report)  # one per group of texts
    assert "Traceback" not in str(report)


def test_the_same_seed_draws_the_same_inputs_and_a_fresh_check_new_ones() -> None:
    @anb.tool
    def off(text: str) -> int:
        """Count.

        Args:
            text: The text.
        """
        return len(text.split()) + 1

    first, again = workshop.check("tool", off, seed=11), workshop.check("tool", off, seed=11)
    assert [line.detail for line in first.lines] == [line.detail for line in again.lines]
    assert "check(..., seed=11) draws the same ones" in str(first)
    fresh = {str(workshop.check("tool", off).failures[0].what) for _ in range(5)}
    assert len(fresh) > 1  # fresh texts every check


def test_hints_are_graduated_and_never_the_answer() -> None:
    workshop.reset_hints()
    policy = lambda call, state: call.name == "create_refund" and call.arguments["amount_cents"] > 5000  # noqa: E731
    first = workshop.check("policy", policy, seed=3)
    line = first.failures[0]
    assert line.kind == "off-by-one" and len(line.hints) == 1
    second = workshop.check("policy", policy, seed=4)
    assert len(second.failures[0].hints) == 2 and "more:" in str(second)
    for text in (str(first), str(second)):
        assert ">=" not in text and "5000 or more" not in text.replace("$", "")
    workshop.reset_hints()
    assert len(workshop.check("policy", policy, seed=5).failures[0].hints) == 1


def test_predicates_that_crash_stop_early_or_never() -> None:
    report = workshop.check("stop_at", lambda e: e.name == "create_refund", seed=1)
    assert "AttributeError" in str(report) and report.kinds == ["crash"]
    assert "too early" in str(workshop.check("stop_at", lambda e: e.type == "CallValidated", seed=1))
    assert "late" in str(workshop.check("stop_at", lambda e: e.type == "ApprovalRequested", seed=1))
    starter = workshop.check("stop_at", lambda e: False, seed=1)  # the starter: one FIX line, no PASS on nothing
    assert "so no run ever stopped" in str(starter) and not any(line.passed for line in starter.lines)
    report = workshop.check("stop_at", lambda e: e.seq == 28, seed=1)
    assert "it stops right in the notebook's run, but in another run" in str(report)


def test_policies_that_crash_or_miss_the_edge() -> None:
    report = workshop.check("policy", lambda call, state: call.arguments["amount_cents"] >= 5000, seed=2)
    assert report.kinds == ["crash"] and "KeyError" in str(report)
    report = workshop.check("policy", lambda call, state: call.name == "create_refund"
                            and call.arguments["amount_cents"] > 5000, seed=2)
    assert fixes(report) == ["exactly the limit ($50.00) waits"]
    starter = workshop.check("policy", lambda call, state: True, seed=2)
    assert starter.kinds == ["pauses-all"] and not any(line.passed for line in starter.lines)  # no vacuous PASS
    upper = workshop.check("policy", lambda c, s: c.name == "create_refund" and 5000 <= c.arguments["amount_cents"]
                           <= 20_000, seed=2)
    assert "refunds far beyond the limit wait" in fixes(upper)


def test_budgets_that_stop_or_allow_too_much() -> None:
    report = workshop.check("budget", anb.Budget(max_tool_calls=4, on_exhausted="stop"), seed=1)
    assert report.kinds == ["stops"]
    report = workshop.check("budget", anb.Budget(max_tool_calls=10), seed=1)
    assert "it let the model make 10 calls" in str(report)
    report = workshop.check("budget", anb.Budget(max_tool_calls=1), seed=1)
    assert "it stopped after 1 call (the max_tool_calls limit ran out); 4 are allowed" in str(report)
    assert "(a dict)" in str(workshop.check("budget", {"max_tool_calls": 4}))


def test_capstone_mistakes() -> None:
    @anb.tool(name="refund")
    def lax_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
        """Refund."""
        return {"refund_id": "x"}

    report = workshop.check("capstone", tools=[lookup_order, lax_refund], policy=lambda c, s: False,
                            budget=anb.Budget(), seed=1)
    assert fixes(report)[0] == "refund is marked as a write"
    assert {"policy-through", "refund-unchecked", "too-loose"} <= set(report.kinds)

    @anb.tool
    def silent_lookup(order_id: str) -> Any:
        """Look up."""
        return ORDERS.get(order_id)

    silent = anb.tool(name="lookup_order")(silent_lookup.fn)
    report = workshop.check("capstone", tools=[silent, refund], policy=policy, budget=anb.Budget(max_tool_calls=6),
                            seed=1)
    assert fixes(report) == ["an order that does not exist"]
    report = workshop.check("capstone", tools=[word_count], policy=policy, budget=anb.Budget())
    assert "no tool has that name" in str(report)
    assert set(ORDERS) == {"A100", "B200", "C300"}


def test_bad_calls_of_check_itself() -> None:
    assert "there is no exercise 'tools'" in str(workshop.check("tools", word_count))
    assert "how check() was called" in str(workshop.check("tool", word_count, 1, 2))


# -- the provider switch ---------------------------------------------------------------------------------


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("AGENTNB_PROVIDER", "AGENTNB_RECORD", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                 "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_offline_is_the_default(no_keys: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    model = workshop.course_model("weather", stream=True)
    assert isinstance(model, anb.ScriptedModel) and model.stream and model.name == "story:weather"
    assert "offline ScriptedModel ('weather' story)" in capsys.readouterr().out
    mine = anb.ScriptedModel([{"text": "hi"}])
    assert workshop.course_model(mine, quiet=True) is mine
    assert capsys.readouterr().out == ""


def test_no_key_falls_back_and_says_why(no_keys: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    no_keys.setenv("AGENTNB_PROVIDER", "openai:gpt-4o-mini")
    assert isinstance(workshop.course_model("weather"), anb.ScriptedModel)
    assert "no OPENAI_API_KEY in the environment: using the offline model" in capsys.readouterr().out
    for spec, words in (("gemini:gemini-2.5-flash", "GEMINI_API_KEY or GOOGLE_API_KEY"),
                        ("mistral:large", "unknown provider 'mistral'"), ("openai", "is not 'provider:model'"),
                        ("replay:/nowhere/x.jsonl", "cannot replay")):
        assert isinstance(workshop.course_model("weather", provider=spec), anb.ScriptedModel)
        assert words in capsys.readouterr().out


def test_a_key_picks_the_real_model_and_records(no_keys: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openai")
    no_keys.setenv("OPENAI_API_KEY", "sk-test-SECRET-0123456789abcdef")
    model = workshop.course_model("weather", provider="openai:gpt-4o-mini")
    assert (model.provider, model.name) == ("openai_chat", "gpt-4o-mini")
    assert "model: openai:gpt-4o-mini (a real model" in capsys.readouterr().out
    rec = workshop.course_model("weather", provider="openai:gpt-4o-mini", record=tmp_path)
    assert isinstance(rec, anb.Recorder) and rec.path == tmp_path / "weather.jsonl"
    rec.close()
    assert "SECRET" not in (tmp_path / "weather.jsonl").read_text()


def test_replay_through_the_switch(no_keys: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "weather.jsonl"
    with anb.Recorder(anb.ScriptedModel.story("weather"), path) as rec:
        anb.Loop(model=rec, tools=anb.stories.tools("weather")).start("Paris?").run()
    no_keys.setenv("AGENTNB_PROVIDER", f"replay:{path}")
    model = workshop.course_model("weather")
    assert "replaying weather.jsonl offline (scripted:story:weather, 2 turns)" in capsys.readouterr().out
    run = anb.Loop(model=model, tools=anb.stories.tools("weather")).start("Paris?").run()
    assert run.output == "It is 18 °C and sunny in Paris."
