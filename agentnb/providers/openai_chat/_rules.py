"""The lint rules of Chat Completions: what the service (and OpenAI-compatible servers) refuse in ``messages``.

Each rule is a few lines over :class:`ChatView`, which reduces the messages to calls and results and pairs
them once (placement rule ``run``: a call's results are the run of ``tool`` messages right after it,
https://platform.openai.com/docs/guides/function-calling). Provider messages are the service's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any

from ..._findings import (
    INTERRUPTED,
    Change,
    Context,
    Finding,
    Rule,
    View,
    args_object,
    compatible_server_message,
    fix_arguments,
    not_object,
)
from ..._pairing import Raw, Unit, pair

__all__ = ["RULES", "ChatView"]

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_RESULT_CODES = ("orphan_result", "result_before_call", "duplicate_result")


class ChatView(View):
    """The messages, and their calls and results paired under the ``run`` placement rule."""

    list_key = "messages"

    @cached_property
    def units(self) -> list[Unit]:
        """Each message reduced to its calls and results."""
        units = []
        for i, m in enumerate(self.items):
            role = m.get("role") if isinstance(m, dict) else None
            u = Unit(i, str(role))
            if role == "assistant":
                for j, tc in enumerate(m.get("tool_calls") or ()):
                    u.calls.append((tc.get("id") or "", (tc.get("function") or {}).get("name") or "", j, i))
            elif role == "tool":
                u.results.append((m.get("tool_call_id") or "", "", None, i))
            units.append(u)
        return units

    @cached_property
    def raws(self) -> list[Raw]:
        """The pairing problems under the ``run`` placement rule."""
        return pair(self.units, "run")


def _bad_role(v: ChatView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    role = m.get("role")
    if not m.get("malformed") and role not in ROLES:
        yield Finding("bad_role", f"messages[{i}].role", i, f"role {role!r} is not a Chat role",
                      f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                      "'function', 'tool', and 'developer'.", param=f"messages.[{i}].role")


def _system_not_first(v: ChatView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    role = m.get("role")
    if role in ("system", "developer") and any(
            isinstance(p, dict) and p.get("role") not in ("system", "developer") for p in v.items[:i]):
        yield Finding("system_not_first", f"messages[{i}]", i,
                      f"a {role} message after the conversation started (accepted, but easy to miss)", "", "warning")


def _arguments(v: ChatView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    for j, tc in enumerate(m.get("tool_calls") or ()):
        raw = tc["function"].get("arguments")
        if raw is not None and not args_object(raw):
            yield not_object(i, j, f"messages[{i}].tool_calls[{j}].function.arguments", raw,
                             compatible_server_message(raw), tc.get("id") or None,
                             f"messages.[{i}].tool_calls.[{j}].function.arguments")


def _previous_calls(messages: list[Any], i: int) -> list[str] | None:
    k = i - 1
    while k >= 0 and messages[k].get("role") == "tool":
        k -= 1
    if k >= 0 and messages[k].get("role") == "assistant" and messages[k].get("tool_calls"):
        return [tc.get("id") for tc in messages[k]["tool_calls"]]
    return None


def _stray_result(v: ChatView, r: Raw, pos: str) -> Finding:
    if _previous_calls(v.items, r.unit) is None:
        text = ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                "with 'tool_calls'.")
    else:
        text = f"Invalid parameter: 'tool_call_id' of '{r.call_id}' not found in 'tool_calls' of previous message."
    what = {"orphan_result": "answers no call issued before it",
            "result_before_call": "comes before the call it answers",
            "duplicate_result": "answers a call already answered"}[r.code]
    return Finding(r.code, pos, r.unit, f"the tool message for {r.call_id!r} {what}", text,
                   "warning" if r.code == "duplicate_result" else "error", r.call_id, f"messages.[{r.unit}].role")


def _unanswered(v: ChatView, r: Raw, pos: str) -> Finding:
    ids = [x.call_id for x in v.raws if x.code == "unanswered_call" and x.unit == r.unit]
    return Finding(r.code, pos, r.unit, f"call {r.call_id!r} ({r.name}) has no tool message after it",
                   "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                   f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}",
                   call_id=r.call_id, param=f"messages.[{r.unit}].role", part=r.part)


def _duplicate_call(v: ChatView, r: Raw, pos: str) -> Finding:
    return Finding(r.code, pos, r.unit, f"call id {r.call_id!r} was already used by an earlier call",
                   f"Invalid 'messages[{r.unit}].tool_calls': duplicate tool call id '{r.call_id}'.",
                   call_id=r.call_id, param=f"messages.[{r.unit}].tool_calls", part=r.part)


_WORDING = {"orphan_result": _stray_result, "result_before_call": _stray_result, "duplicate_result": _stray_result,
            "unanswered_call": _unanswered, "duplicate_call_id": _duplicate_call}


def _pairing(v: ChatView) -> Iterator[Finding]:
    for r in v.raws:
        yield _WORDING[r.code](v, r, f"messages[{r.unit}]" + (f".tool_calls[{r.part}]" if r.part is not None else ""))


def _fix_pairing(messages: list[Any], findings: list[Finding]) -> list[Change]:
    """Drop stray tool messages; answer unanswered calls with an "interrupted" tool message after their run."""
    changes: list[Change] = []
    drop = {f.index for f in findings if f.code in _RESULT_CODES}
    answers: dict[int, list[tuple[str, str]]] = {}
    for f in findings:
        if f.code == "unanswered_call" and f.call_id:
            call = messages[f.index]["tool_calls"][f.part or 0]
            answers.setdefault(f.index, []).append((f.call_id, (call.get("function") or {}).get("name") or ""))
    out: list[Any] = []
    pending: list[tuple[str, str]] = []

    def answer() -> None:
        for cid, name in pending:
            out.append({"role": "tool", "tool_call_id": cid, "content": INTERRUPTED})
            changes.append(Change("added", f"messages[{len(out) - 1}]",
                                  f"an 'interrupted' result for {cid!r} ({name})"))
        pending.clear()

    for i, m in enumerate(messages):
        if m.get("role") != "tool":
            answer()
        if i in drop:
            changes.append(Change("dropped", f"messages[{i}]", f"orphan tool message for {m.get('tool_call_id')!r}"))
            continue
        out.append(m)
        pending.extend(answers.get(i, ()))
    answer()
    messages[:] = out
    return changes


def tool_choice_finding() -> Finding:
    """``tool_choice`` on a request that offers no tools (Chat Completions refuses it)."""
    return Finding("tool_choice_without_tools", "tool_choice", -1, "tool_choice is set but no tools are offered",
                   "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                   param="tool_choice")


def _tool_choice(v: ChatView) -> Iterator[Finding]:
    body = v.body
    if body.get("tool_choice") is not None and not body.get("tools") and "messages" in body and "tools" in body:
        yield tool_choice_finding()


def _reasoning_content(v: ChatView) -> Iterator[Finding]:
    ctx = v.ctx
    if ctx is None or not ctx.reasoning_content_for:
        return
    for i, m in enumerate(v.items):
        if m.get("role") == "assistant" and not m.get("reasoning_content") and any(
                (tc.get("id") in ctx.reasoning_content_for) for tc in m.get("tool_calls") or ()):
            yield Finding("missing_reasoning", f"messages[{i}]", i,
                          "this tool-call turn came with reasoning_content, which must be sent back",
                          f"Missing `reasoning_content` field in the assistant message at message index {i}",
                          param=f"messages.[{i}].reasoning_content")


# -- examples: a request each rule refuses, and the same request made right (the conformance suite runs them) --

_USER = {"role": "user", "content": "Add 1 and 2"}


def _call(arguments: str = '{"a": 1, "b": 2}', extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": None, **(extra or {}), "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": arguments}}]}


_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "3"}
_TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


RULES = (
    Rule("bad_role", "a role Chat Completions does not know", _bad_role, each=True,
         refuses={"messages": [{"role": "critic", "content": "x"}]}, accepts={"messages": [_USER]}),
    Rule("system_not_first", "a system/developer message after the conversation started (a warning)",
         _system_not_first, each=True, refuses={"messages": [_USER, {"role": "system", "content": "Be brief."}]},
         accepts={"messages": [{"role": "system", "content": "Be brief."}, _USER]}),
    Rule("arguments_not_object", "a call's arguments that are not a JSON object (OpenAI-compatible servers refuse "
         "them)", _arguments, each=True,
         fix=fix_arguments(lambda items, i, j: items[i]["tool_calls"][j or 0]["function"], "arguments", "{}"),
         refuses={"messages": [_USER, _call('{"a": 1,'), _RESULT]}, accepts={"messages": [_USER, _call(), _RESULT]}),
    Rule("unanswered_call", "each call answered exactly once, by the tool messages right after it",
         _pairing, fix=_fix_pairing, moves=True, codes=("orphan_result", "result_before_call", "duplicate_result",
                                                        "unanswered_call", "duplicate_call_id"),
         refuses={"messages": [_USER, _call(), _USER]}, accepts={"messages": [_USER, _call(), _RESULT]}),
    Rule("tool_choice_without_tools", "tool_choice needs tools", _tool_choice,
         refuses={"messages": [_USER], "tools": [], "tool_choice": "auto"},
         accepts={"messages": [_USER], "tools": _TOOLS, "tool_choice": "auto"}),
    Rule("missing_reasoning", "reasoning_content sent back on tool-call turns that came with it (DeepSeek, vLLM; "
         "needs the emulator's context)", _reasoning_content,
         refuses={"messages": [_USER, _call(), _RESULT]},
         accepts={"messages": [_USER, _call(extra={"reasoning_content": "add them"}), _RESULT]},
         context=Context(reasoning_content_for={"call_1"})),
)
