"""The course's exercises: each runs what a student wrote against fresh random scenarios and fills a Report.

Theory of operation. A check must not be foolable by an answer that fits a fixed table, so every check draws
its inputs at random (a fresh seed each time; ``check(..., seed=n)`` draws the same ones again) and tests
*properties* that every right answer has and wrong answers lack:

- inputs at every boundary (just below, at and just above each threshold) and far beyond it;
- a case that produced no result (a pause for a person, a client-side wait, a rejected call, a crash, a
  timeout) is a FIX line with its diagnosis, never a silent skip;
- a student's code runs on a leash (:mod:`._guard`): an endless loop costs one time limit and a FIX line;
- FIX lines carry a *kind* and graduated hints (:mod:`._report`), from a nudge to a more explicit one, never
  the answer.

The scenarios are offline :class:`~agentnb.ScriptedModel` runs, so checks are fast (a few milliseconds per
scenario). The capstone (notebook 07) is in :mod:`.capstone`.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from typing import Any

from ..events import BaseEvent, GuardTripped
from ..guards import Budget
from ..messages import Message
from ..providers.scripted import ScriptedModel, ScriptStep
from ..run import Loop, Run
from ..states import LoopState
from ..stories import create_refund, get_order
from ..tools import Tool, tool
from ._common import (
    TIMEOUT_HINTS,
    WORDS,
    Hints,
    calls,
    declaration,
    event_label,
    finished,
    is_placeholder,
    no_result,
    policy_crash,
    reply,
    safe_run,
    short,
    shown,
)
from ._guard import CheckTimeout, Leash
from ._report import Report, describe_exception

__all__ = ["SCENARIO_BUDGET", "budget_runs", "check_budget", "check_policy", "check_stop_at", "check_tool", "money",
           "need_tool", "takes"]

SCENARIO_BUDGET = Budget(max_turns=80, max_repeats=1000, max_no_progress=None)
"""The budget of a check's own scenarios: room for every case, and no guard that would end them early."""


def need_tool(report: Report, obj: Any, expected: str) -> Tool | None:
    """The student's tool, or None after a FIX line saying what it is instead."""
    if is_placeholder(obj):
        report.fix(f"a tool {expected!r}", "not written yet (it is still None or ...)",
                   f"write `@anb.tool` then `def {expected}(...)` in the exercise cell and run it", kind="missing")
        return None
    if not isinstance(obj, Tool):
        if callable(obj):
            report.fix(f"a tool {expected!r}", f"{getattr(obj, '__name__', obj)!r} is a plain function",
                       "put `@anb.tool` on the line above `def` so agentnb builds its schema", kind="not-a-tool")
        else:
            report.fix(f"a tool {expected!r}", f"got {shown(obj)}", "pass the function you decorated with @anb.tool",
                       kind="not-a-tool")
        return None
    return obj


def _signature(t: Tool) -> str:
    props = t.parameters.get("properties", {})
    return "(" + ", ".join(f"{k}: {v.get('type', '?')}" for k, v in props.items()) + ")"


# -- 01: write a tool ---------------------------------------------------------------------------------------


def _blank(rng: random.Random, lo: int = 1, hi: int = 6) -> str:
    return "".join(rng.choice(" \t\n") for _ in range(rng.randint(lo, hi)))


def sentence(rng: random.Random, n: int, seps: Sequence[str] = (" ",)) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    out = words[0] if words else ""
    for w in words[1:]:
        out += rng.choice(seps) + w
    return out


def _texts(rng: random.Random) -> list[tuple[str, list[str]]]:
    """Groups of random texts, each group a property of word counting (boundaries: 0 and 1 word, far beyond)."""
    runs = ("  ", "\t", "\n", " \t ", "   \n", "\n\n", " " * rng.randint(3, 9))
    return [
        ("words separated by single spaces", [sentence(rng, rng.randint(2, 12)) for _ in range(3)]),
        ("0 and 1 words (empty, blank, one word)",
         ["", _blank(rng), rng.choice(WORDS), _blank(rng) + rng.choice(WORDS) + _blank(rng)]),
        ("any run of whitespace separates words (spaces, tabs, newlines)",
         [sentence(rng, rng.randint(2, 9), runs) for _ in range(3)]),
        ("whitespace before and after adds no word",
         [_blank(rng) + sentence(rng, rng.randint(2, 7)) + _blank(rng) for _ in range(2)]),
        ("a long text (1000 to 3000 words)", [sentence(rng, rng.randint(1000, 3000), (" ", " ", "\n", "  "))]),
    ]


