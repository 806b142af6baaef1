"""The checker's own mutation test: for every exercise, known-wrong answers that must all get FIX (with the
right diagnosis), and the right answers that must PASS, on several random draws each."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable
from typing import Annotated, Any

import pydantic
import pytest

import agentnb as anb
from agentnb import workshop
from tests.test_workshop import word_count  # the right answer of notebook 01, shared with the basic checks

ORDERS = workshop.SHOP_ORDERS
SEEDS = (1, 2, 3, 17, 4242)


def doc(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a test tool a docstring with an Args section, so only its behaviour is wrong."""
    fn.__doc__ = "Count the words in a text.\n\nArgs:\n    text: The text.\n"
    return fn


def counter(body: Callable[[str], Any], **options: Any) -> anb.Tool:
    def word_count(text: str) -> Any:
        return body(text)

    return anb.tool(**options)(doc(word_count)) if options else anb.tool(doc(word_count))


# -- 01 · word_count --------------------------------------------------------------------------------------------

TABLE = {"the quick brown fox jumps": 5, "": 0, "  spaced   out  ": 2, "one": 1}


def _spin(text: str) -> int:
    while True:
        pass


def _raises(text: str) -> int:
    raise RuntimeError("oops")


_calls = [0]


def _stateful(text: str) -> int:
    _calls[0] += 1
    return _calls[0]


@anb.tool
def two_params(text: str, sep: str) -> int:
    """Count the words in a text.

    Args:
        text: The text.
        sep: The separator.
    """
    return len(text.split(sep))


@anb.tool
def int_param(text: int) -> int:
    """Count the words in a text.

    Args:
        text: The text.
    """
    return 0


def plain(text: str) -> int:
    return len(text.split())


@anb.tool
def undocumented(text: str) -> int:
    return len(text.split())


def documented(body: Callable[[str], Any], text: str) -> anb.Tool:
    def word_count(text: str) -> Any:
        return body(text)

    word_count.__doc__ = text
    return anb.tool(word_count)


def _words(text: str) -> int:
    return len(text.split())


TOOL_MUTANTS: dict[str, tuple[Any, str | None]] = {
    "a TODO docstring": (documented(_words, "TODO\n\nArgs:\n    text: The text.\n"), "description"),
    "a docstring of dots": (documented(_words, "...\n\nArgs:\n    text: The text.\n"), "description"),
    "an argument described as TODO": (documented(_words, "Count the words.\n\nArgs:\n    text: TODO\n"), "args-doc"),
    "an argument described by its name": (documented(_words, "Count the words.\n\nArgs:\n    text: text\n"),
                                          "args-doc"),
    "an argument described by its type": (documented(_words, "Count the words.\n\nArgs:\n    text: str\n"),
                                          "args-doc"),
    "an argument described as '...'": (documented(_words, "Count the words.\n\nArgs:\n    text: ...\n"),
                                       "args-doc"),
    "\\w+ tokens": (counter(lambda t: len(re.findall(r"\w+", t))), "punctuation"),
    "letters only": (counter(lambda t: len(re.findall(r"[^\W\d_]+", t))), None),
    "a split on punctuation too": (counter(lambda t: len([w for w in re.split(r"[\s,.!?'-]+", t) if w])), None),
    "words with a letter in them": (counter(lambda t: sum(any(c.isalpha() for c in w) for w in t.split())), None),
    "approval=True, a constant": (counter(lambda t: 3, approval=True), "paused"),
    "risk='write', a constant": (counter(lambda t: 3, risk="write"), "paused"),
    "client=True, a constant": (counter(lambda t: 3, client=True), "client"),
    "a table of the checker's old inputs": (counter(lambda t: TABLE[t]), "crash"),
    "split on one space": (counter(lambda t: len(t.split(" "))), "split-one-space"),
    "returns a str": (counter(lambda t: str(len(t.split()))), "type"),
    "returns a float": (counter(lambda t: float(len(t.split()))), "type"),
    "counts characters": (counter(len), "characters"),
    "off by one": (counter(lambda t: len(t.split()) + 1), "off-by-one"),
    "counts spaces plus one": (counter(lambda t: t.count(" ") + 1), None),
    "an endless loop": (counter(_spin), "timeout"),
    "raises": (counter(_raises), "crash"),
    "a counter": (counter(_stateful), None),
    "two parameters": (two_params, "arity"),
    "an int parameter": (int_param, "type"),
    "a plain function": (plain, "not-a-tool"),
    "no docstring": (undocumented, "description"),
    "None": (None, "missing"),
    "a constant 5": (counter(lambda t: 5), None),
}


