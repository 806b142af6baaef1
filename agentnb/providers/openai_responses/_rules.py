"""The lint rules of the Responses API: what the service refuses in ``input``.

Each rule is a few lines over :class:`ResponsesView`, which pairs calls and results once (placement rule
``anywhere``: an output answers a call anywhere before it). With server-side state (``previous_response_id``,
``conversation``, ``item_reference`` items) an output may answer a call that is not in ``input``: the
service accepts it (recorded in the conformance corpus), so only what the input itself shows is checked.
Provider messages are the service's own.
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

__all__ = ["RULES", "ResponsesView"]


def kind_of(it: Any) -> Any:
    """An item's type (an item with a ``role`` and no ``type`` is a message)."""
    return it.get("type") or ("message" if "role" in it else None)


class ResponsesView(View):
    """The input items, where ids first appear, and the pairing of calls and outputs."""

    list_key = "input"

    @cached_property
    def first_of_id(self) -> dict[str, int]:
        """Where each item id first appears."""
        first: dict[str, int] = {}
        for i, it in enumerate(self.items):
            if it.get("id"):
                first.setdefault(it["id"], i)
        return first

    @cached_property
    def started_at(self) -> int:
        """The index of the first user or assistant message (the conversation's start)."""
        return next((i for i, it in enumerate(self.items)
                     if kind_of(it) == "message" and it.get("role") in ("user", "assistant")), len(self.items))

    @cached_property
    def stateful(self) -> bool:
        """The request continues server-side state (outputs may answer calls not in the input)."""
        return bool(self.body.get("previous_response_id") or self.body.get("conversation")) or any(
            it.get("type") == "item_reference" for it in self.items)

    @cached_property
    def other_calls(self) -> dict[str, str]:
        """The call ids of call items other than ``function_call``, and their types.

        ``tool_search_call``, ``custom_tool_call``, ``computer_call``, ``shell_call`` and the like carry a
        ``call_id`` too: an output that answers one answers a call the input holds, not an orphan. Whether
        they need an output depends on who ran them (a server-side search needs none), so none is required.
        """
        return {str(it["call_id"]): str(kind_of(it)) for it in self.items
                if str(kind_of(it)).endswith("_call") and kind_of(it) != "function_call" and it.get("call_id")}

    @cached_property
    def raws(self) -> list[Raw]:
        """The pairing problems under the ``anywhere`` placement rule."""
        units = []
        for i, it in enumerate(self.items):
            kind = kind_of(it)
            u = Unit(i, str(it.get("role") or kind))
            if kind == "function_call" or (str(kind).endswith("_call") and it.get("call_id")):
                u.calls.append((it.get("call_id") or "", it.get("name") or "", None, i))
            elif kind == "function_call_output":
                u.results.append((it.get("call_id") or "", "", None, i))
            units.append(u)
        return pair(units, "anywhere")


def _duplicate_id(v: ResponsesView, i: int, it: dict[str, Any]) -> Iterator[Finding]:
    item_id = it.get("id")
    if item_id and v.first_of_id[item_id] < i:
        yield Finding("duplicate_call_id" if kind_of(it) == "function_call" else "duplicate_item", f"input[{i}]", i,
                      f"item id {item_id!r} appears twice", f"Duplicate item found with id {item_id}. Remove "
                      "duplicate items from your input and try again.", param="input")


def _roles(v: ResponsesView, i: int, it: dict[str, Any]) -> Iterator[Finding]:
    role = it.get("role")
    if kind_of(it) != "message":
        return
    if role not in ("user", "assistant", "system", "developer"):
        yield Finding("bad_role", f"input[{i}].role", i, f"role {role!r} is not a Responses role",
                      f"Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and "
                      "'user'.", param=f"input[{i}].role")
    elif role in ("system", "developer") and v.started_at < i:
        yield Finding("system_not_first", f"input[{i}]", i,
                      f"a {role} message after the conversation started (accepted, but easy to miss)", "", "warning")


