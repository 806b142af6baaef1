"""The lint rules of the Messages API: what the service refuses in ``messages``.

Each rule is a few lines over :class:`AnthropicView`, which reduces the messages to calls and results once
and merges consecutive turns of one role, as the service does ("consecutive user or assistant turns in
your request will be combined into a single turn", https://docs.anthropic.com/en/api/messages); the
pairing rule is ``next``: a ``tool_use`` is answered by a ``tool_result`` at the start of the next user
turn (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use). Thinking blocks
go back with their signatures
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks).
Provider messages are the service's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any

from ..._findings import INTERRUPTED, Change, Context, Finding, Rule, View, fix_arguments, not_object
from ..._pairing import Raw, Unit, merge_turns, pair

__all__ = ["ANTHROPIC_INLINE_SYSTEM", "ANTHROPIC_NO_INLINE_SYSTEM", "RULES", "AnthropicView"]

ANTHROPIC_INLINE_SYSTEM = ("claude-opus-4-8", "claude-opus-5", "claude-fable-5", "claude-mythos-5")
"""Model families that accept ``{"role": "system"}`` entries inside ``messages`` (text, and the
``tool_addition``/``tool_removal`` blocks of mid-conversation tool changes), as Anthropic lists them. Older
models refuse the entry ("role 'system' is not supported on this model"); ``claude-sonnet-5`` accepts it and
ignores it."""

ANTHROPIC_NO_INLINE_SYSTEM = ("claude-2", "claude-instant", "claude-3", "claude-sonnet-4", "claude-opus-4",
                              "claude-haiku-4")
"""Model families known to refuse a ``system`` entry inside ``messages`` (``claude-opus-4-8`` excepted)."""

_RESULT_CODES = ("orphan_result", "result_before_call", "duplicate_result")


def blocks(m: Any) -> list[Any]:
    """A message's content blocks (a string content is one text block)."""
    content = m.get("content") if isinstance(m, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or ())


class AnthropicView(View):
    """The messages as units (calls, results and where the first result stands), merged into turns, paired."""

    list_key = "messages"

    @cached_property
    def units(self) -> list[Unit]:
        """Each message reduced to its calls and results."""
        units = []
        for i, m in enumerate(self.items):
            u = Unit(i, str(m.get("role")))
            seen_other = 0
            for j, b in enumerate(blocks(m)):
                kind = b.get("type")
                if kind == "tool_use" and u.role == "assistant":
                    u.calls.append((b.get("id") or "", b.get("name") or "", j, i))
                elif kind == "tool_result":
                    if not u.results:
                        u.first_result = seen_other
                    u.results.append((b.get("tool_use_id") or "", "", j, i))
                else:
                    seen_other += 1
                    u.other = True
            u.n_other = seen_other
            units.append(u)
        return units

    @cached_property
    def turns(self) -> list[Unit]:
        """User and assistant turns; system entries (where the model takes them) are not turns."""
        return merge_turns([u for u in self.units if u.role in ("user", "assistant")])

    @cached_property
    def not_first(self) -> list[tuple[Unit, Unit]]:
        """(call turn, next turn) where the next turn answers, but not with its results first."""
        out = []
        for k, u in enumerate(self.turns):
            nxt = self.turns[k + 1] if k + 1 < len(self.turns) else None
            if u.calls and nxt is not None and nxt.results and nxt.first_result > 0:
                out.append((u, nxt))
        return out

    @cached_property
    def raws(self) -> list[Raw]:
        """The pairing problems of the merged turns."""
        return pair(self.turns, "next")