@pytest.mark.parametrize("name", list(TOOL_MUTANTS))
def test_wrong_tools_get_fix(name: str) -> None:
    answer, kind = TOOL_MUTANTS[name]
    for seed in SEEDS[:2] if kind == "timeout" else SEEDS:
        report = workshop.check("tool", answer, seed=seed, time_limit=0.3)
        assert not report.passed, f"{name} passed with seed {seed}:\n{report}"
        if kind is not None:
            assert kind in report.kinds, f"{name}: expected a {kind!r} diagnosis, got {report.kinds}:\n{report}"
        assert "Traceback" not in str(report)


def test_an_endless_tool_costs_one_time_limit() -> None:
    started = time.monotonic()
    report = workshop.check("tool", counter(_spin), seed=5, time_limit=0.3)
    assert time.monotonic() - started < 3.0  # not 0.3 s per case
    assert "did not finish within 0.3 s" in str(report)


def _slow(text: str) -> int:
    time.sleep(0.15)
    return len(text.split())


def test_a_slow_tool_costs_the_check_its_total_not_a_limit_per_call() -> None:
    """Each call within its limit (0.15 s of 0.3 s), but the calls of one check share five limits (1.5 s)."""
    started = time.monotonic()
    report = workshop.check("tool", counter(_slow), seed=5, time_limit=0.3)
    assert time.monotonic() - started < 4.0  # not 0.15 s for each of its 16 texts and more
    assert "timeout" in report.kinds and "1.5 s for all its calls" in str(report), str(report)


def test_tool_declared_for_a_person_is_not_scored_on_zero_results() -> None:
    report = workshop.check("tool", counter(lambda t: 3, approval=True), seed=3)
    text = str(report)
    assert "All checks pass" not in text
    assert "calls got no result: the run paused for a person before word_count ran: it is declared approval=True" \
        in text


# -- 02 · stop_at -----------------------------------------------------------------------------------------------

_events = [0]


def _count_events(e: Any) -> bool:
    _events[0] += 1
    return _events[0] == 29


def _spin_pred(e: Any) -> bool:
    while True:
        pass


def _validated_refund(e: Any) -> bool:
    return bool(e.type == "CallValidated" and getattr(e, "name", None) == "create_refund")


STOP_MUTANTS: dict[str, tuple[Any, str | None]] = {
    "the right event, as 1 or 0": (lambda e: int(_validated_refund(e)), "type"),
    "the right event, as 'yes' or False": (lambda e: _validated_refund(e) and "yes", "type"),
    "the right event, as the event itself": (lambda e: e if _validated_refund(e) else None, "type"),
    "any validation that needs a person": (lambda e: e.type == "CallValidated" and getattr(e, "needs_approval", False),
                                           "approval"),
    "any event that needs a person": (lambda e: getattr(e, "needs_approval", False) is True, "approval"),
    "the starter (return False)": (lambda e: False, "never"),
    "the story's seq, hard-coded": (lambda e: e.seq == 28, "seq"),
    "any validation": (lambda e: e.type == "CallValidated", "too-early"),
    "the name on every event": (lambda e: e.name == "create_refund", "crash"),
    "the name, safely": (lambda e: getattr(e, "name", None) == "create_refund", "too-early"),
    "the approval request": (lambda e: e.type == "ApprovalRequested", "late"),
    "never": (lambda e: False, "never"),
    "always": (lambda e: True, "too-early"),
    "returns the type (a str)": (lambda e: e.type, "type"),
    "parsed, not validated": (lambda e: e.type == "CallParsed" and getattr(e, "name", None) == "create_refund",
                              "too-early"),
    "the refund's result": (lambda e: e.type == "ToolFinished" and getattr(e, "name", None) == "create_refund",
                            "never"),
    "a seq threshold": (lambda e: e.type == "CallValidated" and e.seq > 20, None),
    "an event counter": (_count_events, None),
    "an endless loop": (_spin_pred, "timeout"),
    "two parameters": (lambda e, run: True, "arity"),
    "not a function": ("CallValidated", "missing"),
}


@pytest.mark.parametrize("name", list(STOP_MUTANTS))
def test_wrong_predicates_get_fix(name: str) -> None:
    answer, kind = STOP_MUTANTS[name]
    _events[0] = 0
    for seed in SEEDS[:2] if kind == "timeout" else SEEDS:
        report = workshop.check("stop_at", answer, seed=seed, time_limit=0.3)
        assert not report.passed, f"{name} passed with seed {seed}:\n{report}"
        if kind is not None:
            assert kind in report.kinds, f"{name}: expected {kind!r}, got {report.kinds}:\n{report}"


