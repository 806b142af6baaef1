"""The conformance suite every wire API of the registry passes (a new API is covered by registering it).

For each :class:`~agentnb.providers._wireapi.WireAPI` in :data:`agentnb.providers.WIRE_APIS`:

- the record is whole and consistent (names, prefixes, routes and URL names unique across the registry;
  the SDK model speaks this API);
- the recorded corpus (``tests/fixtures/wire``, a copy of ``/work/shared/fixtures/wire``), where the API has
  one, parses to its expected outcome through the registry's ``parse_response``/``parse_stream``;
- the official SDK client round-trips through the local emulator (127.0.0.1), whole and streamed: a call,
  its result, an answer;
- every lint rule reports its own failing example and nothing on its passing example; a rule with a fix
  repairs its failing example;
- a conversation this API renders reads back (``parse_history``) to the same messages and tools, and lints
  clean.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentnb as anb
from agentnb._findings import run_rule
from agentnb._lint import lint
from agentnb._messages import Message, ModelTurn, TextPart, ToolCallPart, ToolResultPart
from agentnb.events import ToolInfo
from agentnb.providers import WIRE_APIS, WireAPI
from tests.test_wire_corpus import EXPECTED
from tests.test_wire_corpus import WIRE as CORPUS
from tests.test_wire_corpus import events as corpus_events

APIS = list(WIRE_APIS.values())
NAMES = [api.name for api in APIS]


def corpus_api(folder: str) -> WireAPI | None:
    """The wire API a corpus folder (``openai-chat``, ``anthropic``, ...) records: by name or by prefix."""
    return next((api for api in APIS if folder in (api.name, *api.prefixes)), None)


# -- the record -------------------------------------------------------------------------------------------


def test_names_prefixes_and_urls_are_unique_across_the_registry() -> None:
    assert all(key == api.name for key, api in WIRE_APIS.items())
    prefixes = [p for api in APIS for p in api.prefixes]
    urls = [n for api in APIS for n in api.emulator.url_names]
    assert len(prefixes) == len(set(prefixes)) and len(urls) == len(set(urls))


@pytest.mark.parametrize("api", APIS, ids=NAMES)
def test_the_record_is_whole(api: WireAPI) -> None:
    assert api.title and api.list_key and api.prefixes and api.sdk_extra
    assert api.api_key_env or not api.needs_key, "an API that needs a key names its environment variables"
    assert len(api.where) == 3 and all(api.where)
    assert api.model_class.provider == api.name
    assert api.model_class.adapter.render_request is api.render_request
    assert api.rules, "a wire API declares its lint rules"
    assert api.emulator.route(api.emulator.mount + "/no-such-route") is None
    assert api.render_request([Message.user("Hi")]) == api.render_request([Message.user("Hi")])


# -- the recorded corpus ------------------------------------------------------------------------------------


def test_every_corpus_folder_is_a_registered_api() -> None:
    assert {p.split("/")[0] for p in EXPECTED} <= {p.split("/")[0] for p in EXPECTED if corpus_api(p.split("/")[0])}


@pytest.mark.parametrize("api", APIS, ids=NAMES)
def test_the_recorded_corpus_parses(api: WireAPI) -> None:
    cases = [p for p in sorted(EXPECTED) if corpus_api(p.split("/")[0]) is api]
    if not cases:
        pytest.skip(f"no recorded corpus for {api.name} in {CORPUS}")
    for path in cases:
        exp = EXPECTED[path]["expected"]
        items = corpus_events(path)
        if EXPECTED[path]["format"] == "json":
            turn = api.parse_response(items[0])
        else:
            *deltas, turn = list(api.parse_stream(items))
            assert not any(isinstance(d, ModelTurn) for d in deltas)
        assert isinstance(turn, ModelTurn) and turn.complete and turn.provider == api.name, path
        assert (turn.finish_reason_raw, turn.model) == (exp["finish_reason"], exp["model"]), path
        assert (turn.message.text or None) == exp["text"], path
        assert [(c.name, c.arguments) for c in turn.message.tool_calls] == [
            (c["name"], c["arguments"]) for c in exp["tool_calls"]], path


# -- SDK round trips through the emulator ---------------------------------------------------------------------


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


SCRIPT = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "1 + 2 = 3."}]


@pytest.fixture(scope="module")
def emu() -> Any:
    with anb.emulator.Emulator() as e:
        yield e


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS, ids=NAMES)
def test_the_sdk_round_trips_through_the_emulator(emu: Any, api: WireAPI, stream: bool) -> None:
    if api.emulator.client is None:
        pytest.skip(f"{api.name} has no emulator client")
    emu.play(SCRIPT)
    start = len(emu.requests)
    client = emu.client(api.emulator.url_names[0])
    model = api.model_class(client, model=f"{api.name}-test", stream=stream)
    run = anb.Loop(model=model, tools=[add]).start("Add 1 and 2.").run()
    assert (run.state.value, run.output) == ("COMPLETED", "1 + 2 = 3."), run.reason
    logged = emu.requests[start:]
    assert [(r.provider, r.status, r.stream) for r in logged] == [(api.name, 200, stream)] * 2
    second = api.parse_history(api.normalize(logged[1].body)[0])  # what the emulator's script saw
    assert [r.content for m in second.messages for r in m.tool_results] == ["3"]


# -- lint rules ---------------------------------------------------------------------------------------------


def _rule_cases() -> list[Any]:
    return [pytest.param(api, k, id=f"{api.name}-{k}-{rule.code}") for api in APIS for k, rule in enumerate(api.rules)]


@pytest.mark.parametrize(("api", "k"), _rule_cases())
def test_each_rule_fails_its_bad_example_and_passes_its_good_one(api: WireAPI, k: int) -> None:
    rule = api.rules[k]
    assert rule.refuses is not None and rule.accepts is not None, f"{rule.code}: give refuses= and accepts="
    bad = run_rule(rule, api.view(api.normalize(rule.refuses)[0], rule.context))
    assert bad and {f.code for f in bad} <= set(rule.reports()), bad
    good = run_rule(rule, api.view(api.normalize(rule.accepts)[0], rule.context))
    assert good == [], good
    if rule.fix is not None and rule.context is None:
        fixed, changes = lint(rule.refuses, api.name, fix=True)
        assert changes
        body = {**rule.refuses, api.list_key: fixed}
        assert run_rule(rule, api.view(api.normalize(body)[0], None)) == []


# -- import of its own rendered histories ----------------------------------------------------------------------


def _call(cid: str, city: str) -> ToolCallPart:
    return ToolCallPart(call_id=cid, name="get_weather", arguments_raw=json.dumps({"city": city}),
                        arguments={"city": city})


CONVERSATION = [
    Message.system("Be brief."),
    Message.user("Weather in Paris and Oslo?"),
    Message(role="assistant", parts=(TextPart(text="Checking."), _call("c1", "Paris"), _call("c2", "Oslo"))),
    Message(role="tool", parts=(
        ToolResultPart(call_id="c1", name="get_weather", status="ok", content='{"temp_c": 18}'),
        ToolResultPart(call_id="c2", name="get_weather", status="ok", content='{"temp_c": 7}'),
    )),
    Message.assistant("Paris 18 °C, Oslo 7 °C."),
]
TOOLS = [ToolInfo(name="get_weather", description="The weather in a city.",
                  parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})]


def _shape(messages: list[Message]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                out.append((m.role, "call", p.name, p.arguments))
            elif isinstance(p, ToolResultPart):
                out.append((m.role, "result", p.name, p.content))
            elif isinstance(p, TextPart):
                out.append((m.role, "text", p.text))
    return out


@pytest.mark.parametrize("api", APIS, ids=NAMES)
def test_a_rendered_history_reads_back_to_the_same_conversation(api: WireAPI) -> None:
    body = api.render_request(CONVERSATION, TOOLS, model=f"{api.name}-test")
    clean, malformed = api.normalize(body)
    assert malformed == []
    history = api.parse_history(clean)
    assert _shape(history.messages) == _shape(CONVERSATION)
    assert [(t.name, t.description) for t in history.tools] == [(t.name, t.description) for t in TOOLS]
    assert history.findings == []
    assert [f for f in lint(body, api.name) if f.severity == "error"] == []
    # the importer is the same function, with the same findings
    system = body.get(api.system_key) if api.system_key else None
    imported = anb.import_history(body[api.list_key], api.name, system=system)  # type: ignore[arg-type]
    assert _shape(imported.messages) == _shape(CONVERSATION) and imported.ok, imported.findings
