"""The mutation test of the checks of notebooks 09-13: known-wrong answers that must all get FIX (with the right
diagnosis) on several random draws, and right answers that must PASS on every draw.

The MCP check (10) starts a real MCP server in a subprocess for every check, so its mutants run on two draws.
"""

from __future__ import annotations

import dataclasses
import random
import re
import time
from collections.abc import Callable
from email.utils import parseaddr
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import pydantic
import pytest

import agentnb as anb
from agentnb import workshop
from agentnb.workshop._mcp_shop import draw, sounds_like_read

SEEDS = (1, 2, 3, 17, 4242)


def assert_fix(exercise: str, answer: Any, kind: str | tuple[str, ...] | None, seeds: tuple[int, ...] = SEEDS,
               time_limit: float = 0.5) -> None:
    """``kind``: the diagnosis expected, or several of which one must be given (a draw decides which shows)."""
    kinds = (kind,) if isinstance(kind, str) else kind
    for seed in seeds:
        report = workshop.check(exercise, answer, seed=seed, time_limit=time_limit)
        assert not report.passed, f"passed with seed {seed}:\n{report}"
        if kinds is not None:
            assert set(kinds) & set(report.kinds), f"expected a {kinds} diagnosis, got {report.kinds}:\n{report}"
        assert "Traceback" not in str(report)


# -- 09 · an output type ------------------------------------------------------------------------------------------

Category = Literal["refund", "delivery", "other"]


class Ticket(pydantic.BaseModel):
    order_id: str
    category: Category
    priority: int = pydantic.Field(ge=1, le=5)
    summary: str


def ticket(**changes: Any) -> Any:
    """The right Ticket with some fields changed: ``field=(type, default or MISSING)``, or ``field=None`` to drop it."""
    notes: dict[str, Any] = {"order_id": str, "category": Category, "priority": int, "summary": str}
    defaults: dict[str, Any] = {"priority": pydantic.Field(ge=1, le=5)}
    for name, change in changes.items():
        defaults.pop(name, None)
        if change is None:
            notes.pop(name)
            continue
        notes[name], default = change
        if default is not dataclasses.MISSING:
            defaults[name] = default
    return type("Ticket", (pydantic.BaseModel,), {"__annotations__": notes, **defaults})


NO = dataclasses.MISSING

OUTPUT_MUTANTS: dict[str, tuple[Any, str]] = {
    "not written": (None, "missing"),
    "priority without bounds": (ticket(priority=(int, NO)), "accepts-low"),
    "priority from 0": (ticket(priority=(int, pydantic.Field(ge=0, le=5))), "accepts-low"),
    "priority up to 6": (ticket(priority=(int, pydantic.Field(ge=1, le=6))), "accepts-high"),
    "priority with a lower bound only": (ticket(priority=(int, pydantic.Field(ge=1))), "accepts-high"),
    "gt instead of ge": (ticket(priority=(int, pydantic.Field(gt=1, le=5))), "boundary"),
    "lt instead of le": (ticket(priority=(int, pydantic.Field(ge=1, lt=5))), "boundary"),
    "a float priority": (ticket(priority=(float, pydantic.Field(ge=1, le=5))), "fraction"),
    "a priority as text": (ticket(priority=(str, NO)), "rejects-good"),
    "any category": (ticket(category=(str, NO)), "category"),
    "two categories": (ticket(category=(Literal["refund", "delivery"], NO)), "category-missing"),
    "an int order id": (ticket(order_id=(int, NO)), "order-type"),
    "an optional order id": (ticket(order_id=(str | None, None)), "optional"),
    "an optional summary": (ticket(summary=(str, "")), "optional"),
    "no summary": (ticket(summary=None), "fields"),
    "a ticket, not the type": (Ticket(order_id="42", category="other", priority=1, summary="x"), "not-a-type"),
    "a dict": ({"order_id": "str"}, "not-a-type"),
}


def validated(field: str, fn: Callable[[Any], Any], mode: Literal["before", "after"] = "after", **changes: Any) -> Any:
    """The right Ticket (with ``changes``) plus a validator on ``field``."""
    base = ticket(**changes)
    check = pydantic.field_validator(field, mode=mode)(classmethod(lambda cls, v: fn(v)))  # type: ignore[arg-type]
    return type("Ticket", (base,), {"check_field": check})