def _system(u: Unit, model: str) -> Finding | None:
    """A ``system`` entry inside ``messages``: fine, an error or a warning, by model family."""
    family = model.split("/")[-1]
    if family.startswith(ANTHROPIC_INLINE_SYSTEM):
        return None
    refused = family.startswith(ANTHROPIC_NO_INLINE_SYSTEM)
    if family.startswith("claude-sonnet-5"):
        why = f"{family} accepts a system entry inside messages but ignores it: use the top-level `system`"
    else:
        why = (f"a system entry inside messages is taken by {', '.join(ANTHROPIC_INLINE_SYSTEM)} only; "
               f"{', '.join(f + '*' for f in ANTHROPIC_NO_INLINE_SYSTEM)} refuse it: use the top-level `system`")
    return Finding("system_not_first", f"messages[{u.index}].role", u.index, why,
                   "role 'system' is not supported on this model", "error" if refused else "warning")


def _roles(v: AnthropicView) -> Iterator[Finding]:
    for u in v.units:
        if u.role == "system":
            found = _system(u, str(v.body.get("model") or ""))
            if found is not None:
                yield found
        elif u.role not in ("user", "assistant") and not v.items[u.index].get("malformed"):
            yield Finding("bad_role", f"messages[{u.index}].role", u.index,
                          f"role {u.role!r} inside messages (the roles are user and assistant)",
                          f"messages.{u.index}.role: Input should be 'user' or 'assistant'")


def _arguments(v: AnthropicView) -> Iterator[Finding]:
    for i, m in enumerate(v.items):
        for j, b in enumerate(blocks(m) if m.get("role") == "assistant" else ()):
            if b.get("type") == "tool_use" and "input" in b and not isinstance(b["input"], dict):
                yield not_object(i, j, f"messages[{i}].content[{j}].input", b["input"],
                                 f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary",
                                 b.get("id") or None)


def _tools(v: AnthropicView) -> Iterator[Finding]:
    body = v.body
    if any(u.calls or u.results for u in v.turns) and not body.get("tools") and "messages" in body and "tools" in body:
        yield Finding("tools_undefined", "tools", -1, "tool_use/tool_result blocks in the history but no tools",
                      "Requests which include `tool_use` or `tool_result` blocks must define tools.")


def _results_first(v: AnthropicView) -> Iterator[Finding]:
    for u, nxt in v.not_first:
        yield Finding("results_not_first", f"messages[{nxt.index}]", nxt.index,
                      "tool_result blocks must come first in the user message, before any text",
                      f"messages.{nxt.index}: Did not find {len(u.calls)} `tool_result` block(s) at the beginning of "
                      "this message. Messages following `tool_use` blocks must begin with a matching number of "
                      "`tool_result` blocks.")


_STRAY = {"orphan_result": "answers no tool_use of the previous message",
          "result_before_call": "comes before its tool_use", "duplicate_result": "answers a tool_use already answered"}


def _pairing(v: AnthropicView) -> Iterator[Finding]:
    reported = {c[3] for u, _ in v.not_first for c in u.calls}  # reported as results_not_first
    unanswered: dict[int, list[str]] = {}
    for r in v.raws:
        if r.code == "unanswered_call":
            unanswered.setdefault(r.unit, []).append(r.call_id)
    for r in v.raws:
        pos = f"messages[{r.unit}].content[{r.part}]"
        if r.code in _STRAY:
            yield Finding(r.code, pos, r.unit, f"the tool_result for {r.call_id!r} {_STRAY[r.code]}",
                          f"messages.{r.unit}.content.{r.part}: unexpected `tool_use_id` found in `tool_result` "
                          f"blocks: {r.call_id}. Each `tool_result` block must have a corresponding `tool_use` block "
                          "in the previous message.", call_id=r.call_id, part=r.part)
        elif r.code == "unanswered_call" and r.unit not in reported:
            yield Finding(r.code, pos, r.unit, f"tool_use {r.call_id!r} ({r.name}) has no tool_result in the next "
                          f"message", f"messages.{r.unit}: `tool_use` ids were found without `tool_result` blocks "
                          f"immediately after: {', '.join(unanswered[r.unit])}. Each `tool_use` block must have a "
                          "corresponding `tool_result` block in the next message.", call_id=r.call_id, part=r.part)
        elif r.code == "duplicate_call_id":
            yield Finding(r.code, pos, r.unit, f"tool_use id {r.call_id!r} was already used",
                          f"messages.{r.unit}.content.{r.part}: `tool_use` ids must be unique", call_id=r.call_id,
                          part=r.part)


