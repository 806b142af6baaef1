"""Tool specs from signatures, and every way a call can go wrong in the dispatcher."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

import agentnb as anb
from agentnb.tools import ToolRegistry, parse_docstring

S = anb.LoopState


class Color(str, Enum):  # noqa: UP042 - users write str enums like this
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    city: str


def test_schema_from_signature_and_docstring() -> None:
    @anb.tool(name="ship", risk="write", timeout=2.0)
    def ship(to: Address, color: Color, speed: Literal["slow", "fast"] = "slow", note: str | None = None) -> str:
        """Ship a parcel.

        Args:
            to: Where it goes.
            color: Wrapping paper colour,
                chosen by the customer.
            speed: How fast.
            note: Optional note.
        """
        return "ok"

    p = ship.parameters
    assert ship.description == "Ship a parcel."
    assert p["required"] == ["to", "color"]
    assert p["properties"]["speed"]["enum"] == ["slow", "fast"] and p["properties"]["speed"]["default"] == "slow"
    assert p["properties"]["to"]["description"] == "Where it goes."
    assert p["properties"]["color"]["description"] == "Wrapping paper colour, chosen by the customer."
    assert p["$defs"]["Color"]["enum"] == ["red", "blue"]
    assert set(p["$defs"]["Address"]["required"]) == {"street", "city"}
    assert p["additionalProperties"] is False
    assert ship.risk == "write" and ship.timeout == 2.0 and ship.needs_approval()


def test_bare_decorator_keeps_the_function_usable() -> None:
    @anb.tool
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    assert double(4) == 8 and double.name == "double" and repr(double) == "<agentnb.Tool double(x)>"


def test_approval_defaults_by_risk_and_accepts_a_policy() -> None:
    def f(x: int) -> int:
        return x

    assert not anb.tool(f).needs_approval()
    assert anb.tool(risk="dangerous")(f).needs_approval()
    assert not anb.tool(risk="write", approval=False)(f).needs_approval()
    policy = anb.tool(approval=lambda call, ctx: call.arguments["x"] > 10)(f)
    assert policy.info()["approval"] == "policy"


def test_docstring_parser_handles_types_and_sections() -> None:
    desc, params = parse_docstring("""Do it.

    More words.

    Args:
        a (int): first
        b: second
            continued
    Returns:
        nothing
    """)
    assert desc == "Do it.\n\nMore words."
    assert params == {"a": "first", "b": "second continued"}


@pytest.mark.parametrize(
    "fn",
    [lambda *args: None, lambda **kw: None],
)
def test_variadic_parameters_are_refused(fn: Callable[..., Any]) -> None:
    with pytest.raises(anb.ToolDefinitionError, match="name each parameter"):
        anb.tool(name="bad")(fn)


def test_bad_names_and_duplicates_are_refused() -> None:
    def f() -> None: ...

    with pytest.raises(anb.ToolDefinitionError, match="must be 1-64 characters"):
        anb.tool(name="has space")(f)
    with pytest.raises(anb.ToolDefinitionError, match="two tools are named 'f'"):
        ToolRegistry([f, f])


def test_context_parameter_is_hidden_from_the_model(make_loop: Callable[..., anb.Loop]) -> None:
    seen: list[anb.ToolContext] = []

    @anb.tool
    def whoami(ctx: anb.ToolContext, greeting: str = "hi") -> str:
        """Say who is calling."""
        seen.append(ctx)
        return f"{greeting} from {ctx.call_id}"

    assert list(whoami.parameters["properties"]) == ["greeting"]
    run = make_loop([{"tool_calls": [{"name": "whoami", "arguments": {}, "id": "c9"}]}, {"text": "ok"}], [whoami])
    run = run.start("q").run()
    assert run.state is S.COMPLETED and seen[0].call_id == "c9" and seen[0].run_id == run.run_id


def results(run: anb.Run) -> list[Any]:
    return [p for m in run.messages if m.role == "tool" for p in m.tool_results]


def test_unknown_tool_gets_an_error_listing_the_tools(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"tool_calls": [{"name": "sub", "arguments": {"a": 1}}]}, {"text": "sorry"}]).start("q").run()
    (r,) = results(run)
    assert r.status == "error" and "Unknown tool 'sub'" in r.content and "add, boom" in r.content
    rejected = [e for e in run.events if e.type == "CallRejected"]
    assert rejected[0].reason == "unknown_tool" and run.state is S.COMPLETED


@pytest.mark.parametrize("raw", ['{"a": 1, "b": ', "{'a': 1, 'b': 2}", '{"a": 1, "b": 2}}', "[1, 2]", '"text"'])
def test_malformed_json_is_never_repaired(make_loop: Callable[..., anb.Loop], raw: str) -> None:
    ran: list[Any] = []

    @anb.tool(name="add")
    def spy(a: int, b: int) -> int:
        """Add."""
        ran.append((a, b))
        return a + b

    run = make_loop([{"tool_calls": [{"name": "add", "arguments": raw}]}, {"text": "?"}], [spy]).start("q").run()
    (r,) = results(run)
    assert ran == [] and r.status == "error" and "not a valid JSON object" in r.content
    parsed = next(e for e in run.events if e.type == "CallParsed")
    assert parsed.arguments is None and parsed.error
    assert run.messages[1].tool_calls[0].arguments_raw == raw  # the raw text is kept exactly


def test_schema_errors_name_the_bad_fields(make_loop: Callable[..., anb.Loop]) -> None:
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": "one", "c": 3}}]}, {"text": "?"}]
    run = make_loop(script).start("q").run()
    (r,) = results(run)
    assert r.status == "error"
    rejected = next(e for e in run.events if e.type == "CallRejected")
    assert rejected.reason == "schema"
    assert {e["loc"] for e in rejected.errors} == {"a", "b", "c"}
    assert "- a:" in r.content and "- b: Field required" in r.content and "- c: Extra inputs" in r.content


def test_a_tool_that_raises_becomes_an_error_result_and_the_loop_goes_on(make_loop: Callable[..., anb.Loop]) -> None:
    script = [{"tool_calls": [{"name": "boom", "arguments": {"message": "disk full"}}]}, {"text": "it failed"}]
    run = make_loop(script).start("q").run()
    (r,) = results(run)
    assert r.status == "error" and r.content == "Tool 'boom' raised RuntimeError: disk full"
    finished = next(e for e in run.events if e.type == "ToolFinished")
    assert (finished.error_type, finished.error_message) == ("RuntimeError", "disk full")
    assert run.state is S.COMPLETED


def test_sync_tool_past_its_timeout_gets_a_timeout_result(make_loop: Callable[..., anb.Loop]) -> None:
    @anb.tool(timeout=0.05)
    def slow() -> str:
        """Sleep."""
        time.sleep(0.5)
        return "late"

    t0 = time.perf_counter()
    run = make_loop([{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "?"}], [slow]).start("q").run()
    (r,) = results(run)
    assert r.status == "timeout" and "within 0.05 s" in r.content
    assert time.perf_counter() - t0 < 0.45


def test_async_tool_with_timeout(make_loop: Callable[..., anb.Loop]) -> None:
    @anb.tool(timeout=0.05)
    async def slow_async() -> str:
        """Sleep."""
        await asyncio.sleep(1)
        return "late"

    @anb.tool
    async def fast_async(x: int) -> int:
        """Echo."""
        await asyncio.sleep(0)
        return x

    script = [
        {"tool_calls": [{"name": "slow_async", "arguments": {}}, {"name": "fast_async", "arguments": {"x": 7}}]},
        {"text": "ok"},
    ]
    run = make_loop(script, [slow_async, fast_async]).start("q").run()
    assert [(r.status, r.content) for r in results(run)][1] == ("ok", "7")
    assert results(run)[0].status == "timeout"


def test_async_tools_work_inside_a_running_event_loop(make_loop: Callable[..., anb.Loop]) -> None:
    """A notebook cell runs while Jupyter's event loop runs: run.run() must work there, without nest_asyncio."""

    @anb.tool
    async def fetch(url: str) -> str:
        """Fetch."""
        await asyncio.sleep(0.001)
        return f"<html>{url}</html>"

    async def cell() -> anb.Run:
        asyncio.get_running_loop()  # we are inside a running loop, like a notebook cell
        loop = make_loop([{"tool_calls": [{"name": "fetch", "arguments": {"url": "x"}}]}, {"text": "ok"}], [fetch])
        return loop.start("q").run()

    out: list[anb.Run] = []
    worker = threading.Thread(target=lambda: out.append(asyncio.run(cell())))  # a thread of its own, like a kernel
    worker.start()
    worker.join(30)
    (run,) = out
    assert run.state is S.COMPLETED and results(run)[0].content == "<html>x</html>"


