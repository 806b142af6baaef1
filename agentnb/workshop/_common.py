"""What every exercise check shares: scripted turns, a guarded run, and the diagnosis of a call with no result.

A check must never be fooled by a case that produced nothing. When a scenario's call has no ``ToolFinished``
event -- the run paused for a person, waited for a client, rejected the call, crashed or timed out -- the
check says so as a FIX line, and :func:`no_result` says *why*, from the run's own events.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .._engine.guards import Budget, UnpricedModelWarning
from .._loop import Loop
from .._messages import Message
from .._run import Run
from .._states import LoopState
from ..events import ApprovalRequested, BaseEvent, CallRejected, ToolFinished
from ..exceptions import CheckTimeout
from ..providers._scripted import ScriptStep
from ..tools import Tool
from ._report import Report, describe_exception

Hints = tuple[str, str]

WORDS = ("kettle", "tea", "Paris", "été", "naïve", "über", "日本", "data", "loop", "agent", "run", "x", "I",
         "café", "refund", "order", "blue", "espresso", "towel", "shipped", "a", "zebra", "Oslo", "quick")


SCENARIO_BUDGET = Budget(max_turns=80, max_repeats=1000, max_no_progress=None)
"""The budget of a check's own scenarios: room for every case, and no guard that would end them early."""


def rng_for(seed: int | None) -> tuple[random.Random, int]:
    """A random generator and its seed: a fresh seed every check unless one is given."""
    if seed is None:
        seed = random.SystemRandom().randrange(1, 10**6)
    return random.Random(seed), seed


def sentence(rng: random.Random, n: int, seps: Sequence[str] = (" ",)) -> str:
    """``n`` random words joined by separators drawn from ``seps``."""
    words = [rng.choice(WORDS) for _ in range(n)]
    out = words[0] if words else ""
    for w in words[1:]:
        out += rng.choice(seps) + w
    return out


def calls(name: str, *arguments: dict[str, Any], text: str = "") -> dict[str, Any]:
    """A scripted turn that calls ``name`` once per arguments dict (several: parallel calls)."""
    turn: dict[str, Any] = {"tool_calls": [{"name": name, "arguments": a} for a in arguments]}
    if text:
        turn["text"] = text
    return turn


def last_result(messages: Sequence[Message]) -> Any:
    for m in reversed(messages):
        if m.role == "tool":
            return m.tool_results[0]
    return None


def reply(messages: Sequence[Message]) -> dict[str, Any]:
    """A model turn that answers from the last tool result (whatever it was)."""
    r = last_result(messages)
    return {"text": f"Tool said ({r.status}): {r.content}" if r is not None else "Done."}


def finished(run: Run, name: str | None = None) -> list[ToolFinished]:
    return [e for e in run.events if isinstance(e, ToolFinished) and (name is None or e.name == name)]


