"""Strict tool schemas: made from ordinary type hints, refused at definition time when impossible, enforced."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

import pydantic
import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from agentnb.providers import openai_chat, openai_responses
from agentnb.states import LoopState as S


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
    "anthropic": (anb.AnthropicModel, {"model": "claude-sonnet-4-6"}, False),
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
    # strict mode constrains the service's decoding: the call fits its schema and runs (OpenAI's APIs); the
    # others have no strict flag, so the schema is only a description there
    assert outcomes["search"] == (["ToolFinished"] if enforced else ["CallRejected"])