def test_parallel_calls_are_answered_exactly_once_in_the_models_order(make_loop: Callable[..., anb.Loop]) -> None:
    script = [
        {"tool_calls": [
            {"name": "add", "arguments": {"a": 1, "b": 1}, "id": "c1"},
            {"name": "nope", "arguments": {}, "id": "c2"},
            {"name": "add", "arguments": "{bad", "id": "c3"},
            {"name": "boom", "arguments": {"message": "x"}, "id": "c4"},
            {"name": "add", "arguments": {"a": 2, "b": 2}, "id": "c5"},
        ]},
        {"text": "done"},
    ]
    run = make_loop(script).start("q").run()
    tool_msgs = [m for m in run.messages if m.role == "tool"]
    assert len(tool_msgs) == 1
    rs = tool_msgs[0].tool_results
    assert [r.call_id for r in rs] == ["c1", "c2", "c3", "c4", "c5"]
    assert [r.status for r in rs] == ["ok", "error", "error", "error", "ok"]
    assert [r.content for r in rs if r.status == "ok"] == ["2", "4"]
    bound = next(e for e in run.events if e.type == "ResultsBound")
    assert bound.call_ids == ["c1", "c2", "c3", "c4", "c5"]


def test_missing_and_duplicate_ids_are_generated_and_used_on_both_sides(make_loop: Callable[..., anb.Loop]) -> None:
    script = [
        {"tool_calls": [
            {"name": "add", "arguments": {"a": 1, "b": 1}, "id": None},
            {"name": "add", "arguments": {"a": 2, "b": 2}, "id": "dup"},
            {"name": "add", "arguments": {"a": 3, "b": 3}, "id": "dup"},
        ]},
        {"text": "done"},
    ]
    run = make_loop(script).start("q").run()
    call_ids = [c.call_id for c in run.messages[1].tool_calls]
    result_ids = [r.call_id for r in run.messages[2].tool_results]
    assert call_ids == result_ids and len(set(call_ids)) == 3 and call_ids[1] == "dup"
    assert all(cid for cid in call_ids)
    assert [r.content for r in run.messages[2].tool_results] == ["2", "4", "6"]


