"""The course's exercises: each runs what a student wrote against scripted scenarios and fills a Report.

A student's code is an expected input, broken or not: every call into it is guarded, and whatever it does
(raises, returns the wrong thing, is still ``...``) becomes a FIX line that says what happened and what to
try. The scenarios are offline :class:`~agentnb.ScriptedModel` runs, so checks are fast and deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..events import ApprovalRequested, BaseEvent
from ..guards import Budget
from ..messages import Message
from ..providers.scripted import ScriptedModel, ScriptStep
from ..run import Loop, Run
from ..states import LoopState
from ..stories import create_refund, get_order
from ..tools import Tool
from ._report import Report, describe_exception

__all__ = ["EXERCISES", "SHOP_ORDERS", "check_budget", "check_capstone", "check_policy", "check_stop_at", "check_tool"]

SHOP_ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"order_id": "A100", "item": "Blue kettle", "amount_cents": 1999, "status": "shipped"},
    "B200": {"order_id": "B200", "item": "Espresso machine", "amount_cents": 12900, "status": "delivered"},
    "C300": {"order_id": "C300", "item": "Tea towels (3)", "amount_cents": 1250, "status": "processing"},
}
"""The shop of the capstone (notebook 07): the orders the student's ``lookup_order`` reads."""


def _last_result(messages: Sequence[Message]) -> Any:
    for m in reversed(messages):
        if m.role == "tool":
            return m.tool_results[0]
    return None


def _reply(messages: Sequence[Message]) -> dict[str, Any]:
    """A model turn that answers from the last tool result (whatever it was)."""
    r = _last_result(messages)
    return {"text": f"Tool said ({r.status}): {r.content}" if r is not None else "Done."}