# -- 03 · an approval policy -------------------------------------------------------------------------------------


def _amount(call: Any) -> int:
    return int((call.arguments or {}).get("amount_cents", 0))


def _is_refund(call: Any) -> bool:
    return bool(call.name == "create_refund")


def _spin_policy(call: Any, state: Any) -> bool:
    while True:
        pass


_asked_runs: set[str] = set()


def _once_a_run(call: Any, state: Any) -> bool:
    """Asks for the first big refund of each run only (every case alone is a fresh run of one call)."""
    if not (_is_refund(call) and _amount(call) >= 5000) or state.run_id in _asked_runs:
        return False
    _asked_runs.add(state.run_id)
    return True


_asked_calls = [0]


def _first_few(call: Any, state: Any) -> bool:
    """Asks for the first three big refunds this kernel ever sees, then never again."""
    if _is_refund(call) and _amount(call) >= 5000 and _asked_calls[0] < 3:
        _asked_calls[0] += 1
        return True
    return False


POLICY_MUTANTS: dict[str, tuple[Any, str | None]] = {
    "only the first call of a run": (lambda c, s: _is_refund(c) and _amount(c) >= 5000 and s.tool_calls == 0,
                                     "once-per-run"),
    "once per run (a set of run ids)": (_once_a_run, "once-per-run"),
    "only before the third call": (lambda c, s: _is_refund(c) and _amount(c) >= 5000 and s.tool_calls < 3,
                                   "once-per-run"),
    "the first three big refunds of the kernel": (_first_few, None),
    "the starter: always True": (lambda c, s: True, "pauses-all"),
    "never": (lambda c, s: False, None),
    "> instead of >=": (lambda c, s: _is_refund(c) and _amount(c) > 5000, "off-by-one"),
    "< instead of >=": (lambda c, s: _is_refund(c) and _amount(c) < 5000, "threshold-direction"),
    "a far-off threshold": (lambda c, s: _is_refund(c) and _amount(c) >= 500_000, "threshold-high"),
    "an upper bound": (lambda c, s: _is_refund(c) and 5000 <= _amount(c) <= 20_000, "upper-bound"),
    "dollars instead of cents": (lambda c, s: _is_refund(c) and _amount(c) >= 50, "threshold-low"),
    "amount_cents on every call": (lambda c, s: c.arguments["amount_cents"] >= 5000, "crash"),
    "every refund": (lambda c, s: _is_refund(c), "threshold-low"),
    "returns the amount": (lambda c, s: _amount(c), "type"),
    "only order 42": (lambda c, s: _is_refund(c) and c.arguments["order_id"] == "42" and _amount(c) >= 5000, None),
    "one parameter": (lambda c: _is_refund(c) and _amount(c) >= 5000, "arity"),
    "an endless loop": (_spin_policy, "timeout"),
    "pauses reads": (lambda c, s: not _is_refund(c) or _amount(c) >= 5000, "pauses-read"),
}


@pytest.mark.parametrize("name", list(POLICY_MUTANTS))
def test_wrong_policies_get_fix(name: str) -> None:
    answer, kind = POLICY_MUTANTS[name]
    _asked_calls[0] = 0
    for seed in SEEDS[:2] if kind == "timeout" else SEEDS:
        report = workshop.check("policy", answer, seed=seed, time_limit=0.3)
        assert not report.passed, f"{name} passed with seed {seed}:\n{report}"
        if kind is not None:
            assert kind in report.kinds, f"{name}: expected {kind!r}, got {report.kinds}:\n{report}"


def test_a_policy_that_pauses_everything_is_not_told_about_orders() -> None:
    text = str(workshop.check("policy", lambda c, s: True, seed=1))
    assert "it pauses every call, even a lookup" in text
    assert "order" not in text.split("hint:", 1)[1].split("\n")[0]
    text = str(workshop.check("capstone", tools=[lookup_order, refund], policy=lambda c, s: True, budget=BUDGET,
                              seed=1))
    assert "your policy asked for a person before lookup_order ran" in text
    assert "whole order" not in text


# -- 04 · a budget ------------------------------------------------------------------------------------------------