def test_tool_values_are_rendered_as_json_for_the_model_and_kept_for_audit(make_loop: Callable[..., anb.Loop]) -> None:
    @anb.tool
    def info() -> dict[str, Any]:
        """Info."""
        return {"n": 1, "when": Address(street="Main", city="Oslo")}

    run = make_loop([{"tool_calls": [{"name": "info", "arguments": {}}]}, {"text": "ok"}], [info]).start("q").run()
    (r,) = results(run)
    assert json.loads(r.content) == {"n": 1, "when": {"street": "Main", "city": "Oslo"}}
    assert r.audit == {"n": 1, "when": {"street": "Main", "city": "Oslo"}}


# -- schemas keep what users wrote -------------------------------------------------------------------------


def test_annotated_field_keeps_description_examples_and_constraints() -> None:
    @anb.tool
    def refund(
        amount: Annotated[int, Field(ge=1, le=500, description="Cents to refund.", examples=[250])],
        reason: Annotated[str, Field(max_length=40)] = "damaged",
        note: str = Field(default="", description="Shown to the customer.", examples=["sorry"]),
    ) -> str:
        """Refund an order.

        Args:
            amount: ignored, the Field's description wins.
            reason: Why the refund is made.
        """
        return "ok"

    props = refund.parameters["properties"]
    assert props["amount"] == {"description": "Cents to refund.", "examples": [250], "maximum": 500, "minimum": 1,
                               "title": "Amount", "type": "integer"}
    assert props["reason"]["description"] == "Why the refund is made." and props["reason"]["maxLength"] == 40
    assert props["note"]["description"] == "Shown to the customer." and props["note"]["examples"] == ["sorry"]
    assert refund.parameters["required"] == ["amount"]
    with pytest.raises(ValidationError):
        refund.validate({"amount": 0})
    assert refund.dump(refund.validate({"amount": 3})) == {"amount": 3, "reason": "damaged", "note": ""}


SPHINX = """Ship a parcel.

:param to: Where it goes.
:type to: str
:param weight: Weight in
    kilograms.
:returns: the tracking number.
"""

NUMPY = """Ship a parcel.

Parameters
----------
to : str
    Where it goes.
weight : float
    Weight in
    kilograms.

Returns
-------
str
    the tracking number.
"""

EPYTEXT = """Ship a parcel.

@param to: Where it goes.
@param weight: Weight in
    kilograms.
@return: the tracking number.
"""

GOOGLE = """Ship a parcel.

Args:
    to (str): Where it goes.
    weight: Weight in
        kilograms.

Returns:
    the tracking number.
"""


@pytest.mark.parametrize("doc", [GOOGLE, SPHINX, NUMPY, EPYTEXT], ids=["google", "sphinx", "numpy", "epytext"])
def test_docstrings_in_every_common_style(doc: str) -> None:
    def ship(to: str, weight: float) -> str:
        return "T1"

    ship.__doc__ = doc
    t = anb.tool(ship)
    assert t.description == "Ship a parcel."
    props = t.parameters["properties"]
    assert props["to"]["description"] == "Where it goes."
    assert props["weight"]["description"] == "Weight in kilograms."