def _calls(name: str, *arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": a} for a in arguments]}


def _endless(tool: str, arguments: list[dict[str, Any]], answer: str) -> ScriptStep:
    """A model turn that calls ``tool`` again with the next arguments, and answers only when made to finalize."""

    def step(messages: Sequence[Message]) -> dict[str, Any]:
        done = sum(m.role == "tool" for m in messages)
        if messages[-1].role == "user" and done:  # the loop's finalization instruction
            return {"text": answer}
        return _calls(tool, arguments[done % len(arguments)])

    return step


def _finished(run: Run) -> list[Any]:
    return [e for e in run.events if e.type == "ToolFinished"]


def _safe_run(report: Report, what: str, loop: Loop, prompt: str) -> Run | None:
    """Run a scenario to its end or its first pause; a crash in the student's code becomes a FIX line."""
    try:
        run = loop.start(prompt).run()
    except Exception as exc:
        hint = "this came from your code (a policy or a budget); read the message above"
        if isinstance(exc, KeyError | TypeError):
            hint = ("your policy is asked about every call, of every tool: check call.name first, or use "
                    "call.arguments.get(...)")
        report.fix(what, f"the run stopped with {describe_exception(exc)}", hint)
        return None
    raised = [e.note for e in run.events if isinstance(e, ApprovalRequested) and e.note and "policy raised" in e.note]
    if raised:  # a policy that raises fails closed (the call waits for a person): tell the student why
        report.fix(what, f"your policy crashed ({raised[0].split('raised ', 1)[1]}), so the call waited for a person",
                   "your policy is asked about every call, of every tool: check call.name first, or use "
                   "call.arguments.get(...)")
        return None
    return run


def _short(value: Any, n: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= n else text[: n - 1] + "…"


def _is_placeholder(obj: Any) -> bool:
    return obj is None or obj is Ellipsis


def _need_tool(report: Report, obj: Any, expected: str) -> Tool | None:
    if _is_placeholder(obj):
        report.fix(f"a tool {expected!r}", "not written yet (it is still None or ...)",
                   f"write `@anb.tool` then `def {expected}(...)` in the exercise cell and run it")
        return None
    if not isinstance(obj, Tool):
        if callable(obj):
            report.fix(f"a tool {expected!r}", f"{getattr(obj, '__name__', obj)!r} is a plain function",
                       "put `@anb.tool` on the line above `def` so agentnb builds its schema")
        else:
            report.fix(f"a tool {expected!r}", f"got {type(obj).__name__} {_short(repr(obj), 40)}",
                       "pass the function you decorated with @anb.tool")
        return None
    return obj


# -- 01: write a tool ---------------------------------------------------------------------------------------


def check_tool(report: Report, word_count: Any = None) -> None:
    """Notebook 01: ``word_count(text: str) -> int``, a tool with a docstring the model can read."""
    tool = _need_tool(report, word_count, "word_count")
    if tool is None:
        return
    report.ok("it is a tool", f"{tool.name}{_signature(tool)}")
    if tool.description.strip() and tool.description.strip() != tool.name:  # without a docstring it is the name
        report.ok("it has a description", _short(tool.description, 60))
    else:
        report.fix("it has a description", "the model sees no description",
                   "add a docstring: the model reads it to decide when to call your tool")
    props = tool.parameters.get("properties", {})
    strings = [k for k, v in props.items() if v.get("type") == "string"]
    if not strings:
        report.fix("a text parameter", f"the parameters are {sorted(props) or 'none'}; none is a string",
                   "declare it as `text: str`")
        return
    param = strings[0]
    if props[param].get("description"):
        report.ok("the argument is described", f"{param}: {_short(props[param]['description'], 50)}")
    else:
        report.fix("the argument is described", f"{param!r} has no description",
                   f"add an `Args:` section to the docstring with a line `{param}: what it is`")
    cases = [("the quick brown fox jumps", 5), ("", 0), ("  spaced   out  ", 2), ("one", 1)]
    script: list[ScriptStep] = [_calls(tool.name, {param: text}) for text, _ in cases] + [_reply]
    run = _safe_run(report, "the model can call it", Loop(model=ScriptedModel(script), tools=[tool]), "Count words")
    if run is None:
        return
    for (text, expected), ev in zip(cases, _finished(run), strict=False):
        call = f"{tool.name}({param}={text!r})"
        if ev.status != "ok":
            report.fix(call, f"your tool failed: {ev.error_type}: {ev.error_message}",
                       "the model gets this error as the result; make the tool work for this input")
        elif ev.value != expected:
            report.fix(call, f"returned {_short(ev.value, 40)}, expected {expected}",
                       "text.split() splits on any run of spaces; len() counts the pieces")
        else:
            report.ok(call, f"returned {expected}")
    if run.state is LoopState.COMPLETED:
        report.ok("the run completes", run.output or "")


def _signature(tool: Tool) -> str:
    props = tool.parameters.get("properties", {})
    return "(" + ", ".join(f"{k}: {v.get('type', '?')}" for k, v in props.items()) + ")"


# -- 02: a breakpoint predicate -------------------------------------------------------------------------------


def check_stop_at(report: Report, predicate: Any = None) -> None:
    """Notebook 02: ``stop_at(event) -> bool``, true at the event where the refund call is validated."""
    if _is_placeholder(predicate) or not callable(predicate):
        got = "not written yet" if _is_placeholder(predicate) else f"got {type(predicate).__name__}"
        report.fix("a predicate", got, "write `def stop_at(event): return ...` returning True or False")
        return
    def refund_run() -> Run:
        model = ScriptedModel.story("refund", stream=True, chunk_size=6)
        return Loop(model=model, tools=[get_order, create_refund]).start("Please refund order 42", run_id="refund")

    run = refund_run()
    stopped: BaseEvent | None = None
    try:
        stopped = run.run_until(predicate)
    except Exception as exc:
        report.fix("it works on every event", f"it raised {describe_exception(exc)} on event {len(run.events) - 1} "
                   f"({run.events[-1].type})",
                   "not every event has every field: check event.type first, or use getattr(event, 'name', None)")
        return
    report.ok("it works on every event", "no errors")
    target = refund_run().run_until(lambda e: e.type == "CallValidated" and getattr(e, "name", "") == "create_refund")
    assert target is not None
    if stopped is None:
        report.fix("it stops the run", "run_until never stopped: your predicate was False for every event",
                   "the event you want has type 'CallValidated' and name 'create_refund'")
        return
    name = getattr(stopped, "name", None)
    where = f"event {stopped.seq} ({stopped.type}{', ' + str(name) if name else ''})"
    if stopped.type == "CallValidated" and getattr(stopped, "name", None) == "create_refund":
        report.ok("it stops at the refund's validation", where)
        report.ok("nothing was refunded yet", f"state {run.state.value}")
    elif stopped.seq < target.seq:
        report.fix("it stops at the refund's validation", f"it stopped too early, at {where}",
                   "match both the type ('CallValidated') and the tool name ('create_refund')")
    else:
        report.fix("it stops at the refund's validation", f"it stopped late, at {where}",
                   "the refund is validated before it waits for approval")


# -- 03: an approval policy -------------------------------------------------------------------------------------


def check_policy(report: Report, policy: Any = None, *, limit_cents: int = 5000) -> None:
    """Notebook 03: ``needs_approval(call, state) -> bool``: refunds of ``limit_cents`` or more need a person."""
    if _is_placeholder(policy) or not callable(policy):
        got = "not written yet" if _is_placeholder(policy) else f"got {type(policy).__name__}"
        report.fix("a policy", got, "write `def needs_approval(call, state): return ...` returning True or False")
        return
    cases = [
        ("a read (get_order)", _calls("get_order", {"order_id": "42"}), False),
        ("a small refund ($19.99)", _calls("create_refund", {"order_id": "42", "amount_cents": 1999}), False),
        (f"a refund of exactly ${limit_cents / 100:.2f}",
         _calls("create_refund", {"order_id": "42", "amount_cents": limit_cents}), True),
        ("a big refund ($120.00)", _calls("create_refund", {"order_id": "42", "amount_cents": 12000}), True),
    ]
    for what, turn, should_pause in cases:
        loop = Loop(model=ScriptedModel([turn, _reply]), tools=[get_order, create_refund], approval=policy,
                    override_tool_approval=True)
        run = _safe_run(report, what, loop, "Help with order 42")
        if run is None:
            continue
        paused = run.state is LoopState.WAITING_APPROVAL
        if paused == should_pause:
            report.ok(what, "waits for a person" if paused else "goes through")
        elif should_pause:
            report.fix(what, "it went through without a person",
                       f"return True when call.name == 'create_refund' and call.arguments['amount_cents'] >= "
                       f"{limit_cents}")
        else:
            report.fix(what, "it waits for a person, but it should go through",
                       "reads and small refunds need no approval: return False for them")


# -- 04: a budget ---------------------------------------------------------------------------------------------


def check_budget(report: Report, budget: Any = None) -> None:
    """Notebook 04: a Budget that allows at most 4 tool calls, then asks for an answer (finalize)."""
    if _is_placeholder(budget):
        report.fix("a budget", "not written yet", "write `budget = anb.Budget(...)`")
        return
    if not isinstance(budget, Budget):
        report.fix("a budget", f"got {type(budget).__name__}", "make it with anb.Budget(max_tool_calls=..., ...)")
        return
    report.ok("it is a Budget")
    if budget.max_tool_calls is not None and budget.max_tool_calls <= 4:
        report.ok("at most 4 tool calls", f"max_tool_calls={budget.max_tool_calls}")
    else:
        report.fix("at most 4 tool calls", f"max_tool_calls={budget.max_tool_calls}", "set max_tool_calls=4")
    if budget.on_exhausted == "finalize":
        report.ok("it answers when the budget runs out", "on_exhausted='finalize'")
    else:
        report.fix("it answers when the budget runs out", f"on_exhausted={budget.on_exhausted!r}",
                   "'finalize' asks the model for an answer without tools; 'stop' ends with no answer")
    model = ScriptedModel([_endless("fetch_page", [{"n": i} for i in range(1, 40)], "From what I read: 40 results.")]
                          * 40)
    run = _safe_run(report, "a model that keeps fetching", Loop(model=model, tools=[_fetch_page], budget=budget),
                    "Find everything")
    if run is None:
        return
    calls = run.view.tool_calls
    if run.state is LoopState.COMPLETED and calls <= 4:
        report.ok("a model that keeps fetching", f"stopped after {calls} calls with an answer: {run.output}")
    else:
        report.fix("a model that keeps fetching", f"ended {run.state.value} after {calls} tool calls",
                   "with max_tool_calls=4 and on_exhausted='finalize' it ends COMPLETED after 4 calls")


def _fetch_page_fn(n: int) -> str:
    """Fetch page n of the search results.

    Args:
        n: The page number.
    """
    return f"page {n}: 10 results"


def _make_fetch_page() -> Tool:
    from ..tools import tool

    return tool(name="fetch_page")(_fetch_page_fn)


_fetch_page = _make_fetch_page()


# -- 07: the capstone --------------------------------------------------------------------------------------------


def check_capstone(
    report: Report, tools: Any = None, policy: Any = None, budget: Any = None, *, limit_cents: int = 5000
) -> None:
    """Notebook 07: a support agent: ``lookup_order`` and ``refund`` tools, an approval policy and a budget."""
    named = _capstone_tools(report, tools)
    if named is None:
        return
    if not isinstance(budget, Budget):
        report.fix("a budget", "not written yet" if _is_placeholder(budget) else f"got {type(budget).__name__}",
                   "budget = anb.Budget(max_tool_calls=6, on_exhausted='finalize')")
        return
    if _is_placeholder(policy) or not callable(policy):
        report.fix("a policy", "not written yet", "def policy(call, state): return True when a person must approve")
        return

    def loop(script: list[ScriptStep]) -> Loop:
        return Loop(model=ScriptedModel(script), tools=named, approval=policy, override_tool_approval=True,
                    budget=budget, system="You are the support agent of a small shop.")

    _capstone_lookups(report, loop)
    _capstone_refunds(report, loop, limit_cents)
    ids = [{"order_id": oid} for oid in ("A100", "B200", "C300", "D400", "E500", "F600", "G700", "H800")]
    script: list[ScriptStep] = [_endless("lookup_order", ids, "Here is what I found.")] * 30
    run = _safe_run(report, "a conversation that never ends", loop(script), "Tell me everything")
    if run is not None:
        calls = run.view.tool_calls
        if run.state is LoopState.COMPLETED and calls <= 6:
            report.ok("a conversation that never ends", f"the budget stopped it after {calls} calls, with an answer")
        else:
            report.fix("a conversation that never ends", f"ended {run.state.value} after {calls} tool calls",
                       "a budget with max_tool_calls of 6 or less and on_exhausted='finalize'")


def _capstone_tools(report: Report, tools: Any) -> list[Tool] | None:
    """``[lookup_order, refund]`` from what the student passed, or None after saying what is missing."""
    if _is_placeholder(tools) or not isinstance(tools, list | tuple):
        report.fix("the tools", "pass them as a list: tools=[lookup_order, refund]", "")
        return None
    named: dict[str, Tool] = {}
    for expected in ("lookup_order", "refund"):
        found = [t for t in tools if isinstance(t, Tool) and t.name == expected]
        if found:
            named[expected] = found[0]
        elif any(callable(t) and getattr(t, "__name__", "") == expected for t in tools):
            report.fix(f"a tool {expected!r}", "it is a plain function", "put @anb.tool (with options) above def")
        else:
            names = [getattr(t, "name", getattr(t, "__name__", repr(t))) for t in tools]
            report.fix(f"a tool {expected!r}", f"no tool has that name (you passed {names})",
                       "the scripted customer asks for these exact names")
    if len(named) < 2:
        return None
    report.ok("two tools", "lookup_order and refund")
    if named["refund"].risk == "write":
        report.ok("refund is marked as a write", "its calls go through the effect ledger")
    else:
        report.fix("refund is marked as a write", f"risk={named['refund'].risk!r}", "use @anb.tool(risk='write')")
    return [named["lookup_order"], named["refund"]]


def _capstone_lookups(report: Report, loop: Callable[[list[ScriptStep]], Loop]) -> None:
    what = "where is order A100?"
    run = _safe_run(report, what, loop([_calls("lookup_order", {"order_id": "A100"}), _reply]), "Where is A100?")
    if run is not None:
        ev = _finished(run)
        if ev and ev[0].status == "ok" and "shipped" in ev[0].content:
            report.ok(what, f"lookup_order returned {_short(ev[0].content, 60)}")
        elif ev and ev[0].status != "ok":
            report.fix(what, f"lookup_order failed: {ev[0].error_type}: {ev[0].error_message}",
                       "read the order from anb.workshop.SHOP_ORDERS[order_id]")
        else:
            report.fix(what, f"lookup_order returned {_short(ev[0].content if ev else None, 60)}",
                       "return the whole order (a dict): the model needs its status")
    what = "an order that does not exist"
    run = _safe_run(report, what, loop([_calls("lookup_order", {"order_id": "Z999"}), _reply]), "Where is Z999?")
    if run is not None:
        ev = _finished(run)
        if ev and ev[0].status == "error" and "Z999" in ev[0].content:
            report.ok(what, f"the model reads: {_short(ev[0].content, 70)}")
        else:
            got = f"{ev[0].status} {_short(ev[0].content, 50)}" if ev else "nothing"
            report.fix(what, f"lookup_order('Z999') gave {got}",
                       "raise an error that names the order (raise KeyError(f'no order {order_id}')): the model "
                       "reads the message and can tell the customer")


def _capstone_refunds(report: Report, loop: Callable[[list[ScriptStep]], Loop], limit_cents: int) -> None:
    cases = [
        ("a small refund (A100, $19.99)", {"order_id": "A100", "amount_cents": 1999}, "ok"),
        ("a big refund (B200, $129.00)", {"order_id": "B200", "amount_cents": 12900}, "pause"),
        ("refunding more than was paid (C300, $25.00)", {"order_id": "C300", "amount_cents": 2500}, "error"),
    ]
    for what, args, expected in cases:
        run = _safe_run(report, what, loop([_calls("refund", args), _reply]), "Refund please")
        if run is None:
            continue
        paused = run.state is LoopState.WAITING_APPROVAL
        if expected == "pause":
            if paused:
                report.ok(what, "waits for a person")
            else:
                report.fix(what, f"it did not wait for approval (the run is {run.state.value})",
                           f"your policy should return True for refunds of {limit_cents} cents or more")
            continue
        if paused:
            report.fix(what, "it waits for a person", f"refunds under {limit_cents} cents go through: return False")
            continue
        ev = _finished(run)
        status = ev[0].status if ev else "none"
        if status == expected:
            report.ok(what, "refunded" if expected == "ok" else f"refused: {_short(ev[0].content, 60)}")
        elif expected == "error":
            report.fix(what, "the refund went through", "check the amount against the order's amount_cents "
                       "and raise ValueError when it is more")
        else:
            report.fix(what, f"the refund failed: {_short(ev[0].content if ev else '', 70)}",
                       "return a dict like {'refund_id': ..., 'order_id': ..., 'amount_cents': ...}")


EXERCISES: dict[str, tuple[Callable[..., None], str]] = {
    "tool": (check_tool, "01 · write a tool: word_count(text) -> int"),
    "stop_at": (check_stop_at, "02 · a breakpoint predicate: stop where the refund call is validated"),
    "policy": (check_policy, "03 · an approval policy: refunds of $50 or more need a person"),
    "budget": (check_budget, "04 · a budget: at most 4 tool calls, then an answer"),
    "capstone": (check_capstone, "07 · a support agent: two tools, a policy and a budget"),
}
"""Every exercise by name: the check and one line on what it asks."""