def _as_count(value: Any) -> int | None:
    """What a student's result counts, forgiving the type (the type has its own check)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _count_hints(text: str, got: int | None, expected: int) -> tuple[Hints, str]:
    if got is not None and got == len(text.split(" ")):
        return (("look at a text with two spaces in a row, or with nothing in it: what does your split give?",
                 "splitting on exactly one space character leaves empty pieces between consecutive spaces and at "
                 "the ends, and keeps tabs and newlines inside words: split on any run of whitespace instead"),
                "split-one-space")
    if got is not None and got == len(text):
        return (("your tool counts something smaller than words", "len() of a string counts its characters; "
                 "count the pieces the text splits into instead"), "characters")
    if got is not None and abs(got - expected) == 1:
        return (("almost: your count is off by one", "count the words of an empty text and of a one-word text by "
                 "hand, then compare with your tool"), "off-by-one")
    return (("count the words of the text you are given; try your tool on that very text",
             "words are separated by any run of whitespace (spaces, tabs, newlines); a table of answers, a counter "
             "or a guess cannot know a new text"), "wrong-count")


def _judge_count(call: str, text: str, ev: Any) -> tuple[str, str, Hints, str] | None:
    """What is wrong with one counted text, or None."""
    if ev.status != "ok":
        if ev.error_type == "CheckTimeout":
            return call, f"it did not finish ({ev.error_message})", TIMEOUT_HINTS, "timeout"
        return (call, f"your tool failed: {ev.error_type}: {ev.error_message}",
                ("the model gets this error as the result; make the tool work for this input",
                 "try your function on this very text (word_count.fn(text)) and read the error"), "crash")
    expected = len(text.split())
    got = _as_count(ev.value)
    if got == expected:
        return None
    hints, kind = _count_hints(text, got, expected)
    return call, f"returned {shown(ev.value)}, expected {expected}", hints, kind


def check_tool(report: Report, word_count: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 01: ``word_count(text: str) -> int``, a tool with a docstring the model can read."""
    t = need_tool(report, word_count, "word_count")
    if t is None:
        return
    report.ok("it is a tool", f"{t.name}{_signature(t)}")
    if t.description.strip() and t.description.strip() != t.name:  # without a docstring it is the name
        report.ok("it has a description", short(t.description, 60))
    else:
        report.fix("it has a description", "the model sees no description",
                   ("the model reads the description to decide when to call your tool: where does it come from?",
                    "the first lines of the function's docstring become the description"), kind="description")
    props = t.parameters.get("properties", {})
    required = list(t.parameters.get("required", []))
    strings = [k for k, v in props.items() if v.get("type") == "string"]
    if not strings:
        report.fix("a text parameter", f"the parameters are {_signature(t)}; none is a string",
                   ("the model sends a text: what type is the parameter that receives it?",
                    "the type hint of the parameter makes the schema: `text: str` is a string"), kind="type")
        return
    param = strings[0]
    if props[param].get("description"):
        report.ok("the argument is described", f"{param}: {short(props[param]['description'], 50)}")
    else:
        report.fix("the argument is described", f"{param!r} has no description",
                   ("the model also reads a description of each argument: where do those come from?",
                    f"add an `Args:` section to the docstring with a line `{param}: what it is`"), kind="args-doc")
    extra = [k for k in required if k != param]
    if extra:
        report.fix("one argument", f"{t.name}{_signature(t)} needs {len(required)} arguments; the model sends one, "
                   "the text", ("look at the signature: how many arguments must a caller give?",
                                f"every parameter without a default is required; {', '.join(extra)} has none"),
                   kind="arity")
    if t.risk != "read" or t.approval not in (None, False) or t.client:
        report.fix("declared as a read", f"it is declared {declaration(t)}",
                   ("counting words changes nothing in the world: does it need a person, or a client?",
                    "risk='write' and approval=True make every call wait for approval; client=True means agentnb "
                    "never runs it. A tool that only computes is declared with bare @anb.tool"), kind="declared")
    _tool_behaviour(report, t, param, rng, leash)