def _spin_validator(value: Any) -> Any:
    while True:
        pass


def _slow_validator(value: Any) -> Any:
    time.sleep(0.3)
    return value


def _lower(value: Any) -> Any:
    return value.lower().strip() if isinstance(value, str) else value


OUTPUT_MUTANTS.update({
    "a nullable order id (required, but None allowed)": (ticket(order_id=(str | None, NO)), "nullable"),
    "a nullable summary": (ticket(summary=(str | None, NO)), "nullable"),
    "an Optional category with no default": (ticket(category=(Category | None, NO)), "nullable"),
    "a fourth category": (ticket(category=(Literal["refund", "delivery", "other", "complaint"], NO)), "category"),
    "a fifth and sixth category": (ticket(category=(Literal["refund", "delivery", "other", "billing", "return"], NO)),
                                   "category"),
    "a validator that lower-cases the category": (validated("category", _lower, mode="before"), "repairs"),
    "a float priority that must be whole": (ticket(priority=(float, pydantic.Field(ge=1, le=5, multiple_of=1))),
                                            "fraction"),
    "an unanchored order id pattern": (ticket(order_id=(str, pydantic.Field(pattern=r"\d+|[A-Z]-\d+"))), "unanchored"),
    "a pattern anchored at the start only": (ticket(order_id=(str, pydantic.Field(pattern=r"^(\d+|[A-Z]-\d+)"))),
                                             "unanchored"),
    "a validator that loops for ever": (validated("summary", _spin_validator), "timeout"),
    "a validator that takes 0.3 s": (validated("summary", _slow_validator), "slow"),
})


@pytest.mark.parametrize("name", list(OUTPUT_MUTANTS))
def test_wrong_output_types_get_fix(name: str) -> None:
    answer, kind = OUTPUT_MUTANTS[name]
    started = time.monotonic()
    assert_fix("output", answer, kind, seeds=SEEDS[:2] if kind in ("timeout", "slow") else SEEDS)
    assert time.monotonic() - started < 20  # a slow or endless validator costs about one time limit per check


@dataclasses.dataclass
class TicketData:
    order_id: str
    category: Category
    priority: Annotated[int, pydantic.Field(ge=1, le=5)]
    summary: str


# -- 10 · read-only tools of an MCP server ------------------------------------------------------------------------


def _no_server() -> list[Any]:
    return []


def _spin(server: Any) -> list[Any]:
    while True:
        pass


MCP_MUTANTS: dict[str, tuple[Any, str | tuple[str, ...] | None]] = {
    "not written": (None, "missing"),
    "every tool": (lambda s: s.tools(), ("unannotated", "by-name", "includes-write")),
    "all but the dangerous ones": (lambda s: [t for t in s.tools() if t.risk != "dangerous"], "includes-write"),
    "the demo shop's names": (lambda s: s.tools(include=["lookup_order", "list_orders"]), "crash"),
    "by the name's first word": (lambda s: [t for t in s.tools() if sounds_like_read(t.name)], "by-name"),
    "names instead of tools": (lambda s: [t.name for t in s.tools() if t.risk == "read"], "names"),
    "the server itself": (lambda s: s, "type"),
    "without the words that write": (lambda s: [t for t in s.tools() if not any(
        w in t.name for w in ("refund", "cancel", "delete", "set", "update", "add", "assign", "clear"))],
        ("by-name", "unannotated")),
    "no readOnlyHint=false": (lambda s: [t for t in s.tools() if t.annotations.get("readOnlyHint") is not False],
                              "unannotated"),
    "the first three": (lambda s: s.tools()[:3], None),
    "no argument": (_no_server, "arity"),
    "an endless loop": (_spin, "timeout"),
}


def _try_every_tool(server: Any) -> list[Any]:
    """Finds out by calling each tool (the destructive ones too), then keeps the reads."""
    for t in server.tools():
        try:
            t(item_id="0")
        except Exception:  # noqa: BLE001, S110 - a tool that fails still ran
            pass
    return [t for t in server.tools() if t.risk == "read"]


def _call_by_name(server: Any) -> list[Any]:
    for name in server.tool_names:
        server.call(name, {"item_id": "0"})
    return [t for t in server.tools() if t.risk == "read"]