def _signatures(v: AnthropicView) -> Iterator[Finding]:
    ctx = v.ctx
    for i, m in enumerate(v.items):
        for j, b in enumerate(blocks(m) if m.get("role") == "assistant" else ()):
            if b.get("type") != "thinking":
                continue
            if not b.get("signature"):
                yield Finding("missing_signature", f"messages[{i}].content[{j}]", i,
                              "a thinking block without its signature",
                              f"messages.{i}.content.{j}.thinking.signature: Field required", part=j)
            elif ctx is not None and ctx.verify is not None and not (isinstance(b["signature"], str) and ctx.verify(
                    "thinking", b["signature"], str(b.get("thinking") or ""))):
                yield Finding("invalid_signature", f"messages[{i}].content[{j}]", i,
                              "the thinking block was altered (its signature does not match)",
                              f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block", part=j)


def _thinking_first(v: AnthropicView) -> Iterator[Finding]:
    thinking = v.body.get("thinking")
    if not (isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")):
        return
    last = max((i for i, m in enumerate(v.items) if m.get("role") == "assistant"), default=None)
    if last is None or not any(b.get("type") == "tool_use" for b in blocks(v.items[last])):
        return
    first: dict[str, Any] = next(iter(blocks(v.items[last])), {})
    if first.get("type") not in ("thinking", "redacted_thinking"):
        yield Finding(
            "missing_signature", f"messages[{last}].content[0]", last,
            "with thinking enabled, the last assistant turn with tool use must start with its thinking block",
            f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a "
            "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
            "you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.", part=0)


def _empty_text(v: AnthropicView) -> Iterator[Finding]:
    for i, m in enumerate(v.items):
        for j, b in enumerate(blocks(m) if isinstance(m.get("content"), list) else ()):
            if b.get("type") == "text" and not b.get("text"):
                yield Finding("empty_text", f"messages[{i}].content[{j}]", i, "an empty text block",
                              f"messages.{i}.content.{j}.text: text content blocks must be non-empty", part=j)


def _fix_placement(messages: list[Any], findings: list[Finding]) -> list[Change]:
    """Drop stray tool_result blocks and move the results of a message to its start."""
    changes: list[Change] = []
    for i, m in enumerate(messages):
        if isinstance(m.get("content"), str):
            continue
        content = m.get("content") or []
        drops = {f.part for f in findings if f.index == i and f.code in _RESULT_CODES and f.part is not None}
        for j in sorted(drops, reverse=True):
            changes.append(Change("dropped", f"messages[{i}].content[{j}]",
                                  f"orphan tool_result for {content[j].get('tool_use_id')!r}"))
            del content[j]
        if any(f.index == i and f.code == "results_not_first" for f in findings):
            results = [b for b in content if b.get("type") == "tool_result"]
            m["content"] = results + [b for b in content if b.get("type") != "tool_result"]
            changes.append(Change("moved", f"messages[{i}]", f"{len(results)} tool_result block(s) to the start"))
    return changes


def _fix_unanswered(messages: list[Any], findings: list[Finding]) -> list[Change]:
    """Answer unanswered calls with "interrupted" error results at the start of the next user message."""
    changes: list[Change] = []
    inserts: list[tuple[int, list[dict[str, Any]]]] = []
    for i in sorted({f.index for f in findings if f.code == "unanswered_call"}):
        ids = [f.call_id for f in findings if f.code == "unanswered_call" and f.index == i]
        inserts.append((i, [{"type": "tool_result", "tool_use_id": cid, "content": INTERRUPTED, "is_error": True}
                            for cid in ids]))
    for i, new in reversed(inserts):
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if nxt is not None and nxt.get("role") == "user":
            if isinstance(nxt.get("content"), str):
                nxt["content"] = [{"type": "text", "text": nxt["content"]}]
            n = sum(1 for b in nxt["content"] if b.get("type") == "tool_result")
            nxt["content"][n:n] = new
        else:
            messages.insert(i + 1, {"role": "user", "content": new})
        for b in new:
            changes.append(Change("added", f"messages[{i + 1}]",
                                  f"an 'interrupted' tool_result for {b['tool_use_id']!r}"))
    return changes


# -- examples: a request each rule refuses, and the same request made right (the conformance suite runs them) --

_USER = {"role": "user", "content": "Add 1 and 2"}
_THINK = {"type": "thinking", "thinking": "add them", "signature": "good"}
_USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}}
_CALL = {"role": "assistant", "content": [_THINK, _USE]}
_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}
_ANSWER = {"role": "user", "content": [_RESULT]}
_TOOLS = [{"name": "add", "input_schema": {"type": "object"}}]


