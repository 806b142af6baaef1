"""Notebook 09's exercise: an output type, ``Ticket``, that accepts every right answer and sends wrong ones back.

Theory of operation. ``Loop(output_type=Ticket)`` validates the model's final answer against the type and
sends an answer that does not fit back with its validation errors, for a correction turn. So the type *is* the
rule: a bound left out lets a wrong priority through, a bound one step off refuses a right one. The check plays
scripted models that answer with tickets drawn at random every check, through a real loop:

- right tickets, boundaries included (priority 1 and 5, every category, order ids of digits or letters):
  each must end the run ``COMPLETED`` on the first try, with exactly the values sent;
- wrong tickets, one property each (priority 0 or below, 6 or above, not a whole number; a category outside
  the three, every value the student's own schema allows beyond them, other spellings; a field left out or sent
  as null; an order id that is not text, or with text around it when the type has a pattern): each must be sent
  back as it is (an ``OutputValidated`` event with ``ok=False``; a validator that repairs the value gets a FIX),
  and the model's corrected second answer must then end the run.

The type's validators are the student's code: one validation is timed first (a tenth of a second is a FIX),
and every run is on the leash, so an endless validator ends in "timed out".
"""

from __future__ import annotations

import random
import time
from typing import Any

import pydantic

from .._loop import Loop
from .._run import Run
from .._states import LoopState
from ..events import OutputValidated
from ..exceptions import CheckTimeout
from ..providers._scripted import ScriptedModel
from ._common import WORDS, Hints, calls, is_placeholder, safe_run, short, shown
from ._guard import Leash
from ._report import Report, describe_exception

__all__ = ["CATEGORIES", "FIELDS", "check_output"]

CATEGORIES = ("refund", "delivery", "other")
FIELDS = ("order_id", "category", "priority", "summary")


def _order(rng: random.Random) -> str:
    return str(rng.randint(100, 99_999)) if rng.random() < 0.5 else f"{rng.choice('ABCKQZ')}-{rng.randint(100, 9999)}"


def _ticket(rng: random.Random, **changes: Any) -> dict[str, Any]:
    summary = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8)))
    t = {"order_id": _order(rng), "category": rng.choice(CATEGORIES), "priority": rng.randint(1, 5),
         "summary": summary}
    t.update(changes)
    return {k: v for k, v in t.items() if v is not _DROP}


_DROP = object()


def _good(rng: random.Random) -> list[tuple[str, str, list[dict[str, Any]]]]:
    return [
        ("typical", "right tickets are accepted as they are", [_ticket(rng) for _ in range(3)]),
        ("bounds", "priority 1 and priority 5 are accepted", [_ticket(rng, priority=1), _ticket(rng, priority=5)]),
        ("categories", "every category is accepted", [_ticket(rng, category=c) for c in CATEGORIES]),
        ("orders", "order ids of digits and of letters are accepted",
         [_ticket(rng, order_id=str(rng.randint(100, 99_999))),
          _ticket(rng, order_id=f"{rng.choice('ABCKQZ')}-{rng.randint(100, 9999)}")]),
    ]