def _call_the_unsure(server: Any) -> list[Any]:
    """Calls only the tools without a readOnlyHint to see what they do."""
    for t in server.tools():
        if "readOnlyHint" not in t.annotations:
            t(item_id="0")
    return [t for t in server.tools() if t.risk == "read"]


@anb.tool
def get_help(item_id: str) -> str:
    """Say what the shop's tools do.

    Args:
        item_id: An item.
    """
    return "help"


def _with_own_tool(server: Any) -> list[Any]:
    return [t for t in server.tools() if t.risk == "read"] + [get_help]


def _marked_read(server: Any) -> list[Any]:
    """Marks every tool a read (on the copies it was given), then keeps the reads."""
    tools = server.tools()
    for t in tools:
        object.__setattr__(t, "risk", "read")
    return [t for t in tools if t.risk == "read"]


MCP_MUTANTS.update({
    "calls every tool to find out": (_try_every_tool, "calls-tools"),
    "calls every tool by name": (_call_by_name, "calls-tools"),
    "calls the tools without annotations": (_call_the_unsure, "calls-tools"),
    "adds a tool of its own": (_with_own_tool, "own-tool"),
    "marks every tool a read": (_marked_read, "includes-write"),
})


def _changes_what_it_is_given(server: Any) -> list[Any]:
    """Right, though it writes into the tools it was given (defaults in the annotations, an emptied schema)."""
    tools = server.tools()
    for t in tools:
        t.annotations.setdefault("readOnlyHint", False)
        t.parameters.get("properties", {}).clear()
    return [t for t in tools if t.annotations["readOnlyHint"] is True]


@pytest.mark.parametrize("name", list(MCP_MUTANTS))
def test_wrong_mcp_tool_lists_get_fix(name: str) -> None:
    answer, kind = MCP_MUTANTS[name]
    assert_fix("mcp", answer, kind, seeds=SEEDS[:1] if kind in ("timeout", "missing", "arity") else SEEDS[:2],
               time_limit=1.0)


def test_every_mcp_draw_has_traps_for_names() -> None:
    for seed in range(50):
        tools = draw(seed)
        kinds = {k for _, k in tools}
        assert kinds == {"read", "write", "destructive", "unannotated"}
        assert len(tools) == 7 and sum(k == "read" for _, k in tools) == 3  # a passing report reads the same
        assert len({n for n, _ in tools}) == 7
        assert any(k == "read" and not sounds_like_read(n) for n, k in tools)  # a read that sounds like a write
        assert any(k != "read" and sounds_like_read(n) for n, k in tools)  # a write that sounds like a read


# -- 11 · error design --------------------------------------------------------------------------------------------

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DOC = """Find a free table for a party on a day of the week.

Args:
    party: How many people, from 1 to 8.
    day: A day of the week, e.g. "Friday".
"""


def finder(body: Callable[[int, str], Any], **options: Any) -> anb.Tool:
    def find_table(party: int, day: str) -> Any:
        return body(party, day)

    find_table.__doc__ = DOC
    return anb.tool(**options)(find_table) if options else anb.tool(find_table)


def right_table(party: int, day: str) -> dict[str, Any]:
    if not 1 <= party <= 8:
        raise ValueError(f"party must be from 1 to 8 people, got {party}; for more, call the restaurant")
    if day.lower() not in DAYS:
        raise ValueError(f"day must be a day of the week ({', '.join(DAYS)}), got {day!r}")
    return {"party": party, "day": day, "time": "19:30"}


def _returns_text(party: int, day: str) -> Any:
    return "Error: parties are 1 to 8 people" if not 1 <= party <= 8 else right_table(party, day)


def _raise_vague(party: int, day: str) -> Any:
    if not 1 <= party <= 8 or day.lower() not in DAYS:
        raise ValueError("invalid input")
    return right_table(party, day)


def _case_sensitive(party: int, day: str) -> Any:
    if day not in DAYS:
        raise ValueError(f"day must be one of {', '.join(DAYS)}")
    return right_table(party, day)


def _nine(party: int, day: str) -> Any:
    if not 1 <= party <= 9:
        raise ValueError("party must be from 1 to 9")
    return {"party": party, "day": day}