def short(value: Any, n: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= n else text[: n - 1] + "…"


def shown(value: Any, n: int = 40) -> str:
    """A value as the student wrote it, with its type: ``'5' (a str)``, ``5.0 (a float)``."""
    text = repr(value)
    text = text if len(text) <= n else text[: n - 1] + "…"
    kind = type(value).__name__
    return f"{text} ({'an' if kind[0] in 'aeiou' else 'a'} {kind})"


def is_placeholder(obj: Any) -> bool:
    return obj is None or obj is Ellipsis


def policy_crash(run: Run) -> str | None:
    """The error of a policy that raised (the engine then fails closed: the call waits for a person)."""
    for e in run.events:
        if isinstance(e, ApprovalRequested) and e.note and "policy raised" in e.note:
            return e.note.split("raised ", 1)[1]
    return None


def safe_run(report: Report, what: str, loop: Loop, prompt: str, *, operation_id: str | None = None) -> Run | None:
    """Run a scenario to its end or its first pause; a crash in the student's code becomes a FIX line.

    The run's warnings about an unpriced model stay out of the notebook: a budget whose cost limit cannot count
    is the check's to explain, in its report (the warning would name the check's own model and provider tag).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnpricedModelWarning)
            return loop.start(prompt, operation_id=operation_id).run()
    except CheckTimeout as exc:
        report.fix(what, f"your code {exc}", TIMEOUT_HINTS, kind="timeout")
    except Exception as exc:
        report.fix(what, f"the run stopped with {describe_exception(exc)}",
                   ("this came from your code; read the message above",
                    "run your function on its own with the same input to see where it fails"), kind="crash")
    return None


TIMEOUT_HINTS: Hints = (
    "your code did not finish: look for a loop that never ends, or a wait",
    "every call the check makes has 2 seconds; a `while` loop whose condition never changes runs forever",
)


def declaration(tool: Tool) -> str:
    """How a tool was declared, as the student wrote it: ``approval=True, risk='write'``."""
    parts = []
    if tool.client:
        parts.append("client=True")
    if tool.approval is True:
        parts.append("approval=True")
    elif callable(tool.approval):
        parts.append("approval=<a policy>")
    if tool.risk != "read":
        parts.append(f"risk={tool.risk!r}")
    return ", ".join(parts) or "@anb.tool"


def no_result(run: Run, tools: Sequence[Tool]) -> tuple[str, Hints, str]:
    """Why a scenario's call produced no result: ``(what happened, hints, kind)``, read from the run's events."""
    by_name = {t.name: t for t in tools}
    if run.state is LoopState.WAITING_APPROVAL:
        req = [e for e in run.events if isinstance(e, ApprovalRequested)][-1]
        tool = by_name.get(req.name)
        if req.kind == "client_result":
            return (f"the run paused: {req.name} is declared client=True, so agentnb never runs it and waits for "
                    "your notebook to send each result",
                    ("a client-side tool is run by the program that uses agentnb, not by agentnb: does this one need "
                     "that?", "client=True is for tools only the client can run (a browser, a phone); agentnb can "
                     "run this function itself"), "client")
        crash = policy_crash(run)
        if crash is not None:
            return (f"your policy crashed ({crash}), so the call waited for a person",
                    ("your policy is asked about every call, of every tool: not every call has every argument",
                     "look at which tool is called (call.name) before you read its arguments, or read them with "
                     "call.arguments.get(...)"), "crash")
        if req.kind == "outcome_unknown":
            return (f"{req.name} did not finish ({req.note}), so its outcome is unknown and a person must decide",
                    TIMEOUT_HINTS, "timeout")
        own = tool is not None and (tool.approval is True or (tool.approval is None and tool.risk != "read"))
        if tool is not None and not own:  # the tool does not ask: the loop's policy did
            return (f"your policy asked for a person before {req.name} ran ({short(req.arguments, 60)})",
                    (f"a call of {req.name} should go through: which calls does your policy stop?",
                     "the policy is asked about every call of every tool; it should say yes only for the calls "
                     "the exercise names"), "policy-pauses")
        decl = declaration(tool) if tool is not None else "?"
        return (f"the run paused for a person before {req.name} ran: it is declared {decl}",
                ("a call waits for approval when its tool asks for it: look at the options of @anb.tool(...)",
                 "risk='write', risk='dangerous' and approval=True make every call wait for a person; a tool that "
                 "only reads or computes is declared without them"), "paused")
    rejected = [e for e in run.events if isinstance(e, CallRejected)]
    if rejected:
        e = rejected[-1]
        return (f"the model's call of {e.name} was rejected ({e.reason}): {short(e.message, 120)}",
                ("the model can only send what your tool's schema describes: look at its parameters",
                 "the schema comes from the signature: each parameter without a default is one argument the model "
                 "must send"), "arity")
    return (f"the run ended {run.state.value} before the call ran ({short(run.reason, 100)})",
            ("read the run's events to see where it stopped", "anb.Debugger(run) shows every step"), "no-result")


def event_label(e: BaseEvent) -> str:
    name = getattr(e, "name", None)
    return f"event {e.seq} ({e.type}{', ' + str(name) if name else ''})"


ScriptFn = Callable[[Sequence[Message]], dict[str, Any]]
Script = list[ScriptStep]
