"""Notebook 13's exercise: a budget in dollars, ``Budget(max_cost=..., prices=...)``, that ends a run with an answer.

Theory of operation. A cost limit is only as good as its prices: a price filed under another model name, or
given per token instead of per million tokens, or with input and output swapped, turns the limit off or moves
it without a word. So the check does not read the student's numbers and compare them with the right ones; it
plays models whose token usage is drawn at random every check, computes what each turn really costs at the
published prices, and looks at *when* the run stopped. Its models answer as OpenAI's API does: provider
``openai_chat``, and the dated snapshot ``gpt-4.1-mini-2025-04-14`` for a request for ``gpt-4.1-mini``, so a
price under the alias, under ``openai:gpt-4.1-mini`` or under the snapshot's own name counts (one rule:
:meth:`~agentnb.Budget.price`). The runs count the student's prices alone (``price_table=False``): agentnb's
maintained table would price the model by itself, and the exercise is to write the prices.


- a model that never stops, its context growing (mostly input tokens): the run must stop at the first turn
  whose running cost reaches the limit, no earlier and no later, and then answer (``finalize``);
- a model that writes a lot (mostly output tokens, where swapped prices cost half as much): the same;
- a short task that costs less than the limit must finish by itself, untouched.

Only once the behaviour is wrong does the check look at the budget to say *why* (a wrong model name, prices per
token, swapped prices, cents for dollars, another limit that ran out first), in graduated hints.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._engine.guards import Budget
from .._engine.prices import keys
from .._loop import Loop
from .._messages import Message
from .._run import Run
from .._states import LoopState
from ..events import GuardTripped, TurnCompleted
from ..providers._prices import NAMES_ONLY
from ..providers._scripted import ScriptedModel, ScriptStep
from ..tools import tool
from ._common import Hints, calls, safe_run
from ._guard import Leash
from ._policy_budget import is_budget, no_clock_or_money
from ._report import Report

__all__ = ["COST_ANSWER", "COST_LIMIT", "COST_MODEL", "COST_PRICES", "COST_PROVIDER", "check_cost"]

COST_MODEL = "gpt-4.1-mini"
"""The model the exercise's runs ask for (the alias a price is usually filed under)."""
COST_ANSWER = "gpt-4.1-mini-2025-04-14"
"""The model the runs' turns report, as OpenAI answers a request for :data:`COST_MODEL`: a dated snapshot."""
COST_PROVIDER = "openai_chat"
"""The provider tag on the runs' turns (OpenAI Chat Completions, ``anb.model("openai:...")``)."""
COST_PRICES = (0.40, 1.60)
"""Its published prices: US dollars per million input tokens, per million output tokens."""
COST_LIMIT = 0.02
"""What a run may spend, in US dollars."""


def _search_fn(page: int) -> str:
    """Read one page of the search results.

    Args:
        page: The page number, from 1.
    """
    return f"page {page}: " + "; ".join(f"result {page}.{i}" for i in range(5))


_search = tool(name="search")(_search_fn)


class _AsOpenAI(ScriptedModel):
    """A scripted model whose turns come back as OpenAI's do: from ``openai_chat``, under the snapshot's name."""

    provider = COST_PROVIDER


def _model(script: Sequence[ScriptStep]) -> ScriptedModel:
    return _AsOpenAI(script, name=COST_ANSWER)


def _counted(budget: Budget) -> Budget:
    """The student's budget, counting their prices alone (the maintained table would price the model itself)."""
    return replace(budget, price_table=False)


def _entry(budget: Budget) -> tuple[str, Any] | None:
    """The key and value of the student's prices the runs' turns count at, by the budget's own rule."""
    for key in keys(NAMES_ONLY.names(COST_PROVIDER), COST_ANSWER):
        if key in budget.prices:
            return key, budget.prices[key]
    return None


def dollars(usage: tuple[int, int], prices: Sequence[float] = COST_PRICES) -> float:
    """What one turn's ``(input tokens, output tokens)`` cost at ``prices`` (dollars per million tokens)."""
    return usage[0] * prices[0] / 1e6 + usage[1] * prices[1] / 1e6


