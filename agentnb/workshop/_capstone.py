"""The capstone check (notebook 07): a shop's support agent, tried on a shop that changes every check.

Theory of operation. The student's tools read :data:`SHOP_ORDERS`. For the time of one check, fresh orders
with random ids, prices and statuses are added to that very dict (and removed afterwards), so a tool that
answers from a table written by hand, or refuses refunds above a hard-coded amount, fails on orders it has
never seen. Each property is tried at its boundaries: a refund just under, at and just over what the order
cost, and far beyond it; zero and negative amounts; the same order refunded in parts until its refunds would add
up to more than it cost; just under, at and just over the approval limit, and far beyond it. Each group of
refunds has fresh orders of its own, and the check keeps its own record of each price and of what it saw
refunded (the tools get copies of the orders), so one mistake cannot spill into the next line and a tool that
writes into the shop changes nothing the check judges by. Order ids are never drawn twice in a kernel, so a
tool's record of earlier refunds never meets an order of an earlier check. Calls that wait for a person are
approved by the check, so the refund tool's own rule is tried for big amounts too. The budget
is tried on its own (with a policy that asks nobody): endless customers must be stopped with an answer, and a
customer who needs a lookup, another lookup and a refund must be served.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Sequence
from typing import Any

from .._engine.guards import Budget
from .._loop import Loop
from .._messages import Message
from .._run import Run
from .._states import LoopState
from ..events import ApprovalRequested, CallRejected
from ..providers._scripted import ScriptedModel, ScriptStep
from ..tools import Tool
from ._common import (
    TIMEOUT_HINTS,
    WORDS,
    Hints,
    calls,
    declaration,
    finished,
    is_placeholder,
    no_result,
    policy_crash,
    reply,
    short,
)
from ._common import shown as _shown
from ._exercises import SCENARIO_BUDGET, budget_runs, money, takes
from ._guard import Leash
from ._policy_budget import one_run
from ._report import Report

__all__ = ["SHOP_ORDERS", "check_capstone"]

SHOP_ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"order_id": "A100", "item": "Blue kettle", "amount_cents": 1999, "status": "shipped"},
    "B200": {"order_id": "B200", "item": "Espresso machine", "amount_cents": 12900, "status": "delivered"},
    "C300": {"order_id": "C300", "item": "Tea towels (3)", "amount_cents": 1250, "status": "processing"},
}
"""The shop of the capstone (notebook 07): the orders the student's ``lookup_order`` reads.

During a check, fresh orders are added here and removed afterwards: read this dict when a tool is called.
"""

_STALE: Hints = ("the check adds fresh orders to anb.workshop.SHOP_ORDERS while it runs: does your tool read the "
                 "shop each time it is called?",
                 "read anb.workshop.SHOP_ORDERS (ORDERS in the notebook is that same dict) inside the function; a "
                 "copy, or a table of answers written by hand, cannot know an order added later")


_DRAWN: set[str] = set()
"""Every order id a check of this kernel drew: none is drawn twice, so a refund tool's record of what it refunded
(a dict by order id) never meets an order of an earlier check."""


class _Shop:
    """The fresh orders of one check: added to :data:`SHOP_ORDERS` as copies, their prices kept by the check.

    The student's tools may change what they read (a refund may write down what it refunded): the check judges
    by its own record of each price and of what it saw refunded, never by the dict the tools share.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.price: dict[str, int] = {}
        """What each fresh order cost, as the check drew it."""
        self.left: dict[str, int] = {}
        """What is left to refund of each fresh order: its price less the refunds the check saw done."""

    def add(self, price: int) -> str:
        """A new order of ``price`` cents, in the shop until the check ends; returns its id."""
        rng = self.rng
        while True:
            oid = f"{rng.choice('KMNPRSTVW')}{rng.randint(100, 9999)}"
            if oid not in SHOP_ORDERS and oid not in _DRAWN:
                break
        _DRAWN.add(oid)
        order = {"order_id": oid, "item": f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}",
                 "amount_cents": price, "status": rng.choice(("shipped", "delivered", "processing", "returned"))}
        SHOP_ORDERS[oid] = dict(order)
        self.price[oid] = self.left[oid] = price
        return oid

    def expect(self, oid: str, amount: int) -> str:
        """``ok`` when a refund of ``amount`` must be done (1 cent up to what is left), else ``error``."""
        return "ok" if oid in self.left and 1 <= amount <= self.left[oid] else "error"


