"""Strict tool schemas: made from ordinary type hints, refused at definition time when impossible, enforced."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Annotated, Any

import jsonschema
import openai
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.emulator import Emulator
from agentnb.emulator._instance import minimal_instance
from agentnb.providers import openai_chat, openai_responses


class Address(pydantic.BaseModel):
    street: str
    city: str | None = None


@anb.tool(strict=True)
def search(query: str, limit: int = 10, address: Address | None = None) -> str:
    """Search the catalogue.

    Args:
        query: what to look for.
        limit: how many results.
        address: where to ship.
    """
    return f"{query}:{limit}"


@anb.tool
def loose_search(query: str, limit: int = 10) -> str:
    """Search, not strict."""
    return f"{query}:{limit}"


def test_a_strict_schema_requires_everything_and_makes_optional_fields_nullable() -> None:
    p = search.parameters
    assert p["required"] == ["query", "limit", "address"] and p["additionalProperties"] is False
    assert p["properties"]["limit"]["type"] == ["integer", "null"]
    assert "(default: 10)" in p["properties"]["limit"]["description"]
    assert "default" not in p["properties"]["limit"]
    nested = p["$defs"]["Address"]
    assert nested["required"] == ["street", "city"] and nested["additionalProperties"] is False
    assert search.strict and search.info()["strict"] is True
    for render in (openai_chat.render_tool, openai_responses.render_tool):  # the adapters' own strict check passes
        rendered = render(anb.Loop(model=anb.ScriptedModel([]), tools=[search]).registry.infos[0])
        assert rendered.get("strict", rendered.get("function", {}).get("strict")) is True


def test_null_means_the_default_and_the_tool_gets_it() -> None:
    assert search.validate({"query": "kettle", "limit": None, "address": None}).limit == 10
    with pytest.raises(pydantic.ValidationError):
        search.validate({"query": None, "limit": 3, "address": None})  # a required field is not nullable


@pytest.mark.parametrize(("annotation", "field", "why"), [
    ("dict[str, int]", "counts", "mapping with free keys"),
    ("tuple[int, str]", "pair", "tuple"),
])
def test_signatures_that_cannot_be_strict_are_refused_naming_the_field(annotation: str, field: str, why: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def f({field}: {annotation}) -> str:\n    '''Doc.'''\n    return ''", namespace)
    with pytest.raises(anb.ToolDefinitionError, match=f"field '{field}'.*{why}"):
        anb.tool(strict=True)(namespace["f"])
    anb.tool(namespace["f"])  # the same function is fine without strict


def _define(source: str) -> Any:
    namespace: dict[str, Any] = {"Any": Any, "Annotated": Annotated, "pydantic": pydantic, "Loose": Loose}
    exec(f"def f({source}) -> str:\n    '''Doc.'''\n    return ''", namespace)
    return namespace["f"]


class Loose(pydantic.BaseModel):
    payload: Any


@pytest.mark.parametrize(("source", "named"), [
    ("x", "parameter 'x' has no type annotation"),
    ("x=3", "parameter 'x' has no type annotation"),
    ("x: Any", "parameter 'x' is annotated Any"),
    ("x: object = None", "parameter 'x' is annotated object"),
    ("x: Annotated[Any, pydantic.Field(description='anything')]", "parameter 'x' is annotated Any"),
])
def test_a_parameter_of_no_type_is_refused_in_strict_mode_naming_it_and_the_fix(source: str, named: str) -> None:
    with pytest.raises(anb.ToolDefinitionError, match=f"tool 'f': {named}.*annotate it, for example `x: str`"):
        anb.tool(strict=True)(_define(source))
    assert anb.tool(_define(source)).parameters["properties"]["x"].get("type") is None  # fine without strict


@pytest.mark.parametrize(("source", "field"), [("xs: list[Any]", "xs[]"), ("m: Loose", "$defs.Loose.payload")])
def test_a_value_of_no_type_inside_a_parameter_is_refused_naming_the_field(source: str, field: str) -> None:
    with pytest.raises(anb.ToolDefinitionError, match=rf"field '{re.escape(field)}' cannot be strict: it has no type"):
        anb.tool(strict=True)(_define(source))


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


PROVIDERS = {
    "openai_chat": (anb.OpenAIChatModel, {"model": "gpt-4.1"}, True),
    "openai_responses": (anb.OpenAIResponsesModel, {"model": "gpt-5", "store": False}, True),
    "anthropic": (anb.AnthropicModel, {"model": "claude-sonnet-4-6"}, True),
    "gemini": (anb.GeminiModel, {"model": "gemini-3-pro-preview"}, False),
}
BAD = {"query": 42, "limit": "many", "extra": True}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_the_difference_strict_makes_on_each_wire_api(emu: Emulator, provider: str) -> None:
    cls, options, enforced = PROVIDERS[provider]
    outcomes = {}
    for tool in (search, loose_search):
        emu.play([{"tool_calls": [{"name": tool.name, "arguments": BAD}]}, {"text": "done"}])
        start = len(emu.requests)
        run = anb.Loop(model=cls(emu.client(provider), **options), tools=[tool],
                       retry_base_delay=0).start("Find a kettle").run()
        assert run.state is S.COMPLETED, (run.reason, [r.error for r in emu.requests[start:]])
        assert all(r.status == 200 for r in emu.requests[start:])
        outcomes[tool.name] = [e.type for e in run.events if e.type in ("ToolFinished", "CallRejected")]
    assert outcomes["loose_search"] == ["CallRejected"]  # the model's bad arguments reach the loop: a schema error
    # strict mode constrains the service's decoding: the call fits its schema and runs (OpenAI's APIs and
    # Anthropic's strict tool use); Gemini has no strict flag, so the schema is only a description there
    assert outcomes["search"] == (["ToolFinished"] if enforced else ["CallRejected"])


# -- the emulator's own calls fit the schema: pattern and exclusive bounds ---------------------------------------


@anb.tool(strict=True)
def reserve(code: Annotated[str, pydantic.Field(pattern=r"^[A-Z]{2}-\d{3}$")],
            seats: Annotated[int, pydantic.Field(gt=0, lt=10)],
            share: Annotated[float, pydantic.Field(gt=0, lt=1)],
            note: Annotated[str, pydantic.Field(min_length=3, max_length=5)]) -> str:
    """Reserve seats on a flight."""
    return f"{code}: {seats}"


def test_strict_arguments_the_emulator_repairs_fit_pattern_and_exclusive_bounds(emu: Emulator) -> None:
    bad = {"code": "nope", "seats": 0, "share": 1, "note": ""}
    for provider in ("openai_chat", "openai_responses"):
        cls, options, _ = PROVIDERS[provider]
        emu.play([{"tool_calls": [{"name": "reserve", "arguments": bad}]}, {"text": "done"}])
        run = anb.Loop(model=cls(emu.client(provider), **options), tools=[reserve]).start("Reserve").run()
        assert [e.type for e in run.events if e.type in ("ToolFinished", "CallRejected")] == ["ToolFinished"]
        [call] = [p for m in run.transcript.messages for p in m.tool_calls]
        jsonschema.validate(call.arguments, reserve.parameters)


def test_a_call_the_emulator_forces_fits_pattern_and_exclusive_bounds(emu: Emulator) -> None:
    emu.play([{"text": "no call"}])
    tool: Any = openai_chat.render_tool(anb.Loop(model=anb.ScriptedModel([]), tools=[reserve]).registry.infos[0])
    answer = openai.OpenAI(base_url=emu.url("openai"), api_key="offline", max_retries=0).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Reserve"}], tools=[tool], tool_choice="required")
    [call] = answer.choices[0].message.tool_calls or []
    arguments = json.loads(call.function.arguments)  # type: ignore[union-attr]
    jsonschema.validate(arguments, reserve.parameters)
    assert reserve.validate(arguments).seats == 1


def test_a_pattern_the_emulator_cannot_satisfy_is_refused_by_name_not_sent() -> None:
    @anb.tool(strict=True)
    def login(password: Annotated[str, pydantic.Field(pattern=r"^[^\w\s.@-]{8,}$")]) -> str:  # symbols only
        """Log in."""
        return "ok"

    tool: Any = openai_chat.render_tool(anb.Loop(model=anb.ScriptedModel([]), tools=[login]).registry.infos[0])
    with Emulator([{"text": "no call"}]) as e:
        client = openai.OpenAI(base_url=e.url("openai"), api_key="offline", max_retries=2)
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Log in"}],
                                           tools=[tool], tool_choice="required")
        assert info.value.response.headers["x-should-retry"] == "false" and len(e.requests) == 1
        message = str(info.value)
        assert "'login'" in message and "$.password" in message and "script this call's arguments" in message


COMMON_PATTERNS = [r"^[A-Z]{2}-\d{3}$", r"^\+?[1-9]\d{1,14}$", r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", r"\d",
                   r"^[a-z0-9]+(?:-[a-z0-9]+)*$", r"^(foo|bar|baz)$", r"^\d{4}-\d{2}-\d{2}$", r"^[A-Fa-f0-9]{6}$",
                   r"^[A-Za-z_][A-Za-z0-9_]*$", r"^(?:https?://)?[\w.-]+(?:\.[\w.-]+)+$", r"^[\w.]{3,}$",
                   r"^v\d+(\.\d+){2}$", r"^(a)(b)\2\1$", r"^\S+$", r"^[^,]*,[^,]*$", r".", r"^$", r"^x?$",
                   r"^(?=.*\d).+$"]
bounds = st.one_of(st.none(), st.integers(-50, 50), st.floats(-50, 50, allow_nan=False).map(lambda x: round(x, 2)))


@st.composite
def schemas(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "integer", "number"]))
    schema: dict[str, Any] = {"type": kind}
    if kind == "string":
        if draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(COMMON_PATTERNS))
        for key in ("minLength", "maxLength"):
            if draw(st.booleans()):
                schema[key] = draw(st.integers(0, 12))
        return schema
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        value = draw(bounds)
        if value is not None and (key != "multipleOf" or value > 0):
            schema[key] = value
    return schema


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=st.dictionaries(st.sampled_from(["a", "b", "c"]), schemas(), min_size=1, max_size=3))
def test_what_the_emulator_makes_up_fits_the_schema_or_is_refused_naming_the_field(fields: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}
    try:
        value = minimal_instance(schema)
    except ValueError as exc:
        assert "script this call's arguments" in str(exc) and any(f"$.{k}" in str(exc) for k in fields)
        return
    jsonschema.Draft202012Validator(schema).validate(value)