def _reading(rng: random.Random) -> tuple[int, int]:
    """A turn of a model reading a long context: 2 to 9 turns reach the limit."""
    return rng.randint(7_000, 20_000), rng.randint(50, 400)


def _writing(rng: random.Random) -> tuple[int, int]:
    """A turn of a model writing a lot (input a quarter of output): swapped prices count it at less than half."""
    out = rng.randint(3_700, 5_300)
    return out // 4 + rng.randint(0, 50), out


def _hair(rng: random.Random, above: bool) -> list[tuple[int, int]]:
    """Turns whose running cost comes within a hair (0.05 to 0.4 %) of the limit after turn 3 to 6.

    Just under it (``above=False``: the next turn reaches it) or just over it: a limit a few per cent off stops
    a turn apart.
    """
    k = rng.randint(3, 6)
    usages = [(rng.randint(3_000, 7_000), rng.randint(50, 300)) for _ in range(k - 1)]
    share = rng.uniform(0.0005, 0.004)
    target = COST_LIMIT * (1 + share if above else 1 - share)
    out = rng.randint(50, 300)
    rest = target - sum(dollars(u) for u in usages) - dollars((0, out))
    usages.append((round(rest / COST_PRICES[0] * 1e6), out))
    return usages + [_reading(rng) for _ in range(40)]


def _short_pages(rng: random.Random) -> list[tuple[int, int]]:
    """Many cheap turns: the limit is reached after 17 to 22 of them (within the default of 25 turns)."""
    m = rng.randint(17, 22)
    out = rng.randint(20, 60)
    tin = round((COST_LIMIT / m - dollars((0, out))) / COST_PRICES[0] * 1e6)
    return [(round(tin * rng.uniform(0.97, 1.03)), out) for _ in range(40)]


def _endless(usages: list[tuple[int, int]]) -> ScriptStep:
    """A model that reads page after page with the given usage per turn, and answers only when made to."""

    def step(messages: Sequence[Message]) -> dict[str, Any]:
        turn = sum(1 for m in messages if m.role == "assistant")
        tin, tout = usages[min(turn, len(usages) - 1)]
        usage = {"input_tokens": tin, "output_tokens": tout}
        done = sum(len(m.tool_results) for m in messages if m.role == "tool")
        if messages[-1].role == "user" and done:  # the loop's finalization instruction
            return {"text": f"From the {done} pages I read: here is the answer.", "usage": usage}
        return {**calls("search", {"page": done + 1}), "usage": usage}

    return step