def _tool_behaviour(report: Report, t: Tool, param: str, rng: random.Random, leash: Leash) -> None:
    """Random texts in groups (one property each), through a real loop; every call must get a result."""
    groups = _texts(rng)
    cases = [(g, text) for g, texts in groups for text in texts]
    script: list[ScriptStep] = [calls(t.name, {param: text}) for _, text in cases] + [reply]
    run = safe_run(report, "the model calls it", Loop(model=ScriptedModel(script), tools=[leash.tool(t)],
                                                       budget=SCENARIO_BUDGET), "Count words")
    if run is None:
        return
    results = finished(run)
    if len(results) < len(cases):
        detail, hints, kind = no_result(run, [t])
        report.fix("every call gets a result", f"{len(cases) - len(results)} of {len(cases)} calls got no result: "
                   f"{detail}", hints, kind=kind)
    values: list[tuple[str, Any]] = []
    for group, _ in groups:
        mine = [(text, ev) for (g, text), ev in zip(cases, results, strict=False) if g == group]
        n = len(mine)
        bad = None
        for text, ev in mine:
            call = f"{t.name}({short(repr(text), 50)})"
            if ev.status == "ok":
                values.append((call, ev.value))
            bad = bad or _judge_count(call, text, ev)
        if n == 0:
            continue
        if bad is None:
            report.ok(group, f"{n} random text{'s' if n > 1 else ''}, all counted right")
        else:
            report.fix(f"{group}: {bad[0]}", bad[1], bad[2], kind=bad[3])
    wrong_type = [(call, v) for call, v in values if type(v) is not int]
    if values and not wrong_type:
        report.ok("it returns an int", f"{len(values)} results")
    elif wrong_type:
        call, v = wrong_type[0]
        report.fix("it returns an int", f"{call} returned {shown(v)}",
                   ("`-> int` promises a number: what type is the value you return?",
                    "a count is a whole number; return it as an int, not as text, a float or True/False"), kind="type")
    if run.state is LoopState.COMPLETED and len(results) == len(cases):
        report.ok("the run completes", "the model read every result")


# -- 02: a breakpoint predicate -------------------------------------------------------------------------------


def _refund_scenario(rng: random.Random, *, refund: bool = True, reject_first: bool = False) -> tuple[Loop, str]:
    """A run shaped like the refund story, with a random number of lookups, texts and stream chunks."""
    script: list[ScriptStep] = []
    parts = []
    for _ in range(rng.randint(0 if refund else 1, 3)):
        ids = [{"order_id": "42"} for _ in range(rng.choice((1, 1, 2)))]
        script.append(calls("get_order", *ids, text=rng.choice(("", "Let me look.", "Checking the order first."))))
    parts.append(f"{len(script)} lookup turn{'s' if len(script) != 1 else ''}")
    if reject_first:
        script.append(calls("create_refund", {"order_id": "42", "amount_cents": "all of it"}))
        parts.append("a refund call with bad arguments")
    if refund:
        script.append(calls("create_refund", {"order_id": "42", "amount_cents": rng.randint(100, 1999)},
                            text=sentence(rng, rng.randint(0, 12))))
    script.append(reply)
    stream = rng.random() < 0.7
    chunk = rng.randint(2, 12)
    parts.append(f"streamed in chunks of {chunk}" if stream else "not streamed")
    model = ScriptedModel(script, stream=stream, chunk_size=chunk)
    return Loop(model=model, tools=[get_order, create_refund], budget=SCENARIO_BUDGET), ", ".join(parts)


def _is_target(e: BaseEvent) -> bool:
    return e.type == "CallValidated" and getattr(e, "name", None) == "create_refund"


def _stop_scenarios(rng: random.Random) -> list[tuple[str, Loop, str]]:
    story = Loop(model=ScriptedModel.story("refund", stream=True, chunk_size=6), tools=[get_order, create_refund])
    out = [("the refund story", story, "the notebook's run")]
    seqs = {28}
    while len(out) < 5:  # runs whose validation comes at other event numbers than the story's (and each other's)
        loop, how = _refund_scenario(rng)
        target = loop.start("Please refund order 42").run_until(_is_target)
        if target is not None and target.seq not in seqs:
            seqs.add(target.seq)
            out.append(("another refund run", loop, how))
    out.append(("a refund after one with bad arguments", *_refund_scenario(rng, reject_first=True)))
    for _ in range(2):
        out.append(("a run with no refund", *_refund_scenario(rng, refund=False)))
    return out