def _messages(*messages: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"messages": list(messages), **body}


RULES = (
    Rule("bad_role", "roles are user and assistant; a system entry depends on the model family", _roles,
         codes=("bad_role", "system_not_first"), refuses=_messages(_USER, {"role": "critic", "content": "x"}),
         accepts=_messages(_USER, {"role": "system", "content": "Be brief."}, model="claude-opus-5")),
    Rule("arguments_not_object", "a tool_use input that is not an object", _arguments,
         fix=fix_arguments(lambda items, i, j: items[i]["content"][j or 0], "input", {}),
         refuses=_messages(_USER, {"role": "assistant", "content": [{**_USE, "input": [1, 2]}]}, _ANSWER),
         accepts=_messages(_USER, _CALL, _ANSWER)),
    Rule("tools_undefined", "tool_use/tool_result blocks need tools", _tools,
         refuses=_messages(_USER, _CALL, _ANSWER, tools=[]), accepts=_messages(_USER, _CALL, _ANSWER, tools=_TOOLS)),
    Rule("results_not_first", "tool_result blocks first in the next user message", _results_first,
         fix=_fix_placement, moves=True,
         refuses=_messages(_USER, _CALL, {"role": "user", "content": [{"type": "text", "text": "here"}, _RESULT]}),
         accepts=_messages(_USER, _CALL, {"role": "user", "content": [_RESULT, {"type": "text", "text": "here"}]})),
    Rule("unanswered_call", "each tool_use answered exactly once, in the next user message", _pairing,
         fix=_fix_unanswered, moves=True,
         codes=("orphan_result", "result_before_call", "duplicate_result", "unanswered_call", "duplicate_call_id"),
         refuses=_messages(_USER, _CALL, _USER), accepts=_messages(_USER, _CALL, _ANSWER)),
    Rule("missing_signature", "thinking blocks keep their signatures (and, with the emulator, its own)", _signatures,
         codes=("missing_signature", "invalid_signature"),
         refuses=_messages(_USER, {"role": "assistant", "content": [{**_THINK, "signature": "altered"}, _USE]},
                           _ANSWER),
         accepts=_messages(_USER, _CALL, _ANSWER), context=Context(verify=lambda kind, value, text: value == "good")),
    Rule("missing_signature", "with thinking on, the last tool-use turn starts with its thinking block",
         _thinking_first, refuses=_messages(_USER, {"role": "assistant", "content": [_USE]}, _ANSWER,
                                             thinking={"type": "enabled", "budget_tokens": 1024}),
         accepts=_messages(_USER, _CALL, _ANSWER, thinking={"type": "enabled", "budget_tokens": 1024})),
    Rule("empty_text", "text blocks must be non-empty", _empty_text,
         refuses=_messages({"role": "user", "content": [{"type": "text", "text": ""}]}), accepts=_messages(_USER)),
)