def _bad(rng: random.Random, schema: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Wrong tickets, one property each; the student's own schema adds the values it allows and should not."""
    props = schema.get("properties", {})
    allowed = _enum(props.get("category", {}), schema)
    extra = [c for c in allowed if c not in CATEGORIES]  # a fourth category the type allows: send it
    wrong = extra + rng.sample(("refunds", "complaint", "billing", "return", "", "shipping"), 2) + \
        [rng.choice(CATEGORIES).capitalize(), rng.choice(CATEGORIES).upper(), " " + rng.choice(CATEGORIES)]
    groups = [
        ("low", "priority 0 or below is sent back", [_ticket(rng, priority=0),
                                                     _ticket(rng, priority=-rng.randint(1, 99))]),
        ("high", "priority 6 or above is sent back", [_ticket(rng, priority=6),
                                                      _ticket(rng, priority=rng.randint(7, 10**6))]),
        ("fraction", "a priority that is not a whole number is sent back",
         [_ticket(rng, priority=rng.choice((1.5, 2.5, 3.5, 4.5))), _ticket(rng, priority="high")]),
        ("category", "a category outside the three is sent back (a fourth one, another spelling)",
         [_ticket(rng, category=c) for c in dict.fromkeys(wrong)]),
        ("null", "a field sent as null is sent back", [_ticket(rng, **{f: None}) for f in FIELDS]),
        ("missing", "a ticket with a field left out is sent back",
         [_ticket(rng, **{f: _DROP}) for f in FIELDS]),
        ("order-type", "an order id that is not text is sent back",
         [_ticket(rng, order_id=rng.randint(100, 99_999))]),
    ]
    if props.get("order_id", {}).get("pattern"):  # a format of the student's own: it must hold for the whole text
        oid = _order(rng)
        groups.append(("pattern", "your order id pattern holds for the whole text (nothing around the id)",
                       [_ticket(rng, order_id=t) for t in (f"order {oid}", f"{oid}!!", f"#{oid}x")]))
    return groups


def _enum(prop: dict[str, Any], schema: dict[str, Any]) -> list[Any]:
    """The values a schema property allows when it lists them (``enum``, ``const``, ``anyOf`` of those, a ``$ref``)."""
    if "$ref" in prop:
        name = str(prop["$ref"]).rsplit("/", 1)[-1]
        prop = schema.get("$defs", {}).get(name, {})
    if "enum" in prop:
        return list(prop["enum"])
    if "const" in prop:
        return [prop["const"]]
    return [v for p in prop.get("anyOf", []) + prop.get("oneOf", []) if isinstance(p, dict) for v in _enum(p, schema)]


def _as_type(report: Report, ticket: Any) -> pydantic.TypeAdapter[Any] | None:
    if is_placeholder(ticket):
        report.fix("an output type", "not written yet (it is still None or ...)",
                   "write `class Ticket(pydantic.BaseModel):` with one annotated line per field", kind="missing")
        return None
    if isinstance(ticket, pydantic.BaseModel):
        report.fix("an output type", f"got an object, {shown(ticket)}",
                   ("output_type wants the type, not one ticket: what did you pass?",
                    "pass the class itself (Ticket), not Ticket(...)"), kind="not-a-type")
        return None
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ticket)
        schema = adapter.json_schema()
    except Exception as exc:
        report.fix("an output type", f"{shown(ticket)} has no JSON schema ({describe_exception(exc)})",
                   ("output_type wants a type pydantic can describe: which one did you pass?",
                    "write `class Ticket(pydantic.BaseModel):` with one annotated line per field"), kind="not-a-type")
        return None
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    missing = [f for f in FIELDS if f not in props]
    if missing:
        report.fix("its fields", f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not among its fields "
                   f"({', '.join(props) or 'none'})",
                   ("the model fills in the fields your type declares: compare their names with the exercise",
                    f"a ticket has exactly these fields: {', '.join(FIELDS)}"), kind="fields")
        return None
    report.ok("it is an output type", f"fields {', '.join(props)}")
    return adapter


def _play(report: Report, what: str, ticket: Any, first: dict[str, Any], second: dict[str, Any],
          leash: Leash) -> Run | None:
    """One run whose model answers ``first``, then ``second``; the whole run is on the leash (validators are code)."""
    model = ScriptedModel([calls("final_result", first), calls("final_result", second),
                           {"text": "I cannot give a ticket."}])
    loop = Loop(model=model, output_type=ticket, output_retries=1)
    try:
        return leash.call(lambda: safe_run(report, what, loop, "Triage this message"))  # type: ignore[no-any-return]
    except CheckTimeout as exc:
        report.fix(what, f"validating a ticket {exc}", _SLOW, kind="timeout")
    return None


_SLOW: Hints = ("your type's validators did not finish: look for a loop that never ends, or a wait, in them",
                "validating a ticket takes microseconds; a validator that sleeps, loops or calls out makes every "
                "answer of the model wait")