def _seven(party: int, day: str) -> Any:
    if not 1 <= party < 8:
        raise ValueError("party must be from 1 to 8")
    return right_table(party, day)


def _spin_table(party: int, day: str) -> Any:
    while True:
        pass


@anb.tool
def int_day(party: int, day: int) -> str:
    """Find a free table.

    Args:
        party: How many people.
        day: The day.
    """
    return "ok"


@anb.tool
def undocumented(party: int, day: str) -> Any:
    return right_table(party, day)


ERROR_MUTANTS: dict[str, tuple[Any, str]] = {
    "not written": (None, "missing"),
    "returns the error as text": (finder(_returns_text), "returned-error"),
    "returns an error dict": (finder(lambda p, d: {"error": "party must be 1 to 8"} if not 1 <= p <= 8
                                     else right_table(p, d)), "returned-error"),
    "checks nothing": (finder(lambda p, d: {"party": p, "day": d}), "accepts-big"),
    "allows 9": (finder(_nine), "accepts-big"),
    "refuses 8": (finder(_seven), "boundary"),
    "a vague message": (finder(_raise_vague), "vague"),
    "case-sensitive days": (finder(_case_sensitive), "case"),
    "no check of the day": (finder(lambda p, d: right_table(p, "monday") and {"party": p, "day": d}),
                            "accepts-day"),
    "a constant": (finder(lambda p, d: "Table found"), "confirmation"),
    "an endless loop": (finder(_spin_table), "timeout"),
    "declared approval=True": (finder(right_table, approval=True), "paused"),
    "a day as a number": (int_day, "type"),
    "no docstring": (undocumented, "description"),
}


def _day_check(ok: Callable[[str], bool]) -> Callable[[int, str], Any]:
    """The right tool, but with its day test replaced by ``ok(day)``."""

    def find(party: int, day: str) -> Any:
        if not 1 <= party <= 8:
            raise ValueError(f"party must be from 1 to 8 people, got {party}")
        if not ok(day):
            raise ValueError(f"day must be a day of the week ({', '.join(DAYS)}), got {day!r}")
        return {"party": party, "day": day, "time": "19:30"}

    return find


def _asserts(party: int, day: str) -> Any:
    assert 1 <= party <= 8, f"party must be from 1 to 8 people, got {party}"
    assert day.lower() in DAYS, f"day must be one of {', '.join(DAYS)}"
    return {"party": party, "day": day}


def _asserts_days_only(party: int, day: str) -> Any:
    assert day.lower() in DAYS, f"day must be one of {', '.join(DAYS)}"
    return right_table(party, day)


ERROR_MUTANTS.update({
    "days by substring of the week": (finder(_day_check(lambda d: d.lower() in " ".join(DAYS))), "accepts-day"),
    "days by prefix": (finder(_day_check(lambda d: any(x.startswith(d.lower()) for x in DAYS))), "accepts-day"),
    "days by suffix": (finder(_day_check(lambda d: d.lower().endswith("day"))), "accepts-day"),
    "a text that starts with a day": (finder(_day_check(lambda d: d.lower().startswith(DAYS))), "accepts-day"),
    "a day inside the text": (finder(_day_check(lambda d: any(x in d.lower() for x in DAYS))), "accepts-day"),
    "the first three letters": (finder(_day_check(lambda d: d.lower()[:3] in [x[:3] for x in DAYS])), "accepts-day"),
    "validation by assert": (finder(_asserts), "assert"),
    "the day by assert": (finder(_asserts_days_only), "assert"),
})


def right_in_words(party: int, day: str) -> dict[str, Any]:
    if party < 1 or party > 8:
        raise ValueError("a table is for one to eight people; ask for a party in that range")
    if day.strip().lower() not in DAYS:
        raise ValueError("the day must be a weekday name, Monday to Sunday")
    return {"party": party, "day": day}


@pytest.mark.parametrize("name", list(ERROR_MUTANTS))
def test_wrong_error_designs_get_fix(name: str) -> None:
    answer, kind = ERROR_MUTANTS[name]
    assert_fix("errors", answer, kind, seeds=SEEDS[:2] if kind == "timeout" else SEEDS)