BUDGET_MUTANTS: dict[str, tuple[Any, str | None]] = {
    "a turn cap that stops the runs at the same place": (anb.Budget(max_tool_calls=4, max_turns=4), "other-limit"),
    "a token cap a long run hits": (anb.Budget(max_tool_calls=4, max_total_tokens=200_000), "too-tight"),
    "an input token cap": (anb.Budget(max_tool_calls=4, max_input_tokens=150_000), "too-tight"),
    "an output token cap": (anb.Budget(max_tool_calls=4, max_output_tokens=5_000), "too-tight"),
    "a deadline the fast check never reaches": (anb.Budget(max_tool_calls=4, deadline_s=5), "other-limit"),
    "a tool timeout": (anb.Budget(max_tool_calls=4, tool_timeout=0.5), "other-limit"),
    "a cost cap beside the calls": (anb.Budget(max_tool_calls=4, max_cost=0.5, prices={"scripted": (1.0, 1.0)}),
                                    "other-limit"),
    "results cut at 1000 characters": (anb.Budget(max_tool_calls=4, max_result_chars=1000), "other-limit"),
    "max_tool_calls=1": (anb.Budget(max_tool_calls=1), "too-tight"),
    "max_tool_calls=3": (anb.Budget(max_tool_calls=3), "too-tight"),
    "max_tool_calls=5": (anb.Budget(max_tool_calls=5), "too-loose"),
    "no limit": (anb.Budget(), "too-loose"),
    "max_total_tokens=1": (anb.Budget(max_total_tokens=1), "too-tight"),
    "max_cost=0": (anb.Budget(max_cost=0), "too-tight"),
    "max_cost=0 with a price": (anb.Budget(max_cost=0, prices={"scripted": (1.0, 1.0)}), "too-tight"),
    "on_exhausted='stop'": (anb.Budget(max_tool_calls=4, on_exhausted="stop"), "stops"),
    "on_exhausted='escalate'": (anb.Budget(max_tool_calls=4, on_exhausted="escalate"), "escalates"),
    "max_turns=4": (anb.Budget(max_turns=4), "too-loose"),
    "max_turns=5": (anb.Budget(max_turns=5), "too-loose"),
    "max_total_tokens=20000": (anb.Budget(max_total_tokens=20_000), None),
    "tiny results": (anb.Budget(max_tool_calls=4, max_result_chars=40), "other-limit"),
    "a dict": ({"max_tool_calls": 4}, "type"),
    "None": (None, "missing"),
}


@pytest.mark.parametrize("name", list(BUDGET_MUTANTS))
def test_wrong_budgets_get_fix(name: str) -> None:
    answer, kind = BUDGET_MUTANTS[name]
    for seed in SEEDS:
        report = workshop.check("budget", answer, seed=seed)
        assert not report.passed, f"{name} passed with seed {seed}:\n{report}"
        if kind is not None:
            assert kind in report.kinds, f"{name}: expected {kind!r}, got {report.kinds}:\n{report}"


# -- 07 · the capstone --------------------------------------------------------------------------------------------


def lookup_fn(order_id: str) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id}")
    return dict(ORDERS[order_id])


REFUNDED: dict[str, int] = {}  # order id -> cents refunded so far, by the right answer


