"""Importers: each foreign history format into a transcript, round trips through the wire adapters, and the
findings a broken history gets."""

from __future__ import annotations

from typing import Any

import pytest

import agentnb as anb
from agentnb._messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from agentnb.importers import (
    Finding,
    Imported,
    from_anthropic,
    from_gemini,
    from_openai_chat,
    from_openai_responses,
    import_history,
    lint,
)
from agentnb.providers import anthropic, gemini, openai_chat, openai_responses


def call(cid: str, city: str) -> ToolCallPart:
    return ToolCallPart(call_id=cid, name="get_weather", arguments_raw=f'{{"city": "{city}"}}',
                        arguments={"city": city})


CONVERSATION = [
    Message.system("Be brief."),
    Message.user("Weather in Paris and Oslo?"),
    Message(role="assistant", parts=(TextPart(text="Checking."), call("c1", "Paris"), call("c2", "Oslo"))),
    Message(role="tool", parts=(
        ToolResultPart(call_id="c1", name="get_weather", status="ok", content='{"temp_c": 18}'),
        ToolResultPart(call_id="c2", name="get_weather", status="error", content="no station for Oslo"),
    )),
    Message.assistant("Paris is 18 °C; Oslo has no station."),
]


def rendered(fmt: str) -> tuple[list[Any], dict[str, Any]]:
    """The conversation as each provider's request holds it, and the importer options for its system prompt."""
    if fmt == "openai_chat":
        return openai_chat.render_request(CONVERSATION, model="m")["messages"], {}
    if fmt == "openai_responses":
        body = openai_responses.render_request(CONVERSATION, model="m")
        return body["input"], {"instructions": body["instructions"]}
    if fmt == "anthropic":
        body = anthropic.render_request(CONVERSATION, model="m")
        return body["messages"], {"system": body["system"]}
    body = gemini.render_request(CONVERSATION, model="m")
    return body["contents"], {"system_instruction": body["systemInstruction"]}


def shape(messages: list[Message]) -> list[tuple[Any, ...]]:
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


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic", "gemini"])
def test_rendered_histories_import_back_to_the_conversation(fmt: str) -> None:
    history, options = rendered(fmt)
    imported = import_history(history, fmt, run_id=f"imp_{fmt}", model="m", **options)  # type: ignore[arg-type]
    assert imported.findings == [] and imported.ok, imported.findings
    assert shape(imported.messages) == shape(CONVERSATION)
    calls = imported.transcript.frames.calls()
    assert calls["origin"].tolist() == ["history", "history"] and calls["tool"].tolist() == ["get_weather"] * 2
    # error statuses survive where the wire has them (Anthropic is_error, Gemini's "error" key)
    expect_error = fmt in ("anthropic", "gemini")
    assert calls["status"].tolist() == ["ok", "error" if expect_error else "ok"]
    assert calls["duration_s"].isna().all() and calls["seq"].tolist() == [0, 0]
    t = imported.transcript
    assert t.messages == imported.messages and t.run_id == f"imp_{fmt}" and len(t) == 1
    assert t.frames.turns().empty
    msgs = t.frames.messages()
    assert msgs["kind"].astype(str).tolist().count("tool_result") == 2
    if fmt != "gemini":
        assert calls["call_id"].tolist() == ["c1", "c2"]


def test_unknown_format_is_named() -> None:
    with pytest.raises(ValueError, match="formats: openai_chat"):
        import_history([], "cohere")  # type: ignore[arg-type]


def codes(imported: Imported) -> list[tuple[str, int]]:
    return [(f.code, f.index) for f in imported.findings]


_TC = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
       {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]
HISTORY_CHAT_BROKEN: list[Any] = [
    {"role": "tool", "tool_call_id": "b", "content": "early"},                      # 0: before its call
    {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {}}]},
    {"role": "assistant", "content": None, "tool_calls": _TC},                       # 2: duplicate id, bad JSON
    {"role": "tool", "tool_call_id": "zzz", "content": "?"},                         # 3: orphan
    {"role": "assistant", "tool_calls": [{"id": "b", "type": "function",
                                          "function": {"name": "g", "arguments": "{}"}}]},
    {"role": "critic", "content": "x"},                                              # 5: unknown role
    {"role": "assistant", "content": "done"},
]


