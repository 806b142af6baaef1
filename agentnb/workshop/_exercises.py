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
scenario). This module holds the checks of notebooks 01 (a tool) and 02 (a breakpoint predicate); those of 03
(a policy) and 04 (a budget) are in :mod:`.policy_budget` and re-exported here, the wire exercise of 05 is in
:mod:`.wire_exercise` and the capstone (07) in :mod:`.capstone`.
"""

from __future__ import annotations

import inspect
import random
import re
from typing import Any

from .._loop import Loop
from .._states import LoopState
from ..events import BaseEvent
from ..exceptions import CheckTimeout
from ..providers._scripted import ScriptedModel, ScriptStep
from ..stories import create_refund, get_order
from ..tools import Tool, tool
from ._common import (
    SCENARIO_BUDGET,
    TIMEOUT_HINTS,
    WORDS,
    Hints,
    calls,
    declaration,
    event_label,
    finished,
    is_placeholder,
    no_result,
    reply,
    safe_run,
    sentence,
    short,
    shown,
)
from ._guard import Leash
from ._policy_budget import budget_runs, check_budget, check_policy, money, takes
from ._report import Report, describe_exception

__all__ = ["SCENARIO_BUDGET", "budget_runs", "check_budget", "check_policy", "check_stop_at", "check_tool", "money",
           "need_tool", "placeholder", "sentence", "takes"]


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

_PLACEHOLDER_WORDS = frozenset(("todo", "fixme", "tbd", "xxx", "placeholder", "describe", "description",
                                "docstring", "lorem", "ipsum"))
_BARE_TYPES = frozenset(("str", "string", "int", "integer", "a string", "the string", "an int", "a str"))


def placeholder(text: str, *names: str) -> bool:
    """Whether a description says nothing: empty, ``TODO``/``...``/``FIXME``, or only a name or a type.

    Example:
        >>> placeholder("TODO: write this"), placeholder("..."), placeholder("text", "text")
        (True, True, True)
        >>> placeholder("The text to count the words of.", "text")
        False
    """
    words = re.findall(r"[^\W_]+", text.lower())
    if not words or _PLACEHOLDER_WORDS & set(words):
        return True
    said = " ".join(words)
    return said in _BARE_TYPES or said in {" ".join(re.findall(r"[^\W_]+", n.lower())) for n in names}


def _described(report: Report, what: str, text: str, names: tuple[str, ...], hints: Hints, kind: str) -> bool:
    """An ok line when ``text`` describes something, else a FIX line saying it is empty or a placeholder."""
    if not placeholder(text, *names):
        report.ok(what, short(text, 60))
        return True
    detail = "the model sees no description" if not text.strip() or text.strip() in names else \
        f"the description is a placeholder ({short(text, 40)!r}): the model learns nothing from it"
    report.fix(what, detail, hints, kind=kind)
    return False


def _blank(rng: random.Random, lo: int = 1, hi: int = 6) -> str:
    return "".join(rng.choice(" \t\n") for _ in range(rng.randint(lo, hi)))


_JOINED = ("don't", "e-mail", "well-known", "3.5", "U.S.", "x=1", "l'été", "co-op", "it's", "$9.99", "A/B",
           "2026-12-01")
"""One word each, which a split on every non-letter cuts in two or more."""
_WRAPPED = ("(yes)", "ok!", "50%", "#42", "«oui»", "naïve,", "end.", "wait...", "'quoted'", "—", "...")


def _punctuated(rng: random.Random) -> str:
    """Words with punctuation inside or around them, each one word (``don't``, ``e-mail``, ``3.5``)."""
    words = [rng.choice(_JOINED)] + [rng.choice(_JOINED + _WRAPPED) for _ in range(rng.randint(2, 4))] + \
        [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
    rng.shuffle(words)
    return " ".join(words)


def _texts(rng: random.Random) -> list[tuple[str, list[str]]]:
    """Groups of random texts, each group a property of word counting (boundaries: 0 and 1 word, far beyond)."""
    runs = ("  ", "\t", "\n", " \t ", "   \n", "\n\n", " " * rng.randint(3, 9))
    return [
        ("punctuation is part of a word (don't, e-mail and 3.5 are one word each)",
         [_punctuated(rng) for _ in range(2)]),
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
    if got is not None and got == len(re.findall(r"\w+", text)) != expected:
        return (("look at a word with an apostrophe, a hyphen or a dot in it: how many words does your tool see?",
                 "\\w+ (and a split on every non-letter) cuts don't, e-mail and 3.5 in two: a word is everything "
                 "between two runs of whitespace"), "punctuation")
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
    _described(report, "it has a description", t.description, (t.name,),  # without a docstring it is the name
               ("the model reads the description to decide when to call your tool: where does it come from?",
                "the first lines of the function's docstring become the description: say what the tool does"),
               "description")
    props = t.parameters.get("properties", {})
    required = list(t.parameters.get("required", []))
    strings = [k for k, v in props.items() if v.get("type") == "string"]
    if not strings:
        report.fix("a text parameter", f"the parameters are {_signature(t)}; none is a string",
                   ("the model sends a text: what type is the parameter that receives it?",
                    "the type hint of the parameter makes the schema: `text: str` is a string"), kind="type")
        return
    param = strings[0]
    said = str(props[param].get("description") or "")
    if not said.strip():
        report.fix("the argument is described", f"{param!r} has no description",
                   ("the model also reads a description of each argument: where do those come from?",
                    f"add an `Args:` section to the docstring with a line `{param}: what it is`"), kind="args-doc")
    else:
        _described(report, "the argument is described", said, (param,),
                   ("the model reads the argument's description to know what to send: what does yours say?",
                    f"the `Args:` line `{param}: ...` should say what the text is, not TODO or its name"),
                   "args-doc")
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


@tool(name="cancel_order", approval=True, risk="write")
def _cancel(order_id: str) -> dict[str, Any]:
    """Cancel an order. A person must approve it.

    Args:
        order_id: The order to cancel.
    """
    return {"order_id": order_id, "cancelled": True}


def _refund_scenario(rng: random.Random, *, refund: bool = True, reject_first: bool = False, cancel: bool = False,
                     waived: bool = False) -> tuple[Loop, str]:
    """A run shaped like the refund story, with a random number of lookups, texts and stream chunks.

    ``cancel``: the run cancels an order (a write that waits for a person too) instead of refunding; ``waived``:
    the loop lets the refund through without a person (its validation then says no approval is needed).
    """
    script: list[ScriptStep] = []
    parts = []
    for _ in range(rng.randint(0 if refund else 1, 3)):
        ids = [{"order_id": "42"} for _ in range(rng.choice((1, 1, 2)))]
        script.append(calls("get_order", *ids, text=rng.choice(("", "Let me look.", "Checking the order first."))))
    parts.append(f"{len(script)} lookup turn{'s' if len(script) != 1 else ''}")
    if reject_first:
        script.append(calls("create_refund", {"order_id": "42", "amount_cents": "all of it"}))
        parts.append("a refund call with bad arguments")
    if cancel:
        script.append(calls("cancel_order", {"order_id": "42"}, text="I will cancel it instead."))
        parts.append("a cancellation, which waits for a person too")
    if refund:
        script.append(calls("create_refund", {"order_id": "42", "amount_cents": rng.randint(100, 1999)},
                            text=sentence(rng, rng.randint(0, 12))))
    if waived:
        parts.append("a loop that lets the refund through without a person")
    script.append(reply)
    stream = rng.random() < 0.7
    chunk = rng.randint(2, 12)
    parts.append(f"streamed in chunks of {chunk}" if stream else "not streamed")
    model = ScriptedModel(script, stream=stream, chunk_size=chunk)
    options: dict[str, Any] = {"approval": False, "override_tool_approval": True} if waived else {}
    return Loop(model=model, tools=[get_order, create_refund, _cancel], budget=SCENARIO_BUDGET, **options), \
        ", ".join(parts)


def _is_target(e: BaseEvent) -> bool:
    return e.type == "CallValidated" and getattr(e, "name", None) == "create_refund"


def _stop_scenarios(rng: random.Random) -> list[tuple[str, Loop, str]]:
    """The story, four runs of other lengths, a rejected refund, a refund with no person; then runs with no refund."""
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
    out.append(("a refund that needs no person", *_refund_scenario(rng, waived=True)))
    for _ in range(2):
        out.append(("a run with no refund", *_refund_scenario(rng, refund=False)))
    out.append(("a run with no refund", *_refund_scenario(rng, refund=False, cancel=True)))
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
    pred = leash.wrap(predicate, seen, copies=True)  # a copy of each event: the run keeps its own
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
    if not any(out for _, out in seen):  # the starter's `return False`: no line can pass on nothing
        report.fix("it stops somewhere", f"your predicate was false for all {len(seen)} events of {len(results)} "
                   "runs, so no run ever stopped",
                   ("which event comes when the refund's arguments have been checked, before anything is refunded?",
                    "the event you want has a type and a tool name: return True when both match"), kind="never")
        return
    report.ok("it works on every event", f"every event of {len(results)} runs, no errors")
    non_bool = [out for _, out in seen if not isinstance(out, bool) and out is not None]
    story = results[0]
    _judge_stop(report, "it stops at the refund's validation", [story], non_bool)
    _judge_stop(report, "in runs of other lengths (streamed or not)", results[1:5], non_bool, story=story)
    _judge_stop(report, "a refund after one that was rejected", results[5:6], non_bool)
    _judge_stop(report, "a refund the loop lets through without a person", results[6:7], non_bool, never=_WAIVED)
    quiet = [r for r in results[7:] if r[2] is not None]
    if not quiet:
        report.ok("it never stops a run with no refund", f"{len(results) - 7} runs, one of them a cancellation")
    else:
        _, how, stopped, _ = quiet[0]
        assert stopped is not None
        report.fix("it never stops a run with no refund", f"in a run with no refund ({how}) it stopped at "
                   f"{event_label(stopped)}", _early_hints(stopped, non_bool)[0], kind="no-refund")
    if non_bool:
        report.fix("it returns True or False", f"your predicate returned {shown(non_bool[0])}",
                   ("a predicate answers a yes/no question: what type is your value?",
                    "run_until only asks whether the value is true, so 1 and 'yes' happen to work; a comparison "
                    "(==, and, or) gives True or False, which is what the next reader of your code expects"),
                   kind="type")
    else:
        report.ok("it returns True or False", "on every event")  # no count: a passing report reads the same


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


_WAIVED: Hints = ("here the loop lets the refund through without a person: does your predicate look at the tool, or at "
                  "whether a person must approve?", "the refund's validation is the same event whether or not a person "
                  "must approve: match its type and the tool's name, not needs_approval")


def _judge_stop(report: Report, what: str, runs: list[_Stop], non_bool: list[Any], *,
                story: _Stop | None = None, never: Hints | None = None) -> None:
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
        elif stopped is None and never is not None:
            report.fix(what, f"it never stopped{where}: your predicate was false for every event of the run", never,
                       kind="approval")
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