@anb.tool
def find_table_by_schema(party: Annotated[int, pydantic.Field(ge=1, le=8)], day: str) -> dict[str, Any]:
    """Find a free table for a party on a day of the week.

    Args:
        party: How many people, from 1 to 8.
        day: A day of the week, e.g. "Friday".
    """
    if day.lower() not in DAYS:
        raise ValueError(f"no such day {day!r}: use one of {', '.join(DAYS)}")
    return {"party": party, "day": day}


# -- 12 · a policy against prompt injection -----------------------------------------------------------------------

SHOP = "example-shop.com"


def host(call: Any) -> str | None:
    """The one host a call sends to (the last recipient's, for an email): the first version of the right answer."""
    args = call.arguments or {}
    if call.name == "send_email":
        return str(args.get("to", "")).rsplit("@", 1)[-1].lower()
    if call.name == "http_post":
        return (urlsplit(str(args.get("url", ""))).hostname or "").lower()
    return None


def hosts(call: Any) -> list[str] | None:
    """Every host a call sends to: each recipient of an email, the host of a URL (None: not a send)."""
    args = call.arguments or {}
    if call.name == "send_email":
        return [a.strip().rsplit("@", 1)[-1].lower() for a in re.split(r"[,;]", str(args.get("to", "")))]
    if call.name == "http_post":
        return [(urlsplit(str(args.get("url", ""))).hostname or "").lower()]
    return None


def ours(h: str) -> bool:
    return h == SHOP or h.endswith("." + SHOP)


def needs_approval(call: Any, state: Any) -> bool:
    found = hosts(call)
    return found is not None and not all(ours(h) for h in found)


def _by_hand(url: str) -> str:
    """A URL's host, parsed by hand: what follows the last @ up to the next /."""
    return url.split("//", 1)[-1].rsplit("@", 1)[-1].split("/", 1)[0].lower()


def _hand_parsed(call: Any, state: Any) -> bool:
    if call.name == "http_post":
        return not ours(_by_hand(call.arguments["url"]))
    return needs_approval(call, state)


def _third_piece(call: Any, state: Any) -> bool:
    """The host as url.split('/')[2], after its last @ and before a port."""
    if call.name == "http_post":
        return not ours(call.arguments["url"].split("/")[2].rsplit("@", 1)[-1].split(":")[0].lower())
    return needs_approval(call, state)


INJECTION_MUTANTS: dict[str, tuple[Any, str]] = {
    "the last recipient only (the first right answer)": (lambda c, s: host(c) is not None and not ours(str(host(c))),
                                                         "recipients"),
    "the first recipient only": (lambda c, s: c.name != "fetch_page" and not ours(
        str(c.arguments.get("to") or urlsplit(c.arguments.get("url", "")).hostname or "").split(",")[0]
        .rsplit("@", 1)[-1].strip().lower()), "recipients"),
    "a host parsed by hand (after the last @)": (_hand_parsed, "hand-parsed"),
    "the host as url.split('/')[2]": (_third_piece, "hand-parsed"),
    "a subdomain test by substring": (lambda c, s: hosts(c) is not None and not all(
        h == SHOP or "." + SHOP in h for h in hosts(c) or []), "lookalike"),
    "not written": (None, "missing"),
    "pauses everything": (lambda c, s: True, "pauses-all"),
    "pauses nothing": (lambda c, s: False, "pauses-none"),
    "the shop's name anywhere in the arguments": (lambda c, s: c.name != "fetch_page" and SHOP not in str(c.arguments),
                                                  "lookalike"),
    "a suffix without the dot": (lambda c, s: host(c) is not None and not str(host(c)).endswith(SHOP), "lookalike"),
    "a block list": (lambda c, s: "attacker" in str(c.arguments) or "evil" in str(c.arguments), None),
    "reads `to` of every call": (lambda c, s: not c.arguments["to"].endswith("@" + SHOP), "crash"),
    "the exact domain only": (lambda c, s: host(c) is not None and host(c) != SHOP, "subdomain"),
    "case-sensitive": (lambda c, s: c.name != "fetch_page" and not (
        (c.arguments.get("to") or urlsplit(c.arguments.get("url", "")).hostname or "").rsplit("@", 1)[-1] == SHOP
        or (c.arguments.get("to") or urlsplit(c.arguments.get("url", "")).hostname or "").endswith("." + SHOP)),
                       "case"),
    "emails only": (lambda c, s: c.name == "send_email" and needs_approval(c, s), "one-tool"),
    "every send": (lambda c, s: c.name != "fetch_page", "pauses-own"),
    "a URL prefix": (lambda c, s: c.name == "http_post" and not c.arguments["url"].lower().startswith(
        ("https://" + SHOP, "http://" + SHOP)) or c.name == "send_email" and needs_approval(c, s), "mention"),
    "returns the host": (lambda c, s: host(c) or "", "type"),
    "one argument": (lambda call: True, "arity"),
}