def check_stop_at(report: Report, predicate: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 02: ``stop_at(event) -> bool``, true at the event where the refund call is validated."""
    if is_placeholder(predicate) or not callable(predicate):
        got = "not written yet" if is_placeholder(predicate) else f"got {shown(predicate)}"
        report.fix("a predicate", got, "write `def stop_at(event): return ...` returning True or False", kind="missing")
        return
    try:
        inspect.signature(predicate).bind(None)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TypeError):
            report.fix("a predicate", f"it cannot be called with one event ({exc})",
                       ("run_until calls your predicate with one argument: the event",
                        "a predicate is `def stop_at(event): ...`, one parameter, returning True or False"),
                       kind="arity")
            return
    seen: list[tuple[tuple[Any, ...], Any]] = []
    pred = leash.wrap(predicate, seen)
    results: list[tuple[str, str, BaseEvent | None, BaseEvent | None]] = []
    for what, loop, how in _stop_scenarios(rng):
        run = loop.start("Please refund order 42")
        try:
            stopped = run.run_until(pred)
        except CheckTimeout as exc:
            report.fix("it works on every event", f"on {event_label(run.events[-1])} it {exc}", TIMEOUT_HINTS,
                       kind="timeout")
            return
        except Exception as exc:
            report.fix("it works on every event", f"it raised {describe_exception(exc)} on "
                       f"{event_label(run.events[-1])}",
                       ("your predicate is called with every event, of every type: not every event has every field",
                        "check event.type first, or read a field that may be missing with getattr(event, 'name', "
                        "None)"), kind="crash")
            return
        results.append((what, how, stopped, loop.start("Please refund order 42").run_until(_is_target)))
    report.ok("it works on every event", f"every event of {len(results)} runs, no errors")
    non_bool = [out for _, out in seen if not isinstance(out, bool)]
    story = results[0]
    _judge_stop(report, "it stops at the refund's validation", [story], non_bool)
    _judge_stop(report, "in runs of other lengths (streamed or not)", results[1:5], non_bool, story=story)
    _judge_stop(report, "a refund after one that was rejected", results[5:6], non_bool)
    quiet = [r for r in results[6:] if r[2] is not None]
    if not quiet:
        report.ok("it never stops a run with no refund", f"{len(results) - 6} runs")
    else:
        _, how, stopped, _ = quiet[0]
        assert stopped is not None
        report.fix("it never stops a run with no refund", f"in a run with no refund ({how}) it stopped at "
                   f"{event_label(stopped)}", _early_hints(stopped, non_bool)[0], kind="no-refund")


def _early_hints(stopped: BaseEvent, non_bool: list[Any]) -> tuple[Hints, str]:
    if non_bool:
        return ((f"your predicate returned {shown(non_bool[0])}, which counts as true or false by itself: return "
                 "a comparison", "run_until stops at the first event for which the predicate's value is true; "
                 "a non-empty string or a number other than 0 is true"), "type")
    if stopped.type == "CallValidated":
        return (("you found the right kind of event; is it about the right tool?",
                 "every call is validated, the lookups too: the event's name says which tool"), "too-early")
    if getattr(stopped, "name", None) == "create_refund":
        return (("this event is about the refund, but it comes before its arguments were checked",
                 "look at the event types of a refund call in order: which one says the arguments fit the schema?"),
                "too-early")
    return (("it stopped before the refund call was even made: which two things describe the event you want?",
             "the event you want has a type and a tool name; match both"), "too-early")


_Stop = tuple[str, str, BaseEvent | None, BaseEvent | None]
"""One stop_at scenario: what it is, how it was drawn, where the predicate stopped, where it should have."""


def _judge_stop(report: Report, what: str, runs: list[_Stop], non_bool: list[Any], *,
                story: _Stop | None = None) -> None:
    for _, how, stopped, target in runs:
        assert target is not None
        if stopped is not None and stopped.seq == target.seq and _is_target(stopped):
            continue
        where = f" ({how})" if story is not None else ""
        story_ok = story is not None and story[2] is not None and story[3] is not None \
            and story[2].seq == story[3].seq and _is_target(story[2])
        if story_ok:  # right in the notebook's run, wrong in another: it describes *where*, not *what*
            happened = "it never stopped" if stopped is None else f"it stopped at {event_label(stopped)}"
            report.fix(what, f"it stops right in the notebook's run, but in another run{where} {happened}; the "
                       f"validation was event {target.seq}",
                       ("event numbers change from run to run: describe the event by what it is, not where it comes",
                        "a predicate reads the event's type and its tool's name; a number or a counter only fits "
                        "one run"), kind="seq")
        elif stopped is None:
            report.fix(what, f"it never stopped{where}: your predicate was false for every event up to the pause",
                       ("which event comes when the refund's arguments have been checked, before anything is refunded?",
                        "the run pauses for approval right after that event, so an event after it never comes "
                        "before a person approves"), kind="never")
        elif stopped.seq > target.seq:
            report.fix(what, f"it stopped late{where}, at {event_label(stopped)}; the validation was event "
                       f"{target.seq}", ("you are one step too far: what happens just before this event?",
                                         "the refund is validated, then it waits for approval"), kind="late")
        else:
            hints, kind = _early_hints(stopped, non_bool)
            report.fix(what, f"it stopped too early{where}, at {event_label(stopped)}; the validation was event "
                       f"{target.seq}", hints, kind=kind)
        return
    n = len(runs)
    report.ok(what, "stopped at the validation" + (f" in {n} runs" if n > 1 else "") + ", before any refund")


# -- 03: an approval policy -------------------------------------------------------------------------------------


def money(cents: int) -> str:
    """Cents as dollars: ``money(5000) == '$50.00'``."""
    return f"${cents / 100:,.2f}"


def check_policy(report: Report, policy: Any = None, *, limit_cents: int = 5000, rng: random.Random,
                 leash: Leash) -> None:
    """Notebook 03: ``needs_approval(call, state) -> bool``: refunds of ``limit_cents`` or more need a person."""
    if is_placeholder(policy) or not callable(policy):
        got = "not written yet" if is_placeholder(policy) else f"got {shown(policy)}"
        report.fix("a policy", got, "write `def needs_approval(call, state): return ...` returning True or False",
                   kind="missing")
        return
    if not takes(policy, 2, report, "a policy", "def needs_approval(call, state)", "the call and the run's state"):
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
    return f"page {n}: " + "; ".join(f"result {n}.{i}: a paragraph about the topic" for i in range(10))


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
    """A model that needs ``sum(shape)`` calls (``shape[i]`` in turn ``i``), then answers by itself."""
    out: list[ScriptStep] = []
    page = 0
    for k in shape:
        out.append({**calls("fetch_page", *[{"n": page + i + 1} for i in range(k)]), "usage": _usage(rng, scale)})
        page += k
    out.append({"text": answer, "usage": _usage(rng, scale)})
    return out


def check_budget(report: Report, budget: Any = None, *, calls_allowed: int = 4, rng: random.Random,
                 leash: Leash) -> None:
    """Notebook 04: a Budget that lets the model make ``calls_allowed`` tool calls, then asks for an answer."""
    del leash  # a Budget is data: nothing of the student's runs
    if is_placeholder(budget):
        report.fix("a budget", "not written yet", "write `budget = anb.Budget(...)`", kind="missing")
        return
    if not isinstance(budget, Budget):
        report.fix("a budget", f"got {shown(budget)}",
                   ("a budget is an object agentnb reads: which class makes one?",
                    "make it with anb.Budget(...), with the limits as keyword arguments"), kind="type")
        return
    report.ok("it is a Budget")
    budget_runs(report, budget, calls_allowed, rng, "")


def budget_runs(report: Report, budget: Budget, n: int, rng: random.Random, who: str,
                 tools: Sequence[Tool] | None = None, endless: Callable[[int, int], ScriptStep] | None = None,
                 finishing: Callable[[list[int], str, int], list[ScriptStep]] | None = None,
                 exact: bool = True, loop_options: dict[str, Any] | None = None) -> None:
    """The budget's properties: endless models stop after ``n`` calls with an answer; a task within it finishes."""
    tools = list(tools or [_fetch_page])
    endless = endless or (lambda per, scale: _fetcher(rng, per, scale))
    finishing = finishing or (lambda shape, answer, scale: _finisher(rng, shape, answer, scale))
    scales = [rng.randint(20, 200), rng.randint(5_000, 40_000)]  # tokens per turn: a short and a long context
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
        if run.state is LoopState.COMPLETED and ok_count and trip is not None:
            report.ok(what, f"stopped after {_calls_text(got)}, with an answer")
        else:
            _budget_fix(report, what, run, got, n, trip, per)
    k = n - 1 if exact else max(2, n // 2)
    shape = [1] * k if rng.random() < 0.5 else ([2] + [1] * (k - 2) if k >= 2 else [1])
    answer = f"Done: {sentence(rng, rng.randint(3, 8))}."
    what = f"{who}a task that needs {k} calls"
    model = ScriptedModel(finishing(shape, answer, rng.choice(scales)))
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
