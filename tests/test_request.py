"""agentnb._request: the typed request a model is asked, its options, and where they come from."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._engine import EngineConfig, RunState
from agentnb._engine.inputs import request_for
from agentnb._messages import Message, ToolCallPart, ToolResultPart
from agentnb._request import (
    NO_OPTIONS,
    ModelRequest,
    NamedTool,
    OutputSchema,
    RequestOptions,
    split_options,
    tool_choice_of,
)
from agentnb._states import LoopState as S
from agentnb.emulator import Emulator
from agentnb.events import ToolInfo
from agentnb.providers import WIRE_APIS
from agentnb.tools import ToolRegistry
from tests.conftest import add

CORE = {"agentnb._messages", "agentnb.events", "agentnb._states"}
ADD = ToolRegistry([add]).infos[0]


def test_the_request_module_imports_only_core_types() -> None:
    tree = ast.parse((Path(anb.__file__).parent / "_request.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add(("agentnb." if node.level else "") + (node.module or ""))
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    ours = {m for m in imported if m.startswith("agentnb")}
    assert ours and ours <= CORE, ours - CORE
    assert anb.ModelRequest is ModelRequest and anb.RequestOptions is RequestOptions


# -- typed options refuse what is not one ------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "message"), [
    ({"tool_choice": "sometimes"}, "tool_choice='sometimes' is not a tool choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, r"settings\['extra'\]"),
    ({"tool_choice": {"name": "f"}}, "give a NamedTool, not its recorded form"),
    ({"parallel_tool_calls": "no"}, "parallel_tool_calls='no': use True, False or None"),
    ({"output": {"name": "A", "schema": {}}}, "use an OutputSchema"),
    ({"finalize": 1}, "finalize=1"),
])
def test_options_that_are_not_known_values_are_refused_when_made(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RequestOptions(**fields)


@pytest.mark.parametrize(("settings", "message"), [
    ({"tool_choice": "any_tool"}, "tool_choice='any_tool' is not a tool choice"),
    ({"tool_choice": {"name": ""}}, "needs a tool name"),
    ({"parallel_tool_calls": 0}, "parallel_tool_calls=0"),
    ({"output_schema": {"schema": {}}}, "is not an output schema"),
    ({"output_schema": {"name": "A", "schema": "object"}}, "must be a JSON-schema object"),
])
def test_a_bad_option_in_the_settings_is_refused_when_the_request_is_built(settings: dict[str, Any],
                                                                          message: str) -> None:
    cfg = EngineConfig(registry=ToolRegistry([add]), settings={"temperature": 0, **settings})
    with pytest.raises(ValueError, match=message):
        request_for(RunState(), cfg, "run_x")
    with pytest.raises(ValueError, match=message):  # and the Loop refuses it before any run starts
        anb.Loop(model=anb.ScriptedModel([]), tools=[add], settings=settings)


def test_the_recorded_form_reads_back_to_the_same_options() -> None:
    recorded = {"tool_choice": {"name": "add"}, "parallel_tool_calls": False,
                "output_schema": {"name": "A", "schema": {"type": "object"}, "strict": True}}
    options, rest = split_options({**recorded, "temperature": 0.2, "extra": {"seed": 1}})
    assert options == RequestOptions(NamedTool("add"), False, OutputSchema("A", {"type": "object"}, strict=True))
    assert rest == {"temperature": 0.2, "extra": {"seed": 1}}
    assert options.to_settings() == recorded
    assert split_options({"max_tokens": 5}) == (NO_OPTIONS, {"max_tokens": 5})
    assert [tool_choice_of(c) for c in ("auto", "none", "required", "any")] == ["auto", "none", "required",
                                                                                "required"]


def test_a_request_option_passed_to_an_adapter_as_a_setting_is_refused() -> None:
    for api in WIRE_APIS.values():
        with pytest.raises(ValueError, match="tool_choice is a request option"):
            api.render_request([Message.user("x")], [ADD], tool_choice="none")


# -- the engine builds typed requests; the events record what they did -------------------------------------


def test_request_for_types_the_loop_settings_and_keeps_the_events_as_they_were() -> None:
    seen: list[ModelRequest] = []

    class Spy(anb.ScriptedModel):
        def respond(self, request: ModelRequest) -> Any:
            seen.append(request)
            return super().respond(request)

    script: list[Any] = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "3"}]
    loop = anb.Loop(model=Spy(script), tools=[add], tool_choice="required", parallel_tool_calls=False,
                    settings={"temperature": 0}, max_turns=1)
    run = loop.start("Add.").run()
    assert run.state is S.COMPLETED
    first, last = seen
    assert first.options == RequestOptions("required", False)
    assert last.options == RequestOptions("none", False, finalize=True)
    assert first.settings == last.settings == {"temperature": 0}  # only the pass-through parameters
    assert [t.name for t in last.tools] == [] and [t.name for t in last.run_tools] == ["add"]
    requested = [e for e in run.events if e.type == "ModelRequested"]
    assert [e.settings for e in requested] == [  # the events record the settings as before, options included
        {"temperature": 0, "tool_choice": "required", "parallel_tool_calls": False},
        {"temperature": 0, "tool_choice": "none", "parallel_tool_calls": False}]
    started = run.events[0]
    assert started.settings["request"] == {"temperature": 0, "tool_choice": "required", "parallel_tool_calls": False}


def test_native_output_is_a_typed_schema_and_a_policy_choice_wins_over_the_fixed_one() -> None:
    import pydantic

    class Answer(pydantic.BaseModel):
        n: int

    seen: list[ModelRequest] = []

    class Spy(anb.ScriptedModel):
        def respond(self, request: ModelRequest) -> Any:
            seen.append(request)
            return super().respond(request)

    script: list[Any] = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": '{"n": 3}'}]
    run = anb.Loop(model=Spy(script), tools=[add], output_type=Answer, output_mode="native",
                   tool_choice=lambda rs: {"name": "add"} if rs.turn == 0 else "auto").start("Add.").run()
    assert run.state is S.COMPLETED and run.output == Answer(n=3)
    assert [r.options.tool_choice for r in seen] == [NamedTool("add"), "auto"]
    output = seen[0].options.output
    assert output is not None and output.name == "final_result" and output.strict
    assert output.schema["properties"]["n"] == {"type": "integer"}
    assert all("output_schema" not in r.settings for r in seen)


# -- no per-run memory in the SDK models ------------------------------------------------------------------


def _tool_history() -> list[Message]:
    call = ToolCallPart(call_id="toolu_1", name="add", arguments_raw='{"a": 1, "b": 2}', arguments={"a": 1, "b": 2})
    return [Message.user("Add."), Message(role="assistant", parts=(call,)),
            Message(role="tool", parts=(ToolResultPart(call_id="toolu_1", name="add", status="ok", content="3"),)),
            Message.user("Answer now.")]


def test_a_fresh_anthropic_model_renders_the_run_tools_on_a_finalize_turn() -> None:
    anthropic = pytest.importorskip("anthropic")
    other = ToolInfo(name="other", description="Another run's tool.", parameters={"type": "object"})
    model = anb.AnthropicModel(anthropic.Anthropic(api_key="k"), model="claude-sonnet-4-6")
    # another run's request first: nothing of it may leak into this run's finalization turn
    model.render(ModelRequest(messages=[Message.user("hi")], tools=[other], run_id="run_other"))
    finalize = ModelRequest(messages=_tool_history(), tools=[], run_tools=[ADD], run_id="run_new",
                            options=RequestOptions(tool_choice="none", finalize=True))
    body = model.render(finalize)
    assert body["tools"] == [{"name": "add", "description": ADD.description, "input_schema": ADD.parameters}]
    assert ADD.description
    assert body["tool_choice"] == {"type": "none"}
    assert not any(isinstance(v, dict) and "run_other" in v for v in vars(model).values())  # no per-run table
    # without the run's tools (a request someone made by hand) the history still gets minimal definitions
    bare = model.render(ModelRequest(messages=_tool_history(), tools=[]))
    assert bare["tools"] == [{"name": "add", "description": "", "input_schema": {"type": "object"}}]


def test_a_resumed_run_finalizes_with_its_tools_through_a_model_that_never_saw_it(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")

    @anb.tool(approval=True, risk="write")
    def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    with Emulator() as emu:
        def loop() -> anb.Loop:  # a new model (and client) each time: a new process, as far as the model knows
            model = anb.AnthropicModel(emu.client("anthropic"), model="claude-sonnet-4-6")
            return anb.Loop(model=model, tools=[refund], max_turns=1, store=tmp_path / "runs.db")

        emu.play([{"tool_calls": [{"name": "refund", "arguments": {"order_id": "42"}}]}, {"text": "Refunded."}])
        first = loop().start("Refund order 42").run()
        assert first.state is S.WAITING_APPROVAL
        run = anb.Run.resume(first.run_id, loop=loop())
        run.approve(run.pending_approvals()[0].call_id)
        run.run()
        assert run.state is S.COMPLETED, run.reason
        last = emu.requests[-1].body
    REFUND = ToolRegistry([refund]).infos[0]
    assert last["tool_choice"] == {"type": "none"}
    assert last["tools"] == [{"name": "refund", "description": REFUND.description,
                              "input_schema": REFUND.parameters}]


# -- what each wire API makes of the options (the same bodies as when they were settings) -------------------

F = ToolInfo(name="f", description="d", parameters={"type": "object"})
A = OutputSchema("A", {"type": "object"}, strict=True)
OPTIONS = {"none": RequestOptions("none"), "required": RequestOptions("required"),
           "named": RequestOptions(NamedTool("f")), "serial": RequestOptions(parallel_tool_calls=False),
           "output": RequestOptions(output=A)}
RENDERED: dict[str, dict[str, Any]] = {
    "openai_chat": {
        "none": {"tool_choice": "none"}, "required": {"tool_choice": "required"},
        "named": {"tool_choice": {"type": "function", "function": {"name": "f"}}},
        "serial": {"parallel_tool_calls": False},
        "output": {"response_format": {"type": "json_schema",
                                       "json_schema": {"name": "A", "schema": {"type": "object"}, "strict": True}}}},
    "openai_responses": {
        "none": {"tool_choice": "none"}, "required": {"tool_choice": "required"},
        "named": {"tool_choice": {"type": "function", "name": "f"}}, "serial": {"parallel_tool_calls": False},
        "output": {"text": {"format": {"type": "json_schema", "name": "A", "schema": {"type": "object"},
                                       "strict": True}}}},
    "anthropic": {
        "none": {"tool_choice": {"type": "none"}}, "required": {"tool_choice": {"type": "any"}},
        "named": {"tool_choice": {"type": "tool", "name": "f"}},
        "serial": {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
        "output": {"output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {}, "additionalProperties": False}}}}},
    "gemini": {
        "none": {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}},
        "required": {"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}},
        "named": {"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}},
        "serial": "parallel_tool_calls=False cannot be expressed on Gemini",
        "output": {"generationConfig": {"responseMimeType": "application/json",
                                        "responseJsonSchema": {"type": "object"}}}},
    "ollama": {
        "none": {"tools": None}, "required": "tool_choice='required' cannot be expressed",
        "named": "tool_choice={'name': 'f'} cannot be expressed", "serial": "parallel_tool_calls=False cannot be",
        "output": {"format": {"type": "object"}}},
}


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("api", list(RENDERED))
def test_each_wire_api_renders_the_options_as_before(api: str, option: str) -> None:
    wanted = RENDERED[api][option]
    render = WIRE_APIS[api].render_request
    if isinstance(wanted, str):  # what the API cannot express is refused, never dropped
        with pytest.raises(ValueError, match=wanted):
            render([Message.user("q")], [F], request_options=OPTIONS[option])
        return
    body = render([Message.user("q")], [F], request_options=OPTIONS[option])
    assert {k: body.get(k) for k in wanted} == wanted
    if option != "output":  # without tools there is no tool choice to render
        bare = render([Message.user("q")], [], request_options=OPTIONS[option])
        assert not {"tool_choice", "toolConfig", "parallel_tool_calls"} & set(bare)


def test_anthropic_refuses_an_output_schema_not_in_strict_form_instead_of_loosening_it() -> None:
    loose = RequestOptions(output=OutputSchema("A", {"type": "object", "additionalProperties": {"type": "integer"}}))
    with pytest.raises(ValueError, match="not in strict form"):
        WIRE_APIS["anthropic"].render_request([Message.user("q")], request_options=loose)


def test_the_finalize_turn_of_every_sdk_model_renders_as_before() -> None:
    pytest.importorskip("anthropic")
    finalize = RequestOptions("none", finalize=True)
    with Emulator() as emu:
        for api in ("openai_chat", "openai_responses", "anthropic", "gemini"):
            model = WIRE_APIS[api].model_class(emu.client(api), model="m")
            body = model.render(ModelRequest(messages=_tool_history(), tools=[], run_tools=[ADD], options=finalize))
            if api == "anthropic":  # tools defined beside the tool blocks, none to be called
                assert body["tool_choice"] == {"type": "none"} and [t["name"] for t in body["tools"]] == ["add"]
            else:  # no tools, so no choice either
                assert not {"tools", "tool_choice", "toolConfig"} & set(body), api