@contextlib.contextmanager
def _fresh_orders(rng: random.Random, limit: int) -> Iterator[tuple[_Shop, list[str]]]:
    """A shop for the time of a check, with three fresh orders to look up: two cheap (under the limit), one dear."""
    shop = _Shop(rng)
    try:
        ids = [shop.add(rng.randint(600, limit - 700)) for _ in range(2)]
        ids.append(shop.add(rng.randint(limit + 1000, 60 * limit)))
        yield shop, ids
    finally:
        for oid in shop.price:
            SHOP_ORDERS.pop(oid, None)


def _unknown_id(rng: random.Random) -> str:
    while True:
        oid = f"Z{rng.randint(1000, 99_999)}"
        if oid not in SHOP_ORDERS:
            return oid


def check_capstone(report: Report, tools: Any = None, policy: Any = None, budget: Any = None, *,
                   limit_cents: int = 5000, calls_allowed: int = 6, rng: random.Random, leash: Leash) -> None:
    """Notebook 07: a support agent: ``lookup_order`` and ``refund`` tools, an approval policy and a budget."""
    named = _capstone_tools(report, tools)
    if named is None:
        return
    if not isinstance(budget, Budget):
        report.fix("a budget", "not written yet" if is_placeholder(budget) else f"got {_shown(budget)}",
                   ("Step 4 asks for a budget: which class makes one?", "budget = anb.Budget(...) with the limit "
                    "of Step 4 as a keyword argument"), kind="missing")
        return
    if is_placeholder(policy) or not callable(policy):
        report.fix("a policy", "not written yet" if is_placeholder(policy) else f"got {_shown(policy)}",
                   "def policy(call, state): return True when a person must approve", kind="missing")
        return
    if not takes(policy, 2, report, "the policy", "def policy(call, state)", "the call and the run's state"):
        return
    lookup, refund = (leash.tool(t) for t in named)

    def loop(script: list[ScriptStep]) -> Loop:
        return Loop(model=ScriptedModel(script), tools=[lookup, refund], approval=leash.wrap(policy),
                    override_tool_approval=True, budget=SCENARIO_BUDGET,
                    system="You are the support agent of a small shop.")

    with _fresh_orders(rng, limit_cents) as (shop, looked_up):
        if _lookups(report, loop, shop, looked_up, rng, named):
            _refunds(report, loop, shop, rng, named, limit_cents)
            if report.passed:  # each refund alone is right: now several in one run, as a real customer asks
                one_run(report, leash.wrap(policy), leash, limit_cents,
                        lambda: shop.add(rng.randint(100 * limit_cents, 200 * limit_cents)), rng, [lookup, refund],
                        "lookup_order", "refund", {"budget": SCENARIO_BUDGET})
        _capstone_budget(report, budget, shop, rng, lookup, refund, calls_allowed)


def _capstone_tools(report: Report, tools: Any) -> list[Tool] | None:
    """``[lookup_order, refund]`` from what the student passed, or None after saying what is missing."""
    if is_placeholder(tools) or not isinstance(tools, list | tuple):
        report.fix("the tools", "pass them as a list: tools=[lookup_order, refund]", "", kind="missing")
        return None
    named: dict[str, Tool] = {}
    for expected in ("lookup_order", "refund"):
        found = [t for t in tools if isinstance(t, Tool) and t.name == expected]
        if found:
            named[expected] = found[0]
        elif any(callable(t) and getattr(t, "__name__", "") == expected for t in tools):
            report.fix(f"a tool {expected!r}", "it is a plain function", "put @anb.tool (with options) above def",
                       kind="not-a-tool")
        else:
            names = [getattr(t, "name", getattr(t, "__name__", repr(t))) for t in tools]
            report.fix(f"a tool {expected!r}", f"no tool has that name (you passed {names})",
                       "the scripted customers ask for these exact names", kind="names")
    if len(named) < 2:
        return None
    report.ok("two tools", "lookup_order and refund")
    look, ref = named["lookup_order"], named["refund"]
    if look.risk == "read" and look.approval in (None, False) and not look.client:
        report.ok("lookup_order is a read", "it runs at once")
    else:
        report.fix("lookup_order is a read", f"it is declared {declaration(look)}",
                   ("looking an order up changes nothing: does it need a person, a ledger or a client?",
                    "risk='write' and approval=True are for tools that change something; client=True means agentnb "
                    "never runs it"), kind="declared")
    if ref.risk in ("write", "dangerous") and not ref.client:
        report.ok("refund is marked as a write", "its calls go through the effect ledger")
    else:
        report.fix("refund is marked as a write", f"it is declared {declaration(ref)}",
                   ("a refund moves money: how does agentnb know a tool changes something?",
                    "the risk option of @anb.tool says it; a write goes through the effect ledger (notebook 03b)"),
                   kind="declared")
    return [look, ref]