def test_broken_chat_history_is_flagged_with_positions() -> None:
    imported = from_openai_chat(HISTORY_CHAT_BROKEN)
    assert not imported.ok
    # the same rules and codes as anb.lint(..., "openai_chat"): 'b' is answered before its call, so the
    # call at 4 has no tool message after it either
    assert codes(imported) == [
        ("result_before_call", 0), ("unsupported_part", 1), ("unanswered_call", 2), ("arguments_not_object", 2),
        ("duplicate_call_id", 2), ("orphan_result", 3), ("unanswered_call", 4), ("bad_role", 5),
    ]
    assert [f.code for f in imported.findings if f.code != "unsupported_part"] == [
        f.code for f in anb.lint(HISTORY_CHAT_BROKEN, "openai_chat")]
    unsupported = next(f for f in imported.findings if f.code == "unsupported_part")
    assert unsupported.position == "messages[1].content[1]" and unsupported.severity == "warning"
    assert imported.messages[1].text == "look[image_url]"
    calls = imported.transcript.frames.calls()
    assert calls["call_id"].tolist() == ["a", "a", "b"]
    assert calls["status"].tolist() == ["unanswered", "unanswered", "ok"]


def test_anthropic_result_must_come_first() -> None:
    imported = from_anthropic([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]},
        {"role": "user", "content": [{"type": "text", "text": "here"},
                                     {"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "42"}]}]},
    ])
    assert codes(imported) == [("results_not_first", 2)]  # the code anb.lint gives it
    assert [m.role for m in imported.messages] == ["user", "assistant", "tool", "user"]
    reasoning = imported.messages[1].parts[0]
    assert isinstance(reasoning, ReasoningPart) and reasoning.provider == "anthropic"
    assert reasoning.data["signature"] == "s"


def test_gemini_matches_responses_by_name_and_flags_strays() -> None:
    imported = from_gemini([
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig"},
                                    {"functionCall": {"name": "g", "args": {"y": 2}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {"output": 2}}},
                                   {"functionResponse": {"name": "h", "response": {"output": 0}}},
                                   {"functionResponse": {"name": "f", "response": {"output": "ok"}}}]},
    ])
    assert codes(imported) == [("orphan_result", 2)]  # 'h' matches no call of the call turn
    results = imported.messages[2].tool_results
    assert [r.call_id for r in results] == ["gemini_1_1", "gemini_response_2_1", "gemini_1_0"]
    first_call = imported.messages[1].tool_calls[0]
    assert first_call.provider_data == {"gemini": {"thoughtSignature": "sig"}}


def test_responses_items_group_into_one_assistant_message() -> None:
    imported = from_openai_responses([
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "id": "fc_1"},
        {"type": "web_search_call", "id": "ws"},
    ])
    # the reasoning item is followed by an edited message (no id), which the Responses API refuses
    assert codes(imported) == [("missing_reasoning", 1), ("unanswered_call", 3), ("unsupported_part", 4)]
    assistant = imported.messages[1]
    assert [p.kind for p in assistant.parts] == ["reasoning", "text", "tool_call"]
    assert assistant.tool_calls[0].provider_id == "fc_1"
    unanswered = next(f for f in imported.findings if f.code == "unanswered_call")
    assert unanswered.severity == "warning"  # the history ends with that call: it may just be pending


def test_lint_on_canonical_messages() -> None:
    assert lint(CONVERSATION) == []
    twice = [*CONVERSATION[:4], CONVERSATION[3]]
    assert [f.code for f in lint(twice)] == ["duplicate_result", "duplicate_result"]
    assert lint([CONVERSATION[2], Message.user("and?")]) == [
        Finding("unanswered_call", "[0]", 0, "call 'c1' has no result", call_id="c1"),
        Finding("unanswered_call", "[0]", 0, "call 'c2' has no result", call_id="c2"),
    ]


def test_sdk_like_objects_and_junk_items() -> None:
    class Obj:
        def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
            return {"role": "user", "content": "from an SDK"}

    imported = from_openai_chat([Obj(), 42])
    assert imported.messages[0].text == "from an SDK" and codes(imported) == [("malformed", 1)]