def follows_reasoning(nxt: Any) -> bool:
    """Whether an input item can be the output item a reasoning item led to.

    The service keeps the pair together: "Item 'rs_...' of type 'reasoning' was provided without its required
    following item." when the reasoning item ends the input, or is followed by anything that is not one of
    the model's own output items (a user message, a tool output, or an assistant message without its id, as
    an edited history sends; recorded in the conformance corpus).
    """
    if not isinstance(nxt, dict):
        return False
    kind = kind_of(nxt)
    if kind == "message":
        return nxt.get("role") == "assistant" and bool(nxt.get("id"))
    return kind not in (None, "malformed", "function_call_output") and not str(kind).endswith("_output")


def _reasoning_follows(v: ResponsesView, i: int, it: dict[str, Any]) -> Iterator[Finding]:
    if kind_of(it) == "reasoning" and not follows_reasoning(v.items[i + 1] if i + 1 < len(v.items) else None):
        yield Finding("missing_reasoning", f"input[{i}]", i, "a reasoning item must be followed by the output item it "
                      "led to (an edited or new message in its place does not count)",
                      f"Item '{it.get('id')}' of type 'reasoning' was provided without its required following item.",
                      param="input")


def _reasoning_content(v: ResponsesView, i: int, it: dict[str, Any]) -> Iterator[Finding]:
    if kind_of(it) != "reasoning":
        return
    item_id, enc, ctx = it.get("id"), it.get("encrypted_content"), v.ctx
    if v.body.get("store") is False and not enc:
        yield Finding("missing_reasoning", f"input[{i}]", i, "with store=false a reasoning item needs its "
                      "encrypted_content", f"Item with id '{item_id}' not found. Items are not persisted when "
                      "`store` is set to false. Try again with `store` set to true, or remove this item from your "
                      "input.", param="input")
    elif ctx is not None and ctx.verify is not None and enc and not (
            isinstance(enc, str) and ctx.verify("reasoning", enc, str(item_id))):
        yield Finding("invalid_signature", f"input[{i}].encrypted_content", i,
                      "the encrypted reasoning content was altered",
                      f"The encrypted content for item {item_id} could not be verified.", param="input")


def _arguments(v: ResponsesView, i: int, it: dict[str, Any]) -> Iterator[Finding]:
    if kind_of(it) == "function_call" and "arguments" in it and not args_object(it["arguments"]):
        yield not_object(i, None, f"input[{i}].arguments", it["arguments"],
                         compatible_server_message(it["arguments"]), it.get("call_id") or None, "input")


def _reasoning_sent(v: ResponsesView, i: int, it: dict[str, Any]) -> Iterator[Finding]:
    ctx, item_id = v.ctx, it.get("id")
    if kind_of(it) != "function_call" or ctx is None or item_id not in ctx.reasoning_for:
        return
    rs = ctx.reasoning_for[item_id]
    if not any(isinstance(p, dict) and p.get("id") == rs for p in v.items[:i]):
        yield Finding("missing_reasoning", f"input[{i}]", i,
                      f"the call came after reasoning item {rs!r}, which was not sent back",
                      f"Item '{item_id}' of type 'function_call' was provided without its required 'reasoning' "
                      f"item: '{rs}'.", call_id=it.get("call_id"), param="input")


_STRAY = {"orphan_result": "answers no call in the input", "result_before_call": "comes before its function_call item",
          "duplicate_result": "answers a call already answered"}


def _pairing(v: ResponsesView) -> Iterator[Finding]:
    duplicates = {i for i, it in enumerate(v.items) if kind_of(it) == "function_call" and it.get("id")
                  and v.first_of_id[it["id"]] < i}  # already reported by _duplicate_id
    for r in v.raws:
        pos = f"input[{r.unit}]"
        if r.code in _STRAY and not (v.stateful and r.code != "duplicate_result"):
            yield Finding(r.code, pos, r.unit, f"the output for {r.call_id!r} {_STRAY[r.code]}",
                          f"No tool call found for function call output with call_id {r.call_id}.",
                          "warning" if r.code == "duplicate_result" else "error", r.call_id, "input")
        elif r.code == "unanswered_call" and r.call_id not in v.other_calls:
            yield Finding(r.code, pos, r.unit, f"call {r.call_id!r} ({r.name}) has no function_call_output",
                          f"No tool output found for function call {r.call_id}.", call_id=r.call_id, param="input")
        elif r.code == "duplicate_call_id" and r.unit not in duplicates:
            yield Finding(r.code, pos, r.unit, f"call id {r.call_id!r} was already used by an earlier call",
                          f"Duplicate value for 'call_id' of {r.call_id} in input.", call_id=r.call_id, param="input")