def _quick(report: Report, adapter: pydantic.TypeAdapter[Any], rng: random.Random, leash: Leash) -> bool:
    """Whether validating a right ticket is quick (a FIX line when it loops, or takes a tenth of a second).

    The fastest of up to three validations is timed inside the call, so a busy machine does not make a type slow.
    """
    samples = [_ticket(rng) for _ in range(3)]

    def fastest() -> float:  # up to three tries, stopping at a quick one or after a quarter of a second
        took: list[float] = []
        began = time.perf_counter()
        for sample in samples:
            started = time.perf_counter()
            try:
                adapter.validate_python(sample)
            except Exception:  # noqa: BLE001, S110 - a right ticket refused: the runs below say why, in detail
                pass
            took.append(time.perf_counter() - started)
            if took[-1] <= 0.1 or time.perf_counter() - began > 0.25:
                break
        return min(took)

    try:
        took: float = leash.call(fastest)
    except CheckTimeout as exc:
        report.fix("validating a ticket is quick", f"it {exc}", _SLOW, kind="timeout")
        return False
    if took > 0.1:
        report.fix("validating a ticket is quick", f"one ticket took {took:.2f} s to validate",
                   _SLOW, kind="slow")
        return False
    return True


def _checks(run: Run) -> list[OutputValidated]:
    return [e for e in run.events if isinstance(e, OutputValidated)]