def _untied(usages: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The turns, with any running cost that lands within 0.03 % of the limit moved clear of it (30 tokens).

    A tie within rounding would make the expected turn a matter of float error; the hair scenarios stay 0.05 %
    or more away on purpose.
    """
    out, spent = [], 0.0
    for tin, tout in usages:
        if abs(spent + dollars((tin, tout)) - COST_LIMIT) < COST_LIMIT * 3e-4:
            tin += round(COST_LIMIT * 6e-4 / COST_PRICES[0] * 1e6)
        spent += dollars((tin, tout))
        out.append((tin, tout))
    return out


def _first_over(usages: list[tuple[int, int]], limit: float) -> int:
    """The number of turns after which the running cost first reaches ``limit``."""
    spent = 0.0
    for k, u in enumerate(usages, 1):
        spent = round(spent + dollars(u), 6)
        if spent >= limit:
            return k
    return len(usages) + 1


def _turns_before_trip(run: Run) -> tuple[GuardTripped | None, int]:
    turns = 0
    for e in run.events:
        if isinstance(e, TurnCompleted):
            turns += 1
        elif isinstance(e, GuardTripped) and e.guard != "approval_override":
            return e, turns
    return None, turns


def check_cost(report: Report, budget: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 13: a Budget that stops a ``gpt-4.1-mini`` run once it has spent $0.02, then asks for an answer."""
    del leash  # a Budget is data: nothing of the student's runs
    if not is_budget(report, budget):
        return
    scenarios = [
        ("a model that reads long pages and never stops", [_reading(rng) for _ in range(40)]),
        ("a model that writes a lot and never stops", [_writing(rng) for _ in range(40)]),
        (f"a run a hair under ${COST_LIMIT:.2f} goes on; the next turn reaches it", _hair(rng, above=False)),
        (f"a run a hair over ${COST_LIMIT:.2f} stops there", _hair(rng, above=True)),
        ("a model that reads many short pages (about 20 turns)", _short_pages(rng)),
    ]
    for what, drawn in scenarios:
        usages = _untied(drawn)
        model = _model([_endless(usages)] * 45)
        run = safe_run(report, what, Loop(model=model, tools=[_search], budget=_counted(budget)), "Find everything")
        if run is None:
            continue
        expected = _first_over(usages, COST_LIMIT)
        trip, turns = _turns_before_trip(run)
        if trip is not None and trip.guard == "max_cost" and turns == expected and run.state is LoopState.COMPLETED:
            report.ok(what, f"stopped at the first turn that reached ${COST_LIMIT:.2f}, then answered")
            continue
        _fix(report, what, budget, run, trip, turns, expected, usages)
    _cheap_task(report, budget, rng)
    no_clock_or_money(report, budget, "dollars")


def _cheap_task(report: Report, budget: Budget, rng: random.Random) -> None:
    what = f"a task that costs less than ${COST_LIMIT:.2f} finishes by itself"
    n = rng.randint(2, 4)
    share = rng.uniform(0.3, 0.8) * COST_LIMIT / (n + 1)  # the whole task: 30 to 80 % of the limit
    tin = int(share / (COST_PRICES[0] + COST_PRICES[1] / 10) * 1e6)
    usage = {"input_tokens": tin, "output_tokens": tin // 10}
    answer = f"Found it on page {n}."
    script: list[ScriptStep] = [{**calls("search", {"page": i + 1}), "usage": usage} for i in range(n)]
    script.append({"text": answer, "usage": usage})
    run = safe_run(report, what, Loop(model=_model(script), tools=[_search], budget=_counted(budget)), "Find it")
    if run is None:
        return
    trip, _ = _turns_before_trip(run)
    if run.state is LoopState.COMPLETED and run.output == answer and trip is None:
        report.ok(what, "it made its calls and answered, untouched")
        return
    spent = dollars((tin, tin // 10)) * (n + 1)
    if trip is not None and trip.guard == "max_cost":
        hints, kind = _why(budget, early=True)
        report.fix(what, f"the cost limit stopped a task that costs ${spent:.4f} in all", hints, kind=kind)
    elif trip is not None:
        report.fix(what, f"the {trip.guard} limit stopped it ({trip.message})",
                   ("another limit of your budget ran out: which ones did you set?",
                    "this exercise limits dollars only: leave the other limits at their defaults"),
                   kind="wrong-limit")
    else:
        report.fix(what, f"it ended {run.state.value}: {run.reason}", ("read the run's events to see where it stopped",
                                                                        "anb.Debugger(run) shows every step"),
                   kind="no-result")


def _fix(report: Report, what: str, budget: Budget, run: Run, trip: GuardTripped | None, turns: int,
         expected: int, usages: list[tuple[int, int]]) -> None:
    spent = sum(dollars(u) for u in usages[:turns])
    if trip is not None and trip.guard == "max_cost" and turns == expected:  # right moment, wrong ending
        if run.state is LoopState.WAITING_APPROVAL:
            hints: Hints = ("nobody is there to approve more spending: what else can the run do at the limit?",
                            "on_exhausted='escalate' asks a person; 'finalize' asks the model for an answer")
            report.fix(what, "it stopped at the limit but waits for a person", hints, kind="escalates")
        else:
            report.fix(what, f"it stopped at the limit but ended {run.state.value}, with no answer",
                       ("when the budget runs out the run can stop, ask a person, or ask the model for an answer: "
                        "which one did you choose?", "on_exhausted='stop' ends with no answer; 'finalize' makes one "
                        "more call, without tools, asking for an answer from what the model has"), kind="stops")
        return
    if trip is None or trip.guard != "max_cost":
        ran = f"the {trip.guard} limit ran out" if trip is not None else f"it ended {run.state.value}"
        detail = f"{ran} after {turns} turns and ${spent:.4f}; the cost limit never stopped it"
        if trip is not None and trip.guard != "max_turns" and budget.max_cost is not None \
                and _first_over(usages, budget.max_cost) > turns and _entry(budget) is not None:
            report.fix(what, detail, ("another limit of your budget ran out first: which ones did you set?",
                                      "this exercise limits dollars only: leave turns, calls and tokens at their "
                                      "defaults"), kind="wrong-limit")
            return
        hints, kind = _why(budget, early=False)
        report.fix(what, detail, hints, kind=kind)
        return
    early = turns < expected
    detail = (f"the cost limit stopped it {'early' if early else 'late'}: after {turns} turns (${spent:.4f} spent at "
              f"the published prices); ${COST_LIMIT:.2f} was reached after turn {expected}")
    hints, kind = _why(budget, early=early)
    report.fix(what, detail, hints, kind=kind)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 + 1e-6 * abs(b)


def _why(budget: Budget, *, early: bool) -> tuple[Hints, str]:
    """Why a budget's cost limit is off: read from the budget, once its behaviour showed that it is."""
    if budget.max_cost is None:
        return (("which limit of a Budget counts dollars?",
                 "max_cost is in US dollars, and it needs prices to turn tokens into dollars"), "no-cost-limit")
    if not budget.prices:
        return (("max_cost alone cannot know what a token costs: what else does the budget need?",
                 "prices= maps a model name to (dollars per million input tokens, dollars per million output "
                 "tokens); this exercise counts your prices alone (agentnb's maintained price table is off here), "
                 "and without a price for the model max_cost cannot count its turns"), "no-prices")
    entry = _entry(budget)
    if entry is None:
        return ((f"your prices are filed under {', '.join(map(repr, budget.prices))}: is that the model the run uses?",
                 f"a price is found under the model's name ({COST_MODEL!r}; the dated snapshot {COST_ANSWER!r} the "
                 f"API answers with finds its alias) or under provider:model ('openai:{COST_MODEL}'); under any "
                 "other name max_cost cannot count the turns (agentnb warns once)"), "price-name")
    price = tuple(float(p) for p in entry[1])
    if len(price) == 2 and _close(price[0], COST_PRICES[0] / 1e6) and _close(price[1], COST_PRICES[1] / 1e6):
        return (("your prices are a million times too small: in what unit are they?",
                 "prices are US dollars per million tokens, as providers publish them: $0.40 per million is 0.40"),
                "per-token")
    if len(price) == 2 and _close(price[0], COST_PRICES[1]) and _close(price[1], COST_PRICES[0]):
        return (("look at the order of the two prices",
                 "the pair is (input price, output price); output tokens cost more"), "prices-swapped")
    if len(price) != 2 or not (_close(price[0], COST_PRICES[0]) and _close(price[1], COST_PRICES[1])):
        return (("compare your prices with the ones in the exercise, one by one",
                 "(dollars per million input tokens, dollars per million output tokens)"), "prices")
    if _close(budget.max_cost, COST_LIMIT * 100):
        return (("your limit is a hundred times too big: in what unit is max_cost?",
                 "max_cost is in dollars: 2 cents is 0.02"), "cents")
    if early:
        return ((f"your limit is lower than ${COST_LIMIT:.2f}", "compare max_cost with the exercise's limit"),
                "limit-low")
    if budget.max_cost > COST_LIMIT:
        return ((f"your limit is higher than ${COST_LIMIT:.2f}", "compare max_cost with the exercise's limit"),
                "limit-high")
    return (("another limit of your budget ran out first: which ones did you set?",
             "this exercise limits dollars only: leave turns, calls and tokens at their defaults"), "wrong-limit")