@pytest.mark.parametrize("name", ["model_config", "model_fields", "model_dump", "json", "copy", "schema", "_private"])
def test_parameter_names_that_clash_with_pydantic_reach_the_model_and_the_tool(name: str) -> None:
    seen: dict[str, Any] = {}
    namespace: dict[str, Any] = {"seen": seen}
    exec(  # a function with the clashing parameter name, written as a user would
        f"def configure({name}: str, level: int = 1) -> str:\n"
        f"    '''Configure.\n\n    Args:\n        {name}: The setting.\n    '''\n"
        f"    seen.update({name}={name}, level=level)\n"
        f"    return 'done'\n",
        namespace,
    )
    t = anb.tool(namespace["configure"])
    assert list(t.parameters["properties"]) == [name, "level"] and t.parameters["required"] == [name]
    assert t.parameters["properties"][name]["description"] == "The setting."
    assert repr(t) == f"<agentnb.Tool configure({name}, level)>"
    validated = t.validate({name: "on"})
    assert t.dump(validated) == {name: "on", "level": 1}
    model = anb.ScriptedModel([{"tool_calls": [{"name": "configure", "arguments": {name: "on", "level": 2}}]},
                               {"text": "ok"}])
    run = anb.Loop(model=model, tools=[t]).start("go").run()
    [done] = [e for e in run.events if e.type == "ToolFinished"]
    assert done.status == "ok" and seen == {name: "on", "level": 2}
    assert t(**{name: "direct"}) == "done" and seen[name] == "direct"  # still callable as written


def test_an_async_tool_with_a_clashing_parameter_name_is_still_awaited() -> None:
    @anb.tool
    async def lookup(model_config: str) -> str:
        """Look a setting up."""
        await asyncio.sleep(0)
        return f"value of {model_config}"

    assert lookup.is_async
    model = anb.ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"model_config": "a"}}]},
                               {"text": "ok"}])
    run = anb.Loop(model=model, tools=[lookup]).start("go").run()
    [done] = [e for e in run.events if e.type == "ToolFinished"]
    assert done.status == "ok" and done.value == "value of a"


def test_validating_the_dict_a_validation_made_answers_from_it_unless_it_changed() -> None:
    @anb.tool
    def pay(order: str, cents: int = 5) -> str:
        """Pay."""
        return order

    first = pay.validate({"order": "o1"})
    data = pay.dump(first)
    assert data == {"order": "o1", "cents": 5}
    assert pay.validate(data) is first  # the tool port validates what the log recorded: no second pydantic pass
    assert pay.validate(dict(data)) is not first  # an equal dict that is another object is validated again
    assert dataclasses.replace(pay, description="Pay now.").validate(data) is not first  # a copy keeps no memo
    data["cents"] = "x"  # changed in place after the dump: validated again, and refused
    with pytest.raises(ValidationError):
        pay.validate(data)


def test_a_rejection_of_thousands_of_bad_fields_stays_short_and_counts_them() -> None:
    """An MCP server's schema can fail in 4,999 places at once; the model reads a few lines, not 119,000 characters."""
    from pydantic_core import InitErrorDetails, PydanticCustomError

    from agentnb._outcomes import KEPT_ERRORS, SHOWN_ERRORS, describe_errors

    details = [InitErrorDetails(type=PydanticCustomError("missing", "Field required " + "x" * 1000), loc=(f"f{i}",),
                                input={}) for i in range(4999)]
    exc = ValidationError.from_exception_data("Wide", details)
    message, errors = describe_errors("wide", exc)
    assert len(message) < 12_000 and message.count("\n") == SHOWN_ERRORS + 1
    assert message.endswith("- ... and 4,979 more (4,999 fields in all)")
    assert len(errors) == KEPT_ERRORS + 1 and errors[-1]["msg"] == "4,899 more errors not kept"
    assert all(len(e["msg"]) < 400 for e in errors)


def test_a_local_tool_with_many_missing_arguments_is_rejected_in_a_few_lines() -> None:
    params = ", ".join(f"f{i}: int" for i in range(60))
    namespace: dict[str, Any] = {}
    exec(f"def wide_tool({params}) -> str:\n    \"\"\"Take many.\"\"\"\n    return 'x'", namespace)  # noqa: S102
    wide_tool = anb.tool(namespace["wide_tool"])
    script = [{"tool_calls": [{"name": "wide_tool", "arguments": {}}]}, {"text": "ok"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[wide_tool]).start("go").run()
    rejected = next(e for e in run.events if e.type == "CallRejected")
    assert "40 more (60 fields in all)" in rejected.message, rejected.message
    assert rejected.message.count("\n") == 21 and len(rejected.errors) == 60