@pytest.mark.parametrize("name", list(INJECTION_MUTANTS))
def test_wrong_injection_policies_get_fix(name: str) -> None:
    assert_fix("injection", *INJECTION_MUTANTS[name])


# -- 13 · a budget in dollars -------------------------------------------------------------------------------------

PRICES = {"gpt-4.1-mini": (0.40, 1.60)}

COST_MUTANTS: dict[str, tuple[Any, str]] = {
    "not written": (None, "missing"),
    "a dict, not a Budget": ({"max_cost": 0.02}, "type"),
    "prices per token": (anb.Budget(max_cost=0.02, prices={"gpt-4.1-mini": (0.40e-6, 1.60e-6)}), "per-token"),
    "prices under another model": (anb.Budget(max_cost=0.02, prices={"gpt-4o-mini": (0.40, 1.60)}), "price-name"),
    "prices under another provider's prefix": (
        anb.Budget(max_cost=0.02, prices={"anthropic:gpt-4.1-mini": (0.40, 1.60)}), "price-name"),
    "swapped prices": (anb.Budget(max_cost=0.02, prices={"gpt-4.1-mini": (1.60, 0.40)}), "prices-swapped"),
    "cents for dollars": (anb.Budget(max_cost=2, prices=PRICES), "cents"),
    "max_cost=0": (anb.Budget(max_cost=0, prices=PRICES), "limit-low"),
    "a limit ten times too high": (anb.Budget(max_cost=0.2, prices=PRICES), "limit-high"),
    "no prices": (anb.Budget(max_cost=0.02), "no-prices"),
    "tokens instead of dollars": (anb.Budget(max_total_tokens=50_000), "no-cost-limit"),
    "no limit": (anb.Budget(), "no-cost-limit"),
    "stops with no answer": (anb.Budget(max_cost=0.02, prices=PRICES, on_exhausted="stop"), "stops"),
    "asks a person": (anb.Budget(max_cost=0.02, prices=PRICES, on_exhausted="escalate"), "escalates"),
    "a call limit too": (anb.Budget(max_cost=0.02, prices=PRICES, max_tool_calls=2), "wrong-limit"),
    "a limit 2 % low": (anb.Budget(max_cost=0.0196, prices=PRICES), "limit-low"),
    "a limit 0.5 % low": (anb.Budget(max_cost=0.0199, prices=PRICES), "limit-low"),
    "a limit 2 % high": (anb.Budget(max_cost=0.0204, prices=PRICES), "limit-high"),
    "a limit 0.5 % high": (anb.Budget(max_cost=0.0201, prices=PRICES), "limit-high"),
    "a turn cap beside the cost": (anb.Budget(max_cost=0.02, prices=PRICES, max_turns=15), "wrong-limit"),
    "a token cap beside the cost": (anb.Budget(max_cost=0.02, prices=PRICES, max_total_tokens=40_000), "wrong-limit"),
    "an output token cap": (anb.Budget(max_cost=0.02, prices=PRICES, max_output_tokens=10_000), "wrong-limit"),
    "a deadline the fast check never reaches": (anb.Budget(max_cost=0.02, prices=PRICES, deadline_s=30),
                                                "other-limit"),
    "a tool timeout": (anb.Budget(max_cost=0.02, prices=PRICES, tool_timeout=1), "other-limit"),
    "the price of another snapshot": (anb.Budget(max_cost=0.02, prices={"gpt-4.1-2025-04-14": (0.40, 1.60)}),
                                      "price-name"),
}


@pytest.mark.parametrize("name", list(COST_MUTANTS))
def test_wrong_cost_budgets_get_fix(name: str) -> None:
    assert_fix("cost", *COST_MUTANTS[name])


