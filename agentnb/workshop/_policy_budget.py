"""The checks of notebooks 03 (an approval policy) and 04 (a budget); see :mod:`.exercises` for how checks work.

Both are judged on properties over fresh random cases: a policy on reads of random orders and refunds just
below, at and just above the limit and far beyond it; a budget on models that never stop calling (one call a
turn or two, short and very long contexts) and on a task that fits within it. :func:`budget_runs` is shared
with the capstone (:mod:`.capstone`), whose budget is judged the same way.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from typing import Any

from .._engine.guards import Budget
from .._loop import Loop
from .._messages import Message
from .._run import Run
from .._states import LoopState
from ..events import CallValidated, GuardTripped
from ..providers._scripted import ScriptedModel, ScriptStep
from ..stories import create_refund, get_order
from ..tools import Tool, tool
from ._common import (
    TIMEOUT_HINTS,
    Hints,
    calls,
    finished,
    is_placeholder,
    no_result,
    policy_crash,
    reply,
    safe_run,
    sentence,
    short,
    shown,
)
from ._guard import Leash
from ._report import Report

__all__ = ["budget_runs", "check_budget", "check_policy", "is_budget", "is_policy", "money", "no_clock_or_money",
           "one_run", "takes"]


# -- 03: an approval policy -------------------------------------------------------------------------------------


def money(cents: int) -> str:
    """Cents as dollars: ``money(5000) == '$50.00'``."""
    return f"${cents / 100:,.2f}"


def is_policy(report: Report, policy: Any) -> bool:
    """Whether the answer is a function of ``(call, state)`` (a FIX line says what it is instead)."""
    if is_placeholder(policy) or not callable(policy):
        got = "not written yet" if is_placeholder(policy) else f"got {shown(policy)}"
        report.fix("a policy", got, "write `def needs_approval(call, state): return ...` returning True or False",
                   kind="missing")
        return False
    return takes(policy, 2, report, "a policy", "def needs_approval(call, state)", "the call and the run's state")


def check_policy(report: Report, policy: Any = None, *, limit_cents: int = 5000, rng: random.Random,
                 leash: Leash) -> None:
    """Notebook 03: ``needs_approval(call, state) -> bool``: refunds of ``limit_cents`` or more need a person."""
    if not is_policy(report, policy):
        return
    lim = limit_cents

    def order() -> str:  # a fresh order id for every case: a rule about one order cannot pass
        return str(rng.randint(100, 99_999))

    groups: list[tuple[str, str, list[tuple[str, dict[str, Any]]], bool]] = [
        ("reads", "every read goes through", [("get_order", {"order_id": order()}) for _ in range(3)], False),
        ("small", f"small refunds go through (under {money(lim)})",
         [("create_refund", {"order_id": order(), "amount_cents": a})
          for a in (1, rng.randint(2, lim // 2), rng.randint(lim // 2, lim - 2))], False),
        ("below", f"just below the limit ({money(lim - 1)}) goes through",
         [("create_refund", {"order_id": order(), "amount_cents": lim - 1})], False),
        ("at", f"exactly the limit ({money(lim)}) waits", [("create_refund", {"order_id": order(),
                                                                                "amount_cents": lim})], True),
        ("above", f"just above the limit ({money(lim + 1)}) waits",
         [("create_refund", {"order_id": order(), "amount_cents": lim + 1})], True),
        ("big", "big refunds wait", [("create_refund", {"order_id": order(), "amount_cents": a})
                                     for a in (rng.randint(lim + 2, 10 * lim), rng.randint(10 * lim, 100 * lim))],
         True),
        ("far", "refunds far beyond the limit wait",
         [("create_refund", {"order_id": order(), "amount_cents": rng.randint(10**6, 10**9)})], True),
    ]
    seen: list[tuple[tuple[Any, ...], Any]] = []
    wrapped = leash.wrap(policy, seen)
    outcome: dict[str, list[tuple[dict[str, Any], bool, Any]]] = {}
    for key, _, cases, _ in groups:
        for name, args in cases:
            loop = Loop(model=ScriptedModel([calls(name, args), reply]), tools=[get_order, create_refund],
                        approval=wrapped, override_tool_approval=True, headless=False)
            run = loop.start("Help with this order").run()
            if leash.timed_out:
                report.fix("your policy answers in time", f"asked about {name}({args}), it did not finish",
                           TIMEOUT_HINTS, kind="timeout")
                return
            crash = policy_crash(run)
            if crash is not None:
                detail, hints, kind = no_result(run, [get_order, create_refund])
                report.fix(f"a {name} call", f"{detail} (asked about {name}({args}))", hints, kind=kind)
                return
            raw = seen[-1][1] if seen else None
            outcome.setdefault(key, []).append((args, run.state is LoopState.WAITING_APPROVAL, raw))
    paused = {k: [p for _, p, _ in v] for k, v in outcome.items()}
    everything = all(all(v) for v in paused.values())
    n_cases = sum(len(v) for v in paused.values())
    if everything or not any(any(v) for v in paused.values()):  # the same answer for every call: no line passes
        raws = [raw for v in outcome.values() for _, _, raw in v if raw is not None and not isinstance(raw, bool)]
        if everything:
            hints, kind = _policy_hints("reads", paused, True, lim)
            detail = f"all {n_cases} calls waited for a person, lookups and refunds of any amount"
        else:
            hints, kind = (("your policy never says yes: which calls must wait for a person?",
                            f"refunds of {money(lim)} or more must wait: look at which tool is called and at the "
                            "amount in its arguments"), "pauses-none")
            far = outcome["far"][0][0]["amount_cents"]
            detail = f"none of the {n_cases} calls waited, not even a refund of {money(far)}"
        if raws:
            detail += f" (your policy returned {shown(raws[0])})"
            hints, kind = (("a policy answers a yes/no question: what does your function return?",
                            "any non-zero number or non-empty text counts as 'yes, ask a person'; return a "
                            "comparison"), "type")
        report.fix("it tells calls apart", detail, hints, kind=kind)
        return
    for key, what, _, should in groups:
        wrong = [(args, p, raw) for args, p, raw in outcome[key] if p != should]
        if not wrong:
            n = len(outcome[key])
            report.ok(what, f"{n} case{'s' if n > 1 else ''}")
            continue
        args, p, raw = wrong[0]
        subject = "a lookup" if key == "reads" else f"a refund of {money(args['amount_cents'])}"
        detail = f"{subject} {'waited for a person' if p else 'went through without a person'}"
        if raw is not None and not isinstance(raw, bool):
            report.fix(what, f"{detail}: your policy returned {shown(raw)}",
                       ("a policy answers a yes/no question: what does your function return?",
                        "any non-zero number or non-empty text counts as 'yes, ask a person'; return a comparison"),
                       kind="type")
            continue
        hints, kind = _policy_hints(key, paused, everything, lim)
        report.fix(what, detail, hints, kind=kind)

    if report.passed:  # each call alone is judged right: now several in one run, as a real agent makes them
        one_run(report, wrapped, leash, lim, order, rng)


def one_run(report: Report, wrapped: Callable[..., Any], leash: Leash, lim: int, order: Callable[[], str],
            rng: random.Random, tools: Sequence[Tool] = (get_order, create_refund), lookup: str = "get_order",
            refund: str = "create_refund", options: dict[str, Any] | None = None) -> None:
    """One run of many calls (a lookup, big and small refunds, two at once): each big refund waits.

    However many calls came before it in the run; what waits is approved, as a person would, and the run goes on.
    ``tools`` (with the names of the lookup and the refund tool) and loop ``options`` let the capstone play it on
    the student's own tools.
    """
    what = "in one run of many calls, every refund of the limit or more waits, not only the first"
    big = [rng.randint(lim, 3 * lim), lim, rng.randint(lim + 1, 100 * lim)]
    small = [rng.randint(1, lim - 1), lim - 1]
    turns: list[list[tuple[str, dict[str, Any]]]] = [
        [(refund, {"order_id": order(), "amount_cents": big[0]})],
        [(lookup, {"order_id": order()}), (refund, {"order_id": order(), "amount_cents": small[0]})],
        [(refund, {"order_id": order(), "amount_cents": big[1]}),
         (refund, {"order_id": order(), "amount_cents": big[2]})],
        [(refund, {"order_id": order(), "amount_cents": small[1]})],
    ]
    script: list[ScriptStep] = [calls_of(t) for t in turns] + [reply]
    loop = Loop(model=ScriptedModel(script), tools=list(tools), approval=wrapped, override_tool_approval=True,
                headless=False, **(options or {}))
    run = safe_run(report, what, loop, "Help with these orders")
    waited: set[str] = set()
    for _ in range(10):
        if run is None or leash.timed_out or run.state is not LoopState.WAITING_APPROVAL or policy_crash(run):
            break
        for c in run.pending_approvals():
            waited.add(c.call_id)
            run.approve(c.call_id, by="the check")
        run.run()
    if run is None:
        return
    if leash.timed_out:
        report.fix(what, "your policy did not finish on a call of this run", TIMEOUT_HINTS, kind="timeout")
        return
    crash = policy_crash(run)
    if crash is not None:
        detail, hints, kind = no_result(run, list(tools))
        report.fix(what, detail, hints, kind=kind)
        return
    validated = [e for e in run.events if isinstance(e, CallValidated)]
    for n, e in enumerate(validated):
        amount = e.arguments.get("amount_cents") if e.name == refund else None
        should = amount is not None and amount >= lim
        if (e.call_id in waited) == should:
            continue
        earlier = sum(1 for v in validated[:n] if v.call_id in waited)
        subject = "a lookup" if amount is None else f"a refund of {money(amount)}"
        detail = f"call {n + 1} of the run, {subject}, {'waited' if not should else 'went through without a person'}"
        if should and earlier:
            report.fix(what, f"{detail}, after {earlier} earlier call{'s' if earlier > 1 else ''} of the same run "
                       "had waited", ("your policy is asked about every call, also the second big refund of a run: "
                                      "what makes it answer differently the second time?",
                                      "the rule depends on the call alone (its tool and its amount), not on what "
                                      "happened before in the run, nor on a flag your function keeps"),
                       kind="once-per-run")
        else:
            report.fix(what, detail, ("a call alone passed, but not in the middle of a run: what else does your "
                                      "policy read?", "the rule depends on the call alone (its tool and its "
                                      "amount), not on the state of the run"), kind="state")
        return
    report.ok(what, f"{len(validated)} calls in {len(turns)} turns, {len(waited)} of them waited")


def calls_of(turn: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """A scripted turn with the given calls (of any tools)."""
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in turn]}


def _policy_hints(key: str, paused: dict[str, list[bool]], everything: bool, lim: int) -> tuple[Hints, str]:
    limit_text = money(lim)
    if everything:
        return (("it pauses every call, even a lookup: which calls move money?",
                 "the call says which tool is asked for; only the refund tool moves money, and only some refunds "
                 "need a person"), "pauses-all")
    if key == "reads":
        return (("a lookup changes nothing: why would it need a person?",
                 "the policy is asked about every call of every tool; look at which tool a call is for"),
                "pauses-read")
    small_paused = any(paused["small"]) or any(paused["below"])
    big_through = not all(paused["big"] + paused["far"])
    if small_paused and big_through:
        return (("small refunds wait and big ones go through: your comparison points the wrong way",
                 f"read your rule aloud: it should be true for {lim}, {lim + 1} and 1,000,000 cents and false for "
                 f"{lim - 1}"), "threshold-direction")
    if key in ("small", "below"):
        return ((f"a refund under {limit_text} waited: where does your rule start?",
                 f"amounts are in cents: {limit_text} is {lim} cents, and {lim - 1} cents must go through"),
                "threshold-low")
    if key == "at" and all(paused["above"]):
        return ((f"look at the exact boundary: a refund of exactly {limit_text} must wait",
                 f"'{limit_text} or more' includes {limit_text} itself: which comparison includes the limit?"),
                "off-by-one")
    if key in ("big", "far") and all(paused["at"] + paused["above"]):
        return (("a very big refund went through: does your rule stop somewhere?",
                 "the rule has no upper end: every amount at or above the limit waits, however big"), "upper-bound")
    return ((f"a refund of {limit_text} or more went through: your limit is higher than {limit_text}",
             f"find the smallest amount your rule stops, and compare it with {lim} cents"), "threshold-high")


def takes(fn: Callable[..., Any], n: int, report: Report, what: str, shape: str, args: str) -> bool:
    """True when ``fn`` can be called with ``n`` positional arguments; a FIX line (kind ``arity``) otherwise."""
    try:
        inspect.signature(fn).bind(*([None] * n))
    except TypeError as exc:
        report.fix(what, f"it cannot be called with {n} arguments ({exc})",
                   (f"agentnb calls it with {n} arguments: {args}",
                    f"write it as `{shape}: ...`, even if it does not use every argument"), kind="arity")
        return False
    except ValueError:  # a builtin without a signature: try it
        pass
    return True


# -- 04: a budget ---------------------------------------------------------------------------------------------


def _fetch_page_fn(n: int) -> str:
    """Fetch page n of the search results.

    Args:
        n: The page number.
    """
    many = 700 if n == 2 else 10  # page 2 is long (about 30,000 characters), as real pages can be
    return f"page {n}: " + "; ".join(f"result {n}.{i}: a paragraph about the topic" for i in range(many))


_fetch_page = tool(name="fetch_page")(_fetch_page_fn)


def _usage(rng: random.Random, scale: int) -> dict[str, int]:
    return {"input_tokens": rng.randint(scale, 4 * scale), "output_tokens": rng.randint(scale // 10 + 1, scale)}


def _fetcher(rng: random.Random, per_turn: int, scale: int) -> ScriptStep:
    """A model that fetches page after page (``per_turn`` at a time) and answers only when made to finalize."""

    def step(messages: Sequence[Message]) -> dict[str, Any]:
        done = sum(len(m.tool_results) for m in messages if m.role == "tool")
        if messages[-1].role == "user" and done:  # the loop's finalization instruction
            return {"text": f"From the {done} pages I read: enough to answer.", "usage": _usage(rng, scale)}
        pages = [{"n": done + i + 1} for i in range(per_turn)]
        return {**calls("fetch_page", *pages), "usage": _usage(rng, scale)}

    return step


def _finisher(rng: random.Random, shape: list[int], answer: str, scale: int) -> list[ScriptStep]:
    """A model that needs ``sum(shape)`` calls (``shape[i]`` in turn ``i``), then answers by itself.

    Every turn reads a context of 3 to 4 times ``scale`` tokens: played at the longest scale, it is the corner of
    a task within the budget that a token cap must leave room for.
    """

    def usage() -> dict[str, int]:
        return {"input_tokens": rng.randint(3 * scale, 4 * scale),
                "output_tokens": rng.randint(scale // 20, scale // 5)}

    out: list[ScriptStep] = []
    page = 0
    for k in shape:
        out.append({**calls("fetch_page", *[{"n": page + i + 1} for i in range(k)]), "usage": usage()})
        page += k
    out.append({"text": answer, "usage": usage()})
    return out


def is_budget(report: Report, budget: Any) -> bool:
    """Whether the answer is a ``Budget`` (a FIX line says what it is instead; an ``ok`` line when it is one)."""
    if is_placeholder(budget):
        report.fix("a budget", "not written yet", "write `budget = anb.Budget(...)`", kind="missing")
        return False
    if not isinstance(budget, Budget):
        report.fix("a budget", f"got {shown(budget)}",
                   ("a budget is an object agentnb reads: which class makes one?",
                    "make it with anb.Budget(...), with the limits as keyword arguments"), kind="type")
        return False
    report.ok("it is a Budget")
    return True


def check_budget(report: Report, budget: Any = None, *, calls_allowed: int = 4, rng: random.Random,
                 leash: Leash) -> None:
    """Notebook 04: a Budget that lets the model make ``calls_allowed`` tool calls, then asks for an answer."""
    del leash  # a Budget is data: nothing of the student's runs
    if not is_budget(report, budget):
        return
    budget_runs(report, budget, calls_allowed, rng, "")
    no_clock_or_money(report, budget, "tool calls")


def no_clock_or_money(report: Report, budget: Budget, asked: str) -> None:
    """A FIX line for a limit on time (or, when ``asked`` is not dollars, money) the exercise did not ask for.

    An offline check cannot show them at work: its scripted model answers in microseconds and costs nothing, so a
    deadline of a second, a tool timeout or a cost cap would pass every run here and stop a real model early.
    """
    extra = [f"{name}={value!r}" for name, value in (("deadline_s", budget.deadline_s),
                                                      ("tool_timeout", budget.tool_timeout)) if value is not None]
    if asked != "dollars" and budget.max_cost is not None:
        extra.append(f"max_cost={budget.max_cost!r}")
    what = "no limit the exercise did not ask for (time, money)" if asked != "dollars" else \
        "no limit on time the exercise did not ask for"
    if not extra:
        report.ok(what)
        return
    report.fix(what, f"your budget also sets {', '.join(extra)}",
               ("the check's scripted model answers in microseconds and costs nothing, so these limits never showed "
                "here: what would they do to a real model?", f"a real model takes seconds per turn and costs money: "
                f"a deadline, a tool timeout or a cost cap can stop it early. The exercise limits {asked} only: leave "
                "the others at their defaults"), kind="other-limit")


def budget_runs(report: Report, budget: Budget, n: int, rng: random.Random, who: str,
                 tools: Sequence[Tool] | None = None, endless: Callable[[int, int], ScriptStep] | None = None,
                 finishing: Callable[[list[int], str, int], list[ScriptStep]] | None = None,
                 exact: bool = True, loop_options: dict[str, Any] | None = None) -> None:
    """The budget's properties: endless models stop after ``n`` calls with an answer; a task within it finishes."""
    tools = list(tools or [_fetch_page])
    endless = endless or (lambda per, scale: _fetcher(rng, per, scale))
    finishing = finishing or (lambda shape, answer, scale: _finisher(rng, shape, answer, scale))
    # tokens per turn: a short context, a long one, and the longest a model reads (the task within the budget is
    # played at that corner, so a token cap that a real long run would hit is hit here too)
    longest = rng.randint(40_000, 50_000)
    scales = [rng.randint(20, 200), rng.randint(5_000, 40_000), longest]
    for per, what in ((1, f"{who}a model that never stops calling"), (2, f"{who}a model that calls two at a time")):
        scale = rng.choice(scales)
        model = ScriptedModel([endless(per, scale)] * 60)
        run = safe_run(report, what, Loop(model=model, tools=tools, budget=budget, **(loop_options or {})),
                       "Find everything")
        if run is None:
            continue
        got = run.view.tool_calls
        trip = _trip(run)
        ok_count = got == n if exact else (n // 2 <= got <= n)
        if run.state is LoopState.COMPLETED and ok_count and trip is not None and trip.guard == "max_tool_calls":
            report.ok(what, f"stopped after {_calls_text(got)}, with an answer")
        elif run.state is LoopState.COMPLETED and ok_count and trip is not None:
            report.fix(what, f"it stopped after {_calls_text(got)}, but because the {trip.guard} limit ran out, "
                       "not the limit on tool calls", ("another limit of your budget happened to stop this run at "
                                                       "the same place: which limits did you set?",
                                                       f"{trip.message}: the exercise limits tool calls only; a "
                                                       "model that works differently (more calls per turn, longer "
                                                       "pages) would be stopped elsewhere"), kind="other-limit")
        else:
            _budget_fix(report, what, run, got, n, trip, per)
    k = n - 1 if exact else max(2, n // 2)
    shape = [1] * k if rng.random() < 0.5 else ([2] + [1] * (k - 2) if k >= 2 else [1])
    answer = f"Done: {sentence(rng, rng.randint(3, 8))}."
    what = f"{who}a task that needs {k} calls"
    model = ScriptedModel(finishing(shape, answer, longest))
    run = safe_run(report, what, Loop(model=model, tools=tools, budget=budget, **(loop_options or {})), "Find it")
    if run is None:
        return
    trip = _trip(run)
    # a tool's own error is not the budget's doing (the capstone's tools are the student's); a cut result, a
    # timeout or a skipped call is
    bad = [e for e in finished(run) if e.status in ("timeout", "skipped") or e.truncated]
    if run.state is LoopState.COMPLETED and run.output == answer and trip is None and not bad:
        report.ok(what, f"the model made its {k} calls and answered by itself")
    elif bad:
        e = bad[0]
        why = f"a result was cut to fit ({e.truncated} characters removed)" if e.truncated else \
            f"a call ended {e.status}: {short(e.content, 60)}"
        report.fix(what, why, ("the budget limits more than calls: which of its limits touched a result?",
                               "max_result_chars cuts results and tool_timeout / deadline_s end calls; leave them at "
                               "their defaults for this exercise"), kind="other-limit")
    else:
        _budget_fix(report, what, run, run.view.tool_calls, k, trip, 1, finishing=True)


def _trip(run: Run) -> GuardTripped | None:
    """The first budget or guard that ran out (an approval waiver is recorded as a GuardTripped too: not that)."""
    return next((e for e in run.events if isinstance(e, GuardTripped) and e.guard != "approval_override"), None)


def _calls_text(n: int) -> str:
    return f"{n} call{'' if n == 1 else 's'}"


def _budget_fix(report: Report, what: str, run: Run, got: int, n: int, trip: GuardTripped | None, per: int,
                finishing: bool = False) -> None:
    guard = trip.guard if trip is not None else None
    if run.state is LoopState.BUDGET_EXHAUSTED and trip is not None and trip.action == "stop":
        report.fix(what, f"it ended BUDGET_EXHAUSTED after {_calls_text(got)}, with no answer",
                   ("when the budget runs out, the run can stop, ask a person, or ask the model for an answer: which "
                    "one did you choose?", "on_exhausted='stop' ends with no answer; 'finalize' makes one more call, "
                    "without tools, asking the model to answer from what it has"), kind="stops")
    elif run.state is LoopState.WAITING_APPROVAL:
        report.fix(what, f"it waits for a person after {_calls_text(got)}",
                   ("nobody is there to approve more calls: what else can the run do when the budget runs out?",
                    "on_exhausted='escalate' asks a person; 'finalize' asks the model for an answer"), kind="escalates")
    elif finishing or (run.state is LoopState.BUDGET_EXHAUSTED and got == 0):
        report.fix(what, f"the {guard or 'budget'} limit ran out after {_calls_text(got)}, before the model could "
                   "answer by itself", ("your budget is too tight: which limit ran out?",
                              f"{trip.message if trip else ''}: the exercise limits the number of tool calls, not "
                              "turns, tokens or dollars"), kind="too-tight")
    elif got < n:
        report.fix(what, f"it stopped after {_calls_text(got)} (the {guard or '?'} limit ran out); {n} are allowed",
                   (f"your budget is too tight: it must let the model make {n} calls",
                    f"{trip.message if trip else ''}: the exercise limits the number of tool calls, not turns, tokens "
                    "or dollars"), kind="too-tight")
    else:
        hints: Hints = (f"your budget lets the model make {got} calls: at most {n} are allowed",
                        "which limit counts tool calls? max_turns counts model turns, and one turn can ask for several "
                        "calls" if per > 1 or guard == "max_turns" else "which limit counts tool calls?")
        report.fix(what, f"it let the model make {_calls_text(got)}" + (f" ({per} per turn)" if per > 1 else ""), hints,
                   kind="too-loose")