def _lookups(report: Report, loop: Any, shop: _Shop, looked_up: list[str], rng: random.Random,
             tools: Sequence[Tool]) -> bool:
    """Every order of the shop, the fresh ones too, is looked up whole; an unknown one is an error naming it."""
    fresh = shop.price
    ids = [*looked_up, rng.choice(["A100", "B200", "C300"])]
    rng.shuffle(ids)
    what = "looking up orders (fresh ones too)"
    for oid in ids:
        run = loop([calls("lookup_order", {"order_id": oid}), reply]).start(f"Where is {oid}?").run()
        ev = finished(run, "lookup_order")
        order = SHOP_ORDERS[oid]
        if not ev:
            detail, hints, kind = no_result(run, tools)
            report.fix(what, f"lookup_order({oid!r}) got no result: {detail}", hints, kind=kind)
            return False
        e = ev[0]
        if e.status != "ok" and e.error_type == "CheckTimeout":
            report.fix(what, f"lookup_order({oid!r}) {e.error_message}", TIMEOUT_HINTS, kind="timeout")
            return False
        if e.status != "ok":
            hints, kind = (_STALE, "stale") if oid in fresh else (("the model gets this error as the result; make "
                                                                   "the tool work for an order that exists",
                                                                   "try lookup_order.fn('A100') in a cell"), "crash")
            report.fix(what, f"lookup_order({oid!r}) failed: {e.error_type}: {short(e.error_message, 60)}", hints,
                       kind=kind)
            return True
        if not isinstance(e.value, dict):
            report.fix(what, f"lookup_order({oid!r}) returned {_shown(e.value)}",
                       ("the model reads the order's fields: what type holds fields and their values?",
                        "return the order as a dict, as it is in the shop"), kind="type")
            return True
        missing = [k for k, v in order.items() if e.value.get(k) != v]
        if missing:
            stale = oid in fresh and "order_id" in e.value and e.value["order_id"] != oid
            report.fix(what, f"lookup_order({oid!r}) returned {short(e.value, 70)}; "
                       f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not the order's",
                       _STALE if stale else ("the model only knows what your tool returns: return the whole order",
                                             "return every field of the order (item, amount_cents, status)"),
                       kind="stale" if stale else "partial")
            return True
    report.ok(what, f"{len(ids)} orders, each returned whole")
    oid = _unknown_id(rng)
    what = "an order that does not exist"
    run = loop([calls("lookup_order", {"order_id": oid}), reply]).start(f"Where is {oid}?").run()
    ev = finished(run, "lookup_order")
    if ev and ev[0].status == "error" and oid in ev[0].content:
        report.ok(what, "the model reads an error that names the order")
    else:
        got = f"{ev[0].status} {short(ev[0].content, 50)}" if ev else "no result"
        report.fix(what, f"lookup_order({oid!r}) gave {got}",
                   ("the model must be able to tell the customer the order does not exist: what does it read?",
                    "raise an error whose message names the order: agentnb sends the message to the model as an "
                    "error result"), kind="unknown-order")
    return True


def _approve_all(run: Run) -> tuple[Run, bool]:
    """Approve what waits (as the shop's manager would) and run on; returns whether anything waited."""
    waited = False
    for _ in range(3):
        pending = list(run.pending_approvals())
        if run.state is not LoopState.WAITING_APPROVAL or not pending or policy_crash(run):
            break
        kinds = {e.call_id: e.kind for e in run.events if isinstance(e, ApprovalRequested)}
        if any(kinds.get(c.call_id) != "approval" for c in pending):
            break
        waited = True
        for c in pending:
            run.approve(c.call_id, by="the check")
        run.run()
    return run, waited