def _fix_pairing(items: list[Any], findings: list[Finding]) -> list[Change]:
    """Drop stray outputs; answer each unanswered call with an "interrupted" output right after it."""
    changes: list[Change] = []
    drop = {f.index for f in findings if f.code in _STRAY}
    add = {f.index: f for f in findings if f.code == "unanswered_call"}
    out: list[Any] = []
    for i, it in enumerate(items):
        if i in drop:
            changes.append(Change("dropped", f"input[{i}]", f"orphan function_call_output for {it.get('call_id')!r}"))
            continue
        out.append(it)
        if i in add:
            cid = add[i].call_id
            out.append({"type": "function_call_output", "call_id": cid, "output": INTERRUPTED})
            changes.append(Change("added", f"input[{len(out) - 1}]", f"an 'interrupted' output for {cid!r}"))
    items[:] = out
    return changes


# -- examples: a request each rule refuses, and the same request made right (the conformance suite runs them) --

_USER = {"type": "message", "role": "user", "content": "Add 1 and 2"}
_RS = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "good"}
_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": '{"a": 1, "b": 2}'}
_OUT = {"type": "function_call_output", "call_id": "call_1", "output": "3"}


def _input(*items: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"input": list(items), **body}


RULES = (
    Rule("duplicate_item", "an item id used twice", _duplicate_id, each=True,
         codes=("duplicate_item", "duplicate_call_id"), refuses=_input(_USER, _RS, _CALL, _OUT, _RS),
         accepts=_input(_USER, _RS, _CALL, _OUT)),
    Rule("bad_role", "message roles, and system messages after the start (a warning)", _roles, each=True,
         codes=("bad_role", "system_not_first"), refuses=_input(_USER, {"role": "critic", "content": "x"}),
         accepts=_input({"role": "developer", "content": "Be brief."}, _USER)),
    Rule("missing_reasoning", "a reasoning item followed by the output item it led to", _reasoning_follows, each=True,
         refuses=_input(_USER, _RS), accepts=_input(_USER, _RS, _CALL, _OUT)),
    Rule("invalid_signature", "with store=false, encrypted_content on reasoning items; with the emulator's context, "
         "content it issued", _reasoning_content, each=True, codes=("missing_reasoning", "invalid_signature"),
         refuses=_input(_USER, {**_RS, "encrypted_content": "altered"}, _CALL, _OUT),
         accepts=_input(_USER, _RS, _CALL, _OUT), context=Context(verify=lambda kind, value, item: value == "good")),
    Rule("arguments_not_object", "a call's arguments that are not a JSON object", _arguments, each=True,
         fix=fix_arguments(lambda items, i, j: items[i], "arguments", "{}"),
         refuses=_input(_USER, {**_CALL, "arguments": "[1, 2]"}, _OUT), accepts=_input(_USER, _CALL, _OUT)),
    Rule("missing_reasoning", "a function call sent with the reasoning item that preceded it (emulator's context)",
         _reasoning_sent, each=True, refuses=_input(_USER, _CALL, _OUT), accepts=_input(_USER, _RS, _CALL, _OUT),
         context=Context(reasoning_for={"fc_1": "rs_1"})),
    Rule("unanswered_call", "each call answered exactly once, by an output after it", _pairing,
         fix=_fix_pairing, moves=True,
         codes=("orphan_result", "result_before_call", "duplicate_result", "unanswered_call", "duplicate_call_id"),
         refuses=_input(_USER, _CALL), accepts=_input(_USER, _CALL, _OUT)),
)