def refund_fn(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Refund an order.

    Args:
        order_id: The order id.
        amount_cents: The amount, in cents.
    """
    paid = lookup_fn(order_id)["amount_cents"]
    if amount_cents < 1:
        raise ValueError(f"a refund is at least 1 cent, not {amount_cents}")
    left = paid - REFUNDED.get(order_id, 0)
    if amount_cents > left:
        raise ValueError(f"order {order_id} cost {paid} cents and has {left} left to refund; {amount_cents} is more")
    REFUNDED[order_id] = REFUNDED.get(order_id, 0) + amount_cents
    return {"refund_id": f"rf_{order_id}", "order_id": order_id, "amount_cents": amount_cents}


lookup_order = anb.tool(name="lookup_order")(lookup_fn)
refund = anb.tool(name="refund", risk="write")(refund_fn)


def policy(call: Any, state: Any) -> bool:
    return call.name == "refund" and _amount(call) >= 5000


BUDGET = anb.Budget(max_tool_calls=6)
COPY = {k: dict(v) for k, v in ORDERS.items()}


def _refund_with(check: Callable[[str, int], None], **options: Any) -> anb.Tool:
    def fn(order_id: str, amount_cents: int) -> dict[str, Any]:
        check(order_id, amount_cents)
        return {"refund_id": f"rf_{order_id}", "order_id": order_id, "amount_cents": amount_cents}

    fn.__doc__ = refund_fn.__doc__
    return anb.tool(name="refund", **({"risk": "write"} | options))(fn)


def _lookup_with(body: Callable[[str], Any], **options: Any) -> anb.Tool:
    def fn(order_id: str) -> Any:
        return body(order_id)

    fn.__doc__ = lookup_fn.__doc__
    return anb.tool(name="lookup_order", **options)(fn)


def _over(limit: int) -> Callable[[str, int], None]:
    def check(order_id: str, amount_cents: int) -> None:
        if amount_cents > limit:
            raise ValueError("too much")
    return check


def _copy_check(order_id: str, amount_cents: int) -> None:
    if amount_cents > COPY[order_id]["amount_cents"]:
        raise ValueError("too much")


def _ge_check(order_id: str, amount_cents: int) -> None:
    if amount_cents >= ORDERS[order_id]["amount_cents"]:
        raise ValueError("too much")


def _no_unknown(order_id: str, amount_cents: int) -> None:
    if order_id in ORDERS and amount_cents > ORDERS[order_id]["amount_cents"]:
        raise ValueError("too much")


def _each_alone(order_id: str, amount_cents: int) -> None:
    """The old rule: each refund alone within the price (no record of earlier refunds), at least a cent."""
    if amount_cents < 1 or amount_cents > ORDERS[order_id]["amount_cents"]:
        raise ValueError("too much")


def _any_amount_within(order_id: str, amount_cents: int) -> None:
    """Each refund alone within the price, zero and negative amounts let through."""
    if amount_cents > ORDERS[order_id]["amount_cents"]:
        raise ValueError("too much")


_SPENT: dict[str, int] = {}


def _counts_refused_too(order_id: str, amount_cents: int) -> None:
    """Adds every refund asked for to the total, even one it then refuses."""
    _SPENT[order_id] = _SPENT.get(order_id, 0) + amount_cents
    if amount_cents < 1 or _SPENT[order_id] > ORDERS[order_id]["amount_cents"]:
        raise ValueError("too much")


_GIVEN: dict[str, int] = {}


def _one_cent_slack(order_id: str, amount_cents: int) -> None:
    """Tracks the total, but lets it pass the price by a cent."""
    if amount_cents < 1 or _GIVEN.get(order_id, 0) + amount_cents > ORDERS[order_id]["amount_cents"] + 1:
        raise ValueError("too much")
    _GIVEN[order_id] = _GIVEN.get(order_id, 0) + amount_cents


def _absolute(order_id: str, amount_cents: int) -> None:
    """Refunds the size of a negative amount: -500 becomes 500."""
    _each_alone(order_id, abs(amount_cents))


def _slow_lookup(order_id: str) -> Any:
    time.sleep(30)


CAPSTONE_MUTANTS: dict[str, tuple[dict[str, Any], str | None]] = {
    "each refund alone within the price, no record of earlier ones": ({"tools": [lookup_order,
                                                                                 _refund_with(_each_alone)]},
                                                                      "refund-total"),
    "zero and negative refunds let through": ({"tools": [lookup_order, _refund_with(_any_amount_within)]},
                                              "refund-nonpositive"),
    "a record that counts refused refunds too": ({"tools": [lookup_order, _refund_with(_counts_refused_too)]},
                                                 "refund-off-by-one"),
    "a record with a cent of slack": ({"tools": [lookup_order, _refund_with(_one_cent_slack)]}, "refund-total"),
    "a policy that asks on a run's first call only": ({"policy": lambda c, s: c.name == "refund" and _amount(c) >= 5000
                                                       and s.tool_calls == 0}, "once-per-run"),
    "a negative amount refunded as its size": ({"tools": [lookup_order, _refund_with(_absolute)]},
                                               "refund-nonpositive"),
    "a refund capped at a hard-coded amount": ({"tools": [lookup_order, _refund_with(_over(12900))]},
                                               "refund-unchecked"),
    "a refund capped at $50": ({"tools": [lookup_order, _refund_with(_over(5000))]}, None),
    "a refund that never checks": ({"tools": [lookup_order, _refund_with(lambda o, a: None)]}, "refund-unchecked"),
    "a refund checked against a copy of the shop": ({"tools": [lookup_order, _refund_with(_copy_check)]}, "stale"),
    "a refund that refuses the whole price": ({"tools": [lookup_order, _refund_with(_ge_check)]},
                                              "refund-off-by-one"),
    "a refund of unknown orders": ({"tools": [lookup_order, _refund_with(_no_unknown)]}, "refund-unknown"),
    "a refund that is not a write": ({"tools": [lookup_order, _refund_with(_copy_check, risk="read")]}, "declared"),
    "a refund run by the client": ({"tools": [lookup_order, _refund_with(_no_unknown, client=True)]}, "declared"),
    "a lookup from a table": ({"tools": [_lookup_with(lambda o: COPY[o]), refund]}, "stale"),
    "a lookup that returns None": ({"tools": [_lookup_with(lambda o: ORDERS.get(o)), refund]}, "unknown-order"),
    "a lookup that returns text": ({"tools": [_lookup_with(lambda o: str(ORDERS[o])), refund]}, "type"),
    "a lookup that returns the status only": ({"tools": [_lookup_with(lambda o: {"status": ORDERS[o]["status"]}),
                                                         refund]}, "partial"),
    "a lookup that needs approval": ({"tools": [_lookup_with(lookup_fn, approval=True), refund]}, "declared"),
    "a lookup that never finishes": ({"tools": [_lookup_with(_slow_lookup), refund]}, "timeout"),
    "a budget that cannot look up and refund": ({"budget": anb.Budget(max_tool_calls=1)}, "too-tight"),
    "a budget with no limit": ({"budget": anb.Budget()}, "too-loose"),
    "a budget of turns": ({"budget": anb.Budget(max_turns=6)}, "too-loose"),
    "a policy that asks for nothing": ({"policy": lambda c, s: False}, "policy-through"),
    "a policy with an upper bound": ({"policy": lambda c, s: c.name == "refund" and 5000 <= _amount(c) <= 20000},
                                     "policy-through"),
    "a policy with >": ({"policy": lambda c, s: c.name == "refund" and _amount(c) > 5000}, "policy-through"),
    "a policy for every refund": ({"policy": lambda c, s: c.name == "refund"}, "policy-pauses"),
    "a policy that pauses everything": ({"policy": lambda c, s: True}, "policy-pauses"),
    "a policy that crashes on lookups": ({"policy": lambda c, s: c.arguments["amount_cents"] >= 5000}, "crash"),
}


@pytest.mark.parametrize("name", list(CAPSTONE_MUTANTS))
def test_wrong_agents_get_fix(name: str) -> None:
    changes, kind = CAPSTONE_MUTANTS[name]
    answer = {"tools": [lookup_order, refund], "policy": policy, "budget": BUDGET} | changes
    for seed in SEEDS[:1] if kind == "timeout" else SEEDS:
        report = workshop.check("capstone", seed=seed, time_limit=0.3, **answer)
        assert not report.passed, f"{name} passed with seed {seed}:\n{report}"
        if kind is not None:
            assert kind in report.kinds, f"{name}: expected {kind!r}, got {report.kinds}:\n{report}"
    assert set(ORDERS) == {"A100", "B200", "C300"}  # the fresh orders are gone after the check


# -- right answers pass, on many draws -----------------------------------------------------------------------------


@anb.tool(name="refund", risk="write")
def refund_in_the_order(order_id: str, amount_cents: Annotated[int, pydantic.Field(gt=0)]) -> dict[str, Any]:
    """Refund part of an order, writing what was refunded into the order itself.

    Args:
        order_id: The order id.
        amount_cents: The amount, in cents (at least 1).
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id}")
    done = order.get("refunded_cents", 0)
    if done + amount_cents > order["amount_cents"]:
        raise ValueError(f"only {order['amount_cents'] - done} cents of order {order_id} are left to refund")
    order["refunded_cents"] = done + amount_cents
    return {"order_id": order_id, "amount_cents": amount_cents}