def _refunds(report: Report, loop: Any, shop: _Shop, rng: random.Random, tools: Sequence[Tool], lim: int) -> None:
    """Refunds in groups, one property each, every group on orders of its own (one mistake cannot spill over)."""
    c1, c2, c3, c4, c5 = (shop.add(rng.randint(600, lim - 700)) for _ in range(5))
    d1, d2, d3 = (shop.add(rng.randint(3 * lim, 60 * lim)) for _ in range(3))
    p = shop.price
    parts = [rng.randint(p[c5] // 4, p[c5] // 3), rng.randint(p[c5] // 4, p[c5] // 3)]
    rest = p[c5] - sum(parts)
    unknown = _unknown_id(rng)
    groups: list[tuple[str, list[tuple[str, int]]]] = [
        ("a small refund goes through, and is done", [(c1, rng.randint(1, p[c1] - 1)), (d1, rng.randint(1, lim - 2))]),
        ("refunding exactly what was paid is done", [(c2, p[c2])]),
        ("a refund just over what was paid is refused", [(c3, p[c3] + 1)]),
        ("refunds far beyond what was paid are refused", [(c3, p[c3] * rng.randint(100, 10_000)), (d1, p[d1] + 1)]),
        ("a refund of zero or fewer cents is refused", [(c4, 0), (c4, -rng.randint(1, p[c4]))]),
        ("refunds of one order add up to at most what it cost",
         [(c5, parts[0]), (c5, parts[1]), (c5, rest + rng.randint(1, parts[0])), (c5, rest), (c5, 1)]),
        (f"the approval limit: {money(lim - 1)} goes through", [(d2, lim - 1)]),
        (f"the approval limit: {money(lim)} and {money(lim + 1)} wait", [(d3, lim), (d3, lim + 1)]),
        ("refunding an order that does not exist is refused", [(unknown, rng.randint(1, lim - 1))]),
    ]
    for what, cases in groups:
        problem = None
        for oid, amount in cases:
            problem = _one_refund(loop, tools, shop, oid, amount, lim)
            if problem is not None:
                break
        if problem is None:
            report.ok(what, f"{len(cases)} case{'s' if len(cases) > 1 else ''}")
        else:
            detail, hints, kind = problem
            report.fix(what, detail, hints, kind=kind)


def _refund_outcome(run: Run) -> tuple[str, str, str] | None:
    """``(status, content, error type)`` of the run's refund call: its result, or its rejection by the schema."""
    ev = finished(run, "refund")
    if ev:
        return ev[0].status, ev[0].content, ev[0].error_type or ""
    rejected = [e for e in run.events if isinstance(e, CallRejected) and e.name == "refund" and e.reason == "schema"]
    if rejected:  # a bound in the schema (pydantic.Field(gt=0)) refuses the call before it runs: a refusal too
        return "error", rejected[0].message, "schema"
    return None


def _one_refund(loop: Any, tools: Sequence[Tool], shop: _Shop, oid: str, amount: int,
                lim: int) -> tuple[str, Hints, str] | None:
    """One refund through the agent; None when it behaved, else (what happened, hints, kind)."""
    call = f"refund({oid!r}, {amount})"
    expected = shop.expect(oid, amount)
    fresh = oid in shop.price
    run = loop([calls("refund", {"order_id": oid, "amount_cents": amount}), reply]).start("Refund please").run()
    crash = policy_crash(run)
    if crash is not None:
        detail, hints, kind = no_result(run, tools)
        return f"{call}: {detail}", hints, kind
    run, waited = _approve_all(run)
    outcome = _refund_outcome(run)
    if amount >= lim and not waited and fresh and (outcome is None or outcome[2] != "schema"):
        return (f"{call} went through without a person",
                (f"refunds of {money(lim)} or more must wait: where does your policy's rule start, and does it end?",
                 f"the policy must say yes for {lim}, {lim + 1} and any bigger amount; read call.arguments of the "
                 "refund calls"), "policy-through")
    if amount < lim and waited:
        return (f"{call} waited for a person",
                (f"a refund under {money(lim)} needs no person: which calls does your policy stop?",
                 f"{lim - 1} cents must go through; only refunds of {lim} cents or more wait, and lookups never"),
                "policy-pauses")
    if outcome is None:
        detail, hints, kind = no_result(run, tools)
        return f"{call} got no result: {detail}", hints, kind
    status, content, error_type = outcome
    if status == expected:
        if status == "ok":
            shop.left[oid] -= amount
        return None
    if error_type == "CheckTimeout":
        return f"{call}: {content}", TIMEOUT_HINTS, "timeout"
    return _refund_mistake(call, shop, oid, amount, expected, status, content)


def _refund_mistake(call: str, shop: _Shop, oid: str, amount: int, expected: str, status: str,
                    content: str) -> tuple[str, Hints, str]:
    """Why a refund's outcome is not the one expected (the check's own record of the order says which)."""
    paid, left = shop.price.get(oid), shop.left.get(oid)
    if status == "ok":
        shop.left[oid] = (left or 0) - amount  # it was done: the student's tool counts it, so the check does too
    if expected == "error" and paid is None:
        return (f"{call} was done, but there is no order {oid}",
                ("a refund of an order that does not exist must fail: does your refund look the order up?",
                 "raise an error naming the order when it is not in the shop"), "refund-unknown")
    assert paid is not None and left is not None
    if expected == "error" and amount < 1:
        return (f"{call} was done: a refund of {amount} cents",
                ("a refund of 0 cents moves no money, and one of fewer takes money from the customer: what should "
                 "your tool do with it?", "raise an error when amount_cents is less than 1 (or bound the parameter "
                 "in its schema: pydantic.Field(gt=0))"), "refund-nonpositive")
    if expected == "error" and left < paid:
        return (f"{call} was done, but order {oid} cost {money(paid)} and {money(paid - left)} of it was refunded "
                f"already: {money(left)} was left", ("this order was refunded before: how much of it is left to "
                                                     "refund?", "keep what each order has been refunded (a dict by "
                                                     "order id, added to when a refund is done) and refuse a refund "
                                                     "bigger than the price less that"), "refund-total")
    if expected == "error":
        return (f"{call} was done, but order {oid} cost {money(paid)}",
                ("compare the amount with what this very order cost",
                 "read the order's amount_cents from the shop when refund is called, and raise an error when the "
                 "refund is more; a fixed amount cannot fit every order"), "refund-unchecked")
    if amount == left:
        said = f"the customer paid exactly {money(paid)}" if left == paid else \
            f"{money(left)} of the {money(paid)} paid was left to refund"
        return (f"{call} was refused, but {said}",
                ("refunding all that is left is allowed", "a refund is refused only when it is *more* than what is "
                 "left of the order's amount_cents"), "refund-off-by-one")
    if left < paid:
        return (f"{call} was refused: {short(content, 80)}; {money(left)} of the {money(paid)} paid was left",
                ("this order was refunded before: what is left of it?", "what is left is the price less the refunds "
                 "done; refuse only what is more than that"), "refund-total")
    return f"{call} failed: {short(content, 80)}", _STALE, "stale"


def _capstone_budget(report: Report, budget: Budget, shop: _Shop, rng: random.Random,
                     lookup: Tool, refund: Tool, n: int) -> None:
    cheap = shop.add(rng.randint(600, 4000))  # an order of its own: nothing refunded yet
    ids = [*SHOP_ORDERS]

    def endless(per: int, scale: int) -> ScriptStep:
        def step(messages: Sequence[Message]) -> dict[str, Any]:
            done = sum(len(m.tool_results) for m in messages if m.role == "tool")
            if messages[-1].role == "user" and done:
                return {"text": "Here is what I found.", "usage": {"input_tokens": scale, "output_tokens": 20}}
            args = [{"order_id": ids[(done + i) % len(ids)]} for i in range(per)]
            return {**calls("lookup_order", *args), "usage": {"input_tokens": scale, "output_tokens": 20}}
        return step

    def finishing(shape: list[int], answer: str, scale: int) -> list[ScriptStep]:
        usage = {"input_tokens": scale, "output_tokens": 30}
        other = rng.choice([o for o in ids if o != cheap])
        first = [{"order_id": cheap}, {"order_id": other}]
        turns: list[ScriptStep] = ([{**calls("lookup_order", *first), "usage": usage}] if rng.random() < 0.5 else
                                   [{**calls("lookup_order", a), "usage": usage} for a in first])
        amount = rng.randint(1, shop.price[cheap])
        turns.append({**calls("refund", {"order_id": cheap, "amount_cents": amount}), "usage": usage})
        turns.append({"text": answer, "usage": usage})
        return turns

    budget_runs(report, budget, n, rng, "budget: ", tools=[lookup, refund], endless=endless, finishing=finishing,
                exact=False, loop_options={"approval": False, "override_tool_approval": True})