def check_output(report: Report, ticket: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 09: a ``Ticket`` output type: order_id text, one of three categories, priority 1 to 5, a summary."""
    adapter = _as_type(report, ticket)
    if adapter is None or not _quick(report, adapter, rng, leash):
        return
    # each run is on a leash of its own limit: the whole run is timed (the loop's own work too), so the check's
    # total for the student's time is left to the probe above, which timed the validators alone
    leash = Leash(leash.limit, total=max(leash.total, 60.0))
    schema = adapter.json_schema()
    for key, what, cases in _good(rng):
        if not _accepts(report, key, what, ticket, adapter, cases, rng, leash):
            return
    good_ok = report.passed
    for key, what, cases in _bad(rng, schema):
        if not _refuses(report, key, what, ticket, cases, rng, good_ok, leash, adapter):
            return


def _accepts(report: Report, key: str, what: str, ticket: Any, adapter: pydantic.TypeAdapter[Any],
             cases: list[dict[str, Any]], rng: random.Random, leash: Leash) -> bool:
    """Right tickets end the run on the first try, with exactly the values sent; False when a run crashed."""
    for case in cases:
        run = _play(report, what, ticket, case, _ticket(rng), leash)
        if run is None:
            return False
        checks = _checks(run)
        if not checks or not checks[0].ok:
            errors = checks[0].errors if checks else []
            said = "; ".join(f"{e.get('loc') or 'the ticket'}: {e.get('msg')}" for e in errors[:2])
            loc = str(errors[0].get("loc")) if errors else ""
            if loc == "priority" and not any(w in str(errors[0].get("msg")) for w in ("greater", "less")):
                loc = "priority-type"  # not a bound: the field's type refused a whole number
            hints, kind = _good_hints(key, case, loc)
            report.fix(what, f"{short(case, 110)} was sent back: {short(said, 140)}", hints, kind=kind)
            return True
        try:  # a serializer of the student's runs here: on the leash too
            got = leash.call(adapter.dump_python, (run.output,), {"mode": "json"})
        except CheckTimeout as exc:
            report.fix(what, f"turning the ticket back into JSON {exc}", _SLOW, kind="timeout")
            return False
        except Exception:  # noqa: BLE001 - an output the type cannot dump is a difference too
            got = run.output
        if not _same(got, case):
            differ = [k for k in case if not isinstance(got, dict) or not _same(got.get(k), case[k])]
            hints, kind = _good_hints(key, case, differ[0] if len(differ) == 1 else "")
            if isinstance(got, dict) and isinstance(got.get("priority"), float):
                hints, kind = _bad_hints("fraction")  # 3 came back as 3.0: the field is a float
            report.fix(what, f"{short(case, 110)} was accepted as {short(got, 100)}", hints, kind=kind)
            return True
    report.ok(what, f"{len(cases)} random ticket{'s' if len(cases) > 1 else ''}")
    return True


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON types (3.0 is not the whole number 3 a ticket's priority is)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _refuses(report: Report, key: str, what: str, ticket: Any, cases: list[dict[str, Any]], rng: random.Random,
             good_ok: bool, leash: Leash, adapter: pydantic.TypeAdapter[Any]) -> bool:
    """Wrong tickets are sent back and the corrected answer ends the run; False when a run crashed."""
    for case in cases:
        run = _play(report, what, ticket, case, _ticket(rng), leash)
        if run is None:
            return False
        checks = _checks(run)
        if checks and checks[0].ok:
            hints, kind = _bad_hints(key)
            try:
                got = leash.call(adapter.dump_python, (run.output,), {"mode": "json"})
            except Exception:  # noqa: BLE001 - a timeout or a serializer that fails: compare what came back
                got = run.output
            changed = [k for k in case if isinstance(got, dict) and not _same(got.get(k), case[k])]
            if changed and key in ("category", "fraction", "pattern"):
                k = changed[0]
                hints, kind = ((f"your type changed {case[k]!r} into {got.get(k)!r} instead of sending it back: "
                                "what does the model learn from that?", "a validator that repairs a value (lower-"
                                "cases, rounds, strips) accepts what the rule refuses, and the model is never told: "
                                "leave the value as it is and let the type refuse it"), "repairs")
            report.fix(what, f"{short(case, 110)} was accepted", hints, kind=kind)
            return True
        if not good_ok:  # right tickets are refused already: a failed correction says nothing new
            return True
        if run.state is not LoopState.COMPLETED or len(checks) < 2 or not checks[1].ok:
            report.fix(what, f"the wrong ticket was sent back, but the corrected one did not end the run "
                       f"({run.state.value}: {short(run.reason, 100)})",
                       ("look at the second OutputValidated event of that run",
                        "a right ticket must fit your type: see the lines above"), kind="no-correction")
            return True
    report.ok(what, f"{len(cases)} random ticket{'s' if len(cases) > 1 else ''}, each corrected on the second try")
    return True


def _good_hints(key: str, case: dict[str, Any], loc: str) -> tuple[Hints, str]:
    by_field = {"priority": "bounds", "category": "categories", "order_id": "orders", "priority-type": "typical"}
    key = by_field.get(loc, key)
    if key == "bounds":
        return ((f"a priority of {case['priority']} is allowed: look at your bounds",
                 "'from 1 to 5' includes 1 and 5: Field(ge=..., le=...) includes its bounds, gt and lt do not"),
                "boundary")
    if key == "categories":
        return ((f"{case['category']!r} is one of the three categories: is it in your type?",
                 f"the categories are exactly {', '.join(map(repr, CATEGORIES))}"), "category-missing")
    if key == "orders":
        return (("an order id like 'A-4821' or '48213' is text: what type did you give order_id?",
                 "a field that holds text is a str"), "order-type")
    return (("a right ticket does not fit your type: read the error after 'sent back'",
             "compare each field's type with the exercise: text is str, a whole number is int"), "rejects-good")


def _bad_hints(key: str) -> tuple[Hints, str]:
    return {
        "low": (("a priority below 1 fits your type: where does your range start?",
                 "give priority a lower bound: pydantic.Field(ge=...) on the field"), "accepts-low"),
        "high": (("a priority above 5 fits your type: does your range end somewhere?",
                  "give priority an upper bound too: pydantic.Field(le=...)"), "accepts-high"),
        "fraction": (("a priority of 2.5 (or a word) fits your type: what kind of number is a priority?",
                      "a whole number is an int; a float field accepts 2.5"), "fraction"),
        "category": (("any text fits your category: how do you allow exactly three values?",
                      "typing.Literal['a', 'b', 'c'] allows those values and nothing else"), "category"),
        "missing": (("a ticket with a field left out fits your type: which of your fields may be left out?",
                     "a field with a default (= None, = '') is optional; every field of a ticket is required"),
                    "optional"),
        "null": (("a ticket with a field set to null fits your type: which of your fields accept None?",
                  "`str | None` (or Optional[str]) accepts null even without a default: every field of a ticket "
                  "holds a value, so give each its plain type"), "nullable"),
        "pattern": (("your pattern found the order id inside a longer text: does it say where the id starts and "
                     "ends?", "pydantic's pattern= matches anywhere in the text, like re.search: anchor it with ^ "
                     "at the start and $ at the end"), "unanchored"),
        "order-type": (("an order id sent as a number fits your type: what type did you give order_id?",
                        "a str field refuses a number; int | str or a default type accepts it"), "order-type"),
    }[key]
