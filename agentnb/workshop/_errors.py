"""Notebook 11's exercise: a tool whose mistakes come back as error results the model can act on.

Theory of operation. A model corrects a call only from what the result tells it. A tool that *returns*
``"Error: too many people"`` hands the model an ordinary (``ok``) result: on the wire it is a success, and the
run's frames count it as one. A tool that raises gives an ``error`` result (Anthropic's ``is_error``), and one
whose schema carries the rule (``pydantic.Field(ge=1, le=8)``) has the call rejected before it runs, with the
validation message. Either way the message must say what was wrong and what is allowed, or the model can only
guess again.

The check calls the student's ``find_table(party, day)`` through a real loop, one call per case, with values
drawn fresh every check: right ones (parties of 1 and 8 and in between, day names in any letter case) must get
an ``ok`` result that names the party and the day; wrong ones (0 and below, 9 and above, far beyond; days that
are not days: the empty text, pieces of a day's name, a day with more around it, words ending in *-day*) must
get an error result -- raised or rejected, never returned, never an ``AssertionError``, which ``python -O``
removes -- whose message names the allowed range (in figures or in words) or the allowed days.
"""

from __future__ import annotations

import random
import re
from typing import Any

from .._loop import Loop
from .._run import Run
from ..events import CallRejected, ToolFinished
from ..providers._scripted import ScriptedModel
from ..tools import Tool
from ._common import TIMEOUT_HINTS, Hints, calls, declaration, no_result, reply, safe_run, short
from ._guard import Leash
from ._report import Report

__all__ = ["DAYS", "MAX_PARTY", "check_errors"]

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MAX_PARTY = 8
_NOT_DAYS = ("Funday", "tomorrow", "2026-12-05", "weekend", "Mon-day", "Someday", "noon", "Fri day", "Caturday")
_ENDS_IN_DAY = ("today", "yesterday", "holiday", "birthday", "Funday", "Someday", "Caturday", "day")
"""Not days, though they end like one: a test by suffix lets them through."""
_PIECES = ("mon", "tue", "wed", "fri", "nesday", "urs", "sat", "s", "y")
"""Pieces of a day's name: a test by prefix or substring lets them through."""
_STARTS = ("mondays", "monday morning", "sunday!", "fridayy", "tuesday, please", "mondaytuesday")
"""A day with more after it: a test that the text *starts* with a day lets them through."""
_HOLDS = ("every friday", "next monday", "on sunday", "this saturday", "the wednesday after")
"""A day inside a longer text: a test that a day is *in* the text lets them through."""


def _not_days(rng: random.Random) -> list[str]:
    """Texts that are no day of the week: the empty text, a piece of one, one with more, a word ending in -day."""
    return ["", rng.choice(_PIECES), rng.choice(_STARTS), rng.choice(_HOLDS), rng.choice(_ENDS_IN_DAY),
            rng.choice(_NOT_DAYS)]


def _day(rng: random.Random) -> str:
    d = rng.choice(DAYS)
    return rng.choice((d, d.capitalize(), d.upper(), "".join(c.upper() if rng.random() < 0.5 else c for c in d)))


Outcome = tuple[str, str, str, str]
"""``(status, what the model sees, the message alone, the error's type)``: status ``ok``, ``error``, ``rejected``
or ``none``."""


def _outcome(run: Run) -> Outcome:
    for e in run.events:
        if isinstance(e, CallRejected):
            return "rejected", e.message, e.message, "schema"
        if isinstance(e, ToolFinished):
            return e.status, e.content, e.error_message or e.content, e.error_type or ""
    return "none", "", "", ""