def test_the_cost_check_explains_an_unpriced_model_in_its_report_not_in_a_stray_warning(
        recwarn: pytest.WarningsRecorder) -> None:
    report = workshop.check("cost", anb.Budget(max_cost=0.02), seed=1)
    assert not report.passed and "no-prices" in report.kinds
    assert not workshop.check("budget", anb.Budget(max_cost=0), seed=1).passed  # 04's check runs the same way
    assert not [w for w in recwarn if w.category is anb.UnpricedModelWarning]
    with pytest.warns(anb.UnpricedModelWarning):  # outside the check the warning is still given
        anb.Loop(model=anb.ScriptedModel([{"text": "hi"}], name="gpt-4.1-mini"),
                 budget=anb.Budget(max_cost=0.02, price_table=False)).start("q").run()


# -- right answers pass, on many draws ----------------------------------------------------------------------------

RIGHT: list[tuple[str, Any, int]] = [
    ("output", Ticket, 10),
    ("output", TicketData, 10),
    ("output", ticket(order_id=(str, pydantic.Field(pattern=r"^(\d+|[A-Z]-\d+)$"))), 5),
    ("output", ticket(priority=(Annotated[int, pydantic.Field(strict=True)], pydantic.Field(ge=1, le=5))), 5),
    ("output", validated("summary", lambda v: v), 5),
    ("errors", finder(right_table), 10),
    ("errors", find_table_by_schema, 10),
    ("errors", finder(right_in_words), 5),
    ("injection", needs_approval, 10),
    ("injection", lambda c, s: c.name in ("send_email", "http_post") and any(
        not (h == SHOP or h.endswith("." + SHOP)) for h in (
            [parseaddr(a)[1].rpartition("@")[2].lower() for a in c.arguments["to"].replace(";", ",").split(",")]
            if c.name == "send_email" else [(urlsplit(c.arguments["url"]).hostname or "")])), 5),
    ("cost", anb.Budget(max_cost=0.02, prices=PRICES), 10),
    ("cost", anb.Budget(max_cost=0.02, prices={**PRICES, "gpt-4o": (2.5, 10.0)}, on_exhausted="finalize"), 10),
    # the runs answer as OpenAI's API does (openai_chat, gpt-4.1-mini-2025-04-14): a price under the provider's
    # prefix or under the snapshot's own name counts as well as one under the alias
    ("cost", anb.Budget(max_cost=0.02, prices={"openai:gpt-4.1-mini": (0.40, 1.60)}), 5),
    ("cost", anb.Budget(max_cost=0.02, prices={"gpt-4.1-mini-2025-04-14": (0.40, 1.60)}), 5),
    ("cost", anb.Budget(max_cost=0.02, prices={"openai:gpt-4.1-mini-2025-04-14": (0.40, 1.60)}), 5),
    ("cost", anb.Budget(max_cost=0.02, prices={"openai_chat:gpt-4.1-mini-2025-04-14": (0.40, 1.60)}), 5),
    ("cost", anb.Budget(max_cost=0.02, prices=PRICES, max_turns=30, max_total_tokens=10**7), 5),
    ("mcp", _changes_what_it_is_given, 2),
    ("mcp", lambda server: [t for t in server.tools() if t.risk == "read"], 3),
]


@pytest.mark.parametrize(("exercise", "answer", "draws"), RIGHT)
def test_right_answers_pass_every_draw(exercise: str, answer: Any, draws: int) -> None:
    for seed in [*SEEDS, *random.sample(range(10**6), 5)][:draws]:
        report = workshop.check(exercise, answer, seed=seed)
        assert report.passed, f"seed {seed}:\n{report}"


def test_a_passing_report_reads_the_same_on_every_draw() -> None:
    """The solutions notebook compares the passing reports as text, so nothing random may show in them."""
    for exercise, answer, _ in [r for r in RIGHT if r[0] != "mcp"]:
        texts = {str(workshop.check(exercise, answer, seed=s)) for s in SEEDS}
        assert len(texts) == 1, texts


def test_an_endless_mcp_answer_costs_one_time_limit() -> None:
    started = time.monotonic()
    report = workshop.check("mcp", _spin, seed=5, time_limit=0.5)
    assert "did not finish within 0.5 s" in str(report)
    assert time.monotonic() - started < 30  # the server's start, plus one time limit