BALANCE: dict[str, int] = {}


@anb.tool(name="refund", risk="write")
def refund_from_a_balance(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Refund part of an order from what is left of it.

    Args:
        order_id: The order id.
        amount_cents: The amount, in cents.
    """
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id}")
    left = BALANCE.setdefault(order_id, ORDERS[order_id]["amount_cents"])
    if not 0 < amount_cents <= left:
        raise ValueError(f"a refund of order {order_id} is 1 to {left} cents")
    BALANCE[order_id] = left - amount_cents
    return {"order_id": order_id, "amount_cents": amount_cents}



@anb.tool
def regex_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text.
    """
    import re

    return len(re.findall(r"\S+", text))


@anb.tool
async def async_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text.
    """
    await asyncio.sleep(0)
    return len(text.split())


def needs_approval(call: Any, state: Any) -> bool:
    if call.name != "create_refund":
        return False
    return bool((call.arguments or {}).get("amount_cents", 0) >= 5000)


def stop_at(event: Any) -> bool:
    return event.type == "CallValidated" and getattr(event, "name", None) == "create_refund"


def _scribbles(event: Any) -> bool:
    """Right, though it writes into the events it is given (their arguments, their names)."""
    if getattr(event, "arguments", None) is not None:
        event.arguments.clear()
    right = event.type == "CallValidated" and getattr(event, "name", None) == "create_refund"
    if hasattr(event, "name"):
        event.name = "scribbled"
    return bool(right)


RIGHT: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("stop_at", (_scribbles,), {}),
    ("tool", (word_count,), {}),
    ("tool", (documented(lambda t: sum(1 for _ in t.split(None)), "Word count of a text, split on whitespace.\n\n"
                         "Args:\n    text: Any text; runs of spaces, tabs and newlines separate its words.\n"),), {}),
    ("tool", (documented(lambda t: len(re.split(r"\s+", t.strip())) if t.strip() else 0,
                         "How many words a text has.\n\nArgs:\n    text: The text whose words are counted.\n"),), {}),
    ("tool", (regex_count,), {}),
    ("tool", (async_count,), {}),
    ("stop_at", (stop_at,), {}),
    ("stop_at", (lambda e: True if _validated_refund(e) else None,), {}),
    ("stop_at", (lambda e: (e.type, getattr(e, "name", "")) == ("CallValidated", "create_refund"),), {}),
    ("policy", (needs_approval,), {}),
    ("policy", (lambda c, s: {"get_order": False}.get(c.name, _amount(c) > 4999),), {}),
    ("policy", (lambda c, s: c.name == "create_refund" and not c.arguments["amount_cents"] < 5000,), {}),
    ("budget", (anb.Budget(max_tool_calls=4),), {}),
    ("budget", (anb.Budget(max_tool_calls=4, on_exhausted="finalize", max_turns=30),), {}),
    # limits that cannot matter once 4 calls are the most a run makes: right in other words
    ("budget", (anb.Budget(max_tool_calls=4, max_turns=5, max_parallel=1, max_repeats=2),), {}),
    ("budget", (anb.Budget(max_tool_calls=4, max_total_tokens=10_000_000),), {}),
    ("capstone", (), {"tools": [lookup_order, refund], "policy": policy, "budget": BUDGET}),
    ("capstone", (), {"tools": [lookup_order, refund], "policy": policy, "budget": anb.Budget(max_tool_calls=4)}),
    ("capstone", (), {"tools": [lookup_order, refund_in_the_order], "policy": policy, "budget": BUDGET}),
    ("capstone", (), {"tools": [lookup_order, refund_from_a_balance], "policy": policy, "budget": BUDGET}),
]


@pytest.mark.parametrize("exercise", ["tool", "stop_at", "policy", "budget", "capstone"])
def test_a_passing_report_reads_the_same_on_every_draw(exercise: str) -> None:
    """The solutions notebook compares the passing reports as text, so nothing random may show in them."""
    _, args, kwargs = next(r for r in RIGHT if r[0] == exercise)
    texts = {str(workshop.check(exercise, *args, seed=s, **kwargs)) for s in SEEDS[:3]}
    assert len(texts) == 1, texts


@pytest.mark.parametrize(("exercise", "args", "kwargs"), RIGHT)
def test_right_answers_pass_every_draw(exercise: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for seed in [*SEEDS, *random.sample(range(10**6), 5)]:
        report = workshop.check(exercise, *args, seed=seed, **kwargs)
        assert report.passed, f"seed {seed}:\n{report}"


# -- 05 · read_stream(chunks) -> (calls, may_run) -------------------------------------------------------------

from tests.test_workshop_wire import read_stream  # noqa: E402 - the right answer, shared with the exercise's tests


def _reader(*, key: str = "index", first_fragment: bool = True, keep_id: bool = True, one: bool = False,
            per_delta: bool = False, last_call: bool = False, first_choice: bool = False, none_safe: bool = True,
            parse: bool = False, order: str = "index", first_entry: bool = False,
            may: Callable[[str | None, dict[int, Any], bool], Any] | None = None) -> Callable[[list[Any]], Any]:
    """A reader with one mistake switched on (the defaults make the right answer)."""

    def read(chunks: list[Any]) -> Any:
        calls: dict[Any, dict[str, Any]] = {}
        finish, refused = None, False
        for chunk in chunks:
            for choice in chunk["choices"][:1] if not first_choice else [chunk["choices"][0]]:
                delta = choice.get("delta") or {}
                refused = refused or bool(delta.get("refusal"))
                entries = (delta.get("tool_calls") or []) if none_safe else delta.get("tool_calls", [])
                for d in entries[:1] if first_entry else entries:
                    fn = d.get("function") or {}
                    if one:
                        k: Any = 0
                    elif per_delta:
                        k = len(calls)
                    elif last_call:
                        k = len(calls) if d.get("id") else max(calls)
                    else:
                        k = d[key]
                    call = calls.setdefault(k, {"id": None, "name": None, "arguments": ""})
                    call["id"] = d.get("id") if not keep_id else (d.get("id") or call["id"])
                    call["name"] = fn.get("name") if not keep_id else (fn.get("name") or call["name"])
                    if d.get("id") and not first_fragment:
                        continue
                    call["arguments"] += fn.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        out = [calls[k] for k in sorted(calls)] if order == "index" else sorted(calls.values(), key=lambda c: c["id"])
        if parse:
            out = [{**c, "arguments": json.loads(c["arguments"])} for c in out]
        ok = (may or (lambda f, cs, r: f in ("tool_calls", "stop") and not r and bool(cs)))(finish, calls, refused)
        return out, ok

    return read


def _all_parse(chunks: list[Any]) -> Any:
    calls, _ = read_stream(chunks)
    try:
        for c in calls:
            json.loads(c["arguments"])
    except ValueError:
        return calls, False
    return calls, True


def _every_delta_has_calls(chunks: list[Any]) -> Any:
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in chunks:
        for choice in chunk["choices"]:
            for d in choice["delta"]["tool_calls"] or []:
                call = calls.setdefault(d["index"], {"id": None, "name": None, "arguments": ""})
                call["id"] = d.get("id") or call["id"]
                call["name"] = (d.get("function") or {}).get("name") or call["name"]
                call["arguments"] += (d.get("function") or {}).get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return [calls[i] for i in sorted(calls)], finish in ("tool_calls", "stop") and bool(calls)


def _endless_reader(chunks: list[Any]) -> Any:
    while True:
        pass


WIRE_MUTANTS: dict[str, tuple[Any, str | None]] = {
    "reads only tool_calls[0] of a delta": (_reader(first_entry=True), "every-entry"),
    "may_run = finish is 'tool_calls' or 'stop', refusals ignored": (
        _reader(may=lambda f, cs, r: f in ("tool_calls", "stop") and bool(cs)), "refused-calls"),
    "may_run = finish is not 'length' (content_filter runs)": (
        _reader(may=lambda f, cs, r: f not in ("length", None) and not r and bool(cs)), "content-filter"),
    "may_run = not refused and finished (content_filter runs)": (
        _reader(may=lambda f, cs, r: f is not None and f != "length" and not r and bool(cs)), "content-filter"),
    "merges by id": (_reader(key="id"), "by-id"),
    "adds each fragment to the last call": (_reader(last_call=True), "by-index"),
    "one call for everything": (_reader(one=True), "one-call"),
    "a new call per delta": (_reader(per_delta=True), "split"),
    "skips the first delta's fragment": (_reader(first_fragment=False), "first-fragment"),
    "later deltas overwrite the id with None": (_reader(keep_id=False), "id-lost"),
    "chunk['choices'][0]": (_reader(first_choice=True), "empty-choices"),
    "delta.get('tool_calls', []) (None in the SDK's form)": (_reader(none_safe=False), "none-fields"),
    "parses the arguments": (_reader(parse=True), "type"),
    "sorted by id": (_reader(order="id"), "order"),
    "may_run = there are calls": (_reader(may=lambda f, cs, r: bool(cs)), "cut"),
    "may_run = a finish_reason came": (_reader(may=lambda f, cs, r: f is not None and bool(cs)), "cut"),
    "may_run = finish is not 'length'": (_reader(may=lambda f, cs, r: f != "length" and bool(cs)), "no-finish"),
    "may_run = finish is 'tool_calls'": (_reader(may=lambda f, cs, r: f == "tool_calls"), "stop-calls"),
    "may_run = every call parses": (_all_parse, "no-calls"),
    "may_run is the finish_reason": (_reader(may=lambda f, cs, r: f), "type"),
    "the starter ([], False)": (lambda chunks: ([], False), "lost"),
    "two parameters": (lambda chunks, tools: read_stream(chunks), "arity"),
    "returns only the calls": (lambda chunks: read_stream(chunks)[0], "shape"),
    "delta['tool_calls'] on every delta": (_every_delta_has_calls, "missing-field"),
    "an endless loop": (_endless_reader, "timeout"),
    "None": (None, "missing"),
}


@pytest.mark.parametrize("name", list(WIRE_MUTANTS))
def test_wrong_stream_readers_get_fix(name: str) -> None:
    answer, kind = WIRE_MUTANTS[name]
    for seed in SEEDS[:2] if kind == "timeout" else SEEDS:
        report = workshop.check("wire", answer, seed=seed, time_limit=0.3)
        assert not report.passed, f"{name} passed with seed {seed}:\n{report}"
        if kind is not None:
            assert kind in report.kinds, f"{name}: expected a {kind!r} diagnosis, got {report.kinds}:\n{report}"
        assert "Traceback" not in str(report)


def test_the_right_stream_reader_passes_every_draw() -> None:
    for seed in [*SEEDS, *random.sample(range(10**6), 20)]:
        report = workshop.check("wire", read_stream, seed=seed)
        assert report.passed, f"seed {seed}:\n{report}"