def check_errors(report: Report, find_table: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 11: ``find_table(party: int, day: str)``: wrong arguments come back as error results that teach."""
    from ._exercises import need_tool  # the tool checks every tool exercise shares

    t = need_tool(report, find_table, "find_table")
    if t is None:
        return
    if not _shape(report, t):
        return
    cases: list[tuple[str, str, list[dict[str, Any]], bool]] = [
        ("good", "a right call gets an ok result naming the party and the day",
         [{"party": rng.randint(2, MAX_PARTY - 1), "day": _day(rng)} for _ in range(3)], True),
        ("edges", f"parties of 1 and of {MAX_PARTY} are fine",
         [{"party": 1, "day": _day(rng)}, {"party": MAX_PARTY, "day": _day(rng)}], True),
        ("case", "a day in any letter case is fine",
         [{"party": rng.randint(1, MAX_PARTY), "day": d} for d in (rng.choice(DAYS).upper(),
                                                                    rng.choice(DAYS).capitalize())], True),
        ("big", f"a party over {MAX_PARTY} gets an error that says the limit",
         [{"party": MAX_PARTY + 1, "day": _day(rng)}, {"party": rng.randint(10, 10**6), "day": _day(rng)}], False),
        ("small", "a party under 1 gets an error that says the limit",
         [{"party": 0, "day": _day(rng)}, {"party": -rng.randint(1, 50), "day": _day(rng)}], False),
        ("day", "a day that is not a day gets an error that names the days",
         [{"party": rng.randint(1, MAX_PARTY), "day": d} for d in _not_days(rng)], False),
    ]
    tool = leash.tool(t)
    for key, what, args_list, fine in cases:
        problem: tuple[str, Hints, str] | None = None
        for args in args_list:
            run = safe_run(report, what, Loop(model=ScriptedModel([calls(t.name, args), reply]), tools=[tool]),
                           "Find a table")
            if run is None:
                return
            problem = _judge(key, t, run, args, fine, leash)
            if problem is not None:
                break
        if problem is None:
            report.ok(what, f"{len(args_list)} random call{'s' if len(args_list) > 1 else ''}")
        else:
            report.fix(what, *problem[:2], kind=problem[2])
            if problem[2] == "timeout":
                return


def _shape(report: Report, t: Tool) -> bool:
    props = t.parameters.get("properties", {})
    required = list(t.parameters.get("required", []))
    sig = "(" + ", ".join(f"{k}: {v.get('type', '?')}" for k, v in props.items()) + ")"
    if props.get("party", {}).get("type") != "integer" or props.get("day", {}).get("type") not in ("string", None) \
            or "day" not in props:
        report.fix("its parameters", f"{t.name}{sig}; the model sends party (a whole number) and day (text)",
                   ("the schema comes from the signature: look at each parameter's name and type hint",
                    "write `def find_table(party: int, day: str)`"), kind="type")
        return False
    extra = [k for k in required if k not in ("party", "day")]
    if extra:
        report.fix("its parameters", f"{t.name}{sig} needs {', '.join(extra)} too; the model sends party and day",
                   ("look at the signature: how many arguments must a caller give?",
                    "every parameter without a default is required"), kind="arity")
        return False
    report.ok("it is a tool", f"{t.name}{sig}")
    if not t.description.strip() or t.description.strip() == t.name:
        report.fix("it has a description", "the model sees no description",
                   ("the model reads the description to know when and how to call the tool",
                    "the first lines of the docstring become the description; say what the limits are"),
                   kind="description")
    undocumented = [k for k in ("party", "day") if not props[k].get("description")]
    if undocumented:
        report.fix("its arguments are described", f"{' and '.join(undocumented)} "
                   f"{'has' if len(undocumented) == 1 else 'have'} no description",
                   ("the model also reads a description of each argument: where do those come from?",
                    "add an `Args:` section to the docstring, one line per argument, with what is allowed"),
                   kind="args-doc")
    if t.risk != "read" or t.approval not in (None, False) or t.client:
        report.fix("declared as a read", f"it is declared {declaration(t)}",
                   ("looking for a free table changes nothing: does it need a person, or a client?",
                    "a tool that only reads is declared with bare @anb.tool"), kind="declared")
    return True


def _judge(key: str, t: Tool, run: Run, args: dict[str, Any], fine: bool,
           leash: Leash) -> tuple[str, Hints, str] | None:
    call = f"{t.name}(party={args['party']!r}, day={args['day']!r})"
    status, content, message, error_type = _outcome(run)
    if status == "none":
        detail, hints, kind = no_result(run, [t])
        return f"{call} got no result: {detail}", hints, kind
    if status == "timeout" or leash.timed_out:
        return f"{call} did not finish", TIMEOUT_HINTS, "timeout"
    if fine:
        if status != "ok":
            return _refused(key, call, content)
        low = content.lower()
        if str(args["party"]) not in content or args["day"].lower() not in low:
            return (f"{call} returned {short(content, 80)}",
                    ("the model tells the user what the tool said: does your result say which table it found?",
                     "put the party size and the day in the result (a dict with both, or a sentence)"),
                    "confirmation")
        return None
    if status == "ok":
        if any(w in content.lower() for w in ("error", "sorry", "cannot", "can't", "invalid", "too ", "only",
                                               "not ", "must", "allowed")):
            return (f"{call} returned {short(content, 80)} as an ordinary result: the model is told it worked",
                    ("a returned text is a success on the wire, whatever it says: how does a tool say it failed?",
                     "raise an exception (ValueError with a message) or put the limit in the schema with "
                     "pydantic.Field; either becomes an error result"), "returned-error")
        return (f"{call} got an ok result ({short(content, 80)})",
                _accepts_hints(key), {"big": "accepts-big", "small": "accepts-small", "day": "accepts-day"}[key])
    if status not in ("error", "rejected"):
        return f"{call} ended {status}: {short(content, 80)}", TIMEOUT_HINTS, status
    if error_type == "AssertionError":
        return (f"{call} is an error, but an AssertionError: {short(message, 60)!r}",
                ("an assert is a check for the programmer, not for the caller: what happens to it under python -O?",
                 "python -O (and PYTHONOPTIMIZE) removes every assert, and then nothing checks the call: raise "
                 "ValueError with the message instead"), "assert")
    needs = {"big": [rf"\b{MAX_PARTY}\b", r"\beight\b"], "small": [r"\b1\b", r"\bone\b"], "day": list(DAYS)}[key]
    if not any(re.search(n, message.lower()) for n in needs) or len(message.strip()) < 8:
        what = {"big": f"the limit ({MAX_PARTY})", "small": "the smallest party (1)", "day": "the days allowed"}[key]
        return (f"{call} is an error, but its message does not say {what}: {short(message, 90)!r}",
                ("the model only knows what the message says: what should it send instead?",
                 f"write a message that names the argument and what is allowed, e.g. with {what}"), "vague")
    return None


def _refused(key: str, call: str, content: str) -> tuple[str, Hints, str]:
    if key == "edges":
        return (f"{call} was refused: {short(content, 100)}",
                ("look at your bounds: 'from 1 to 8 people' includes 1 and 8",
                 "compare with < and > (or Field's ge and le), which keep the bounds themselves allowed"),
                "boundary")
    if key == "case":
        return (f"{call} was refused: {short(content, 100)}",
                ("people (and models) write 'Friday', 'friday' or 'FRIDAY': which of them does your tool take?",
                 "lower-case the day before you compare it with the days"), "case")
    return (f"{call} was refused: {short(content, 100)}",
            ("a right call failed: read the message and try your function with the same arguments",
             "call find_table.fn(party=..., day=...) in a cell and read the error"), "rejects-good")


def _accepts_hints(key: str) -> Hints:
    if key == "day":
        return ("a day that is no day was accepted: does your tool check the day?",
                "compare the day, lower-cased, with the seven day names, and raise when it is none of them")
    return ("this party size was accepted: where does your tool check it?",
            f"raise an error when party is under 1 or over {MAX_PARTY} (or bound it with pydantic.Field)")
