"""The history linter: is a message list valid for its provider, and if not, where and why.

Theory of operation. A provider checks every request against rules the wire format alone does not show:
each tool call answered exactly once, results placed where that API wants them, continuation data
(thinking signatures, reasoning items, thought signatures) sent back where it is required. A broken history
is a 400 at the worst moment, usually many turns into a run. :func:`lint` runs those checks offline, on a
history in the provider's own wire shape (the user's own, or one agentnb rendered) and reports each
finding with its position and the message the service answers with. ``fix=True`` returns a repaired copy.

The same checks are the request validation of the local emulator (:mod:`agentnb.emulator`): it calls
:func:`validate` on every request and answers the first error with the service's 400 error shape. One
validator, so the linter and the emulator never disagree. The emulator adds a :class:`Context` that knows
what it issued (signatures it made, reasoning items that preceded a call); without one, the linter checks
presence only.

What is checked (provider messages quoted from the services where marked *, otherwise phrased after them):

========================= ============================================================================
check                     providers
========================= ============================================================================
malformed                 all: a value of the wrong JSON type where the format wants an object, a list
                          or a string (each service's validation error*, see :mod:`agentnb._shapes`)
arguments not an object   all: a call whose arguments are not a JSON object (OpenAI-compatible servers
                          such as vLLM*, Anthropic* ``tool_use.input``, Gemini* ``functionCall.args``);
                          ``fix=True`` puts ``{}`` in their place, as the adapters send
orphan result             all: a result for a call id not issued before it (OpenAI*, Anthropic*,
                          Responses*; Gemini: response parts that match no call of the call turn).
                          Responses with server-side state (``previous_response_id``,
                          ``conversation``, ``item_reference`` items) may answer calls not in
                          ``input``: not checked there
result before its call    all: a result whose call comes later (reported apart from orphans)
unanswered call           all (OpenAI*, Anthropic*, Responses*, Gemini* count rule)
duplicate call id         all (a second call with an id already issued)
results not first         Anthropic*: ``tool_result`` blocks must begin the next user message
tools not defined         Anthropic*: ``tool_use``/``tool_result`` blocks need ``tools``;
                          OpenAI Chat*: ``tool_choice`` without ``tools``
missing signature         Anthropic*: a thinking block without ``signature``; with thinking enabled the
                          last assistant turn with tool use must start with a thinking block*;
                          Gemini 3*: the first function call of each step of the current turn needs a
                          ``thoughtSignature``
missing reasoning         Responses*: a function call sent without the reasoning item that preceded it
                          (needs the emulator's context); a reasoning item, at any position, not
                          followed by the model's own output item (an edited message without its id,
                          a user message, a tool output, the end)*;
                          OpenAI-compatible reasoning servers*: ``reasoning_content`` on a tool-call turn
invalid signature         with the emulator's context: signatures it did not issue (Anthropic*,
                          Gemini*, Responses*); Gemini's documented placeholder signatures are accepted
system after the start    Anthropic: a ``system`` entry inside ``messages`` is taken by the newest
                          families (``ANTHROPIC_INLINE_SYSTEM``), refused by the older ones* (an error
                          when the model is one of them), a warning when the model is unknown;
                          Gemini*: no system role in ``contents`` (an error); OpenAI Chat and
                          Responses accept it (a warning)
bad role                  all
========================= ============================================================================

Anthropic and Gemini read consecutive messages of one role as one turn (the pairing rules run on merged
turns); so do these checks. The rules were checked against the recorded traffic in
``tests/fixtures/conformance`` (``bench/conformance.py`` prints the agreement).

Sources: https://platform.openai.com/docs/guides/function-calling,
https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use,
https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks,
https://ai.google.dev/gemini-api/docs/function-calling, https://ai.google.dev/gemini-api/docs/thought-signatures,
https://api-docs.deepseek.com/guides/thinking_mode (``reasoning_content`` with tool calls).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from ._shapes import normalize
from .messages import Message

__all__ = ["Change", "Context", "Finding", "lint", "validate"]

Provider = Literal["openai_chat", "openai_responses", "anthropic", "gemini"]
PROVIDERS: tuple[str, ...] = ("openai_chat", "openai_responses", "anthropic", "gemini")
INTERRUPTED = "interrupted: this call was not run (the conversation was cut before its result)"
"""The result text ``fix=True`` gives an unanswered call."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in a history.

    Attributes:
        code: ``orphan_result``, ``result_before_call``, ``unanswered_call``, ``duplicate_call_id``,
            ``results_not_first``, ``tools_undefined``, ``tool_choice_without_tools``, ``missing_signature``,
            ``invalid_signature``, ``missing_reasoning``, ``system_not_first``, ``bad_role``, ``empty_text``,
            ``arguments_not_object``, ``malformed`` (a value of the wrong JSON type), ``unreadable`` (a
            shape no rule expected: reported instead of raised).
        position: where, in the provider's own terms (``messages[3].content[1]``, ``input[4]``,
            ``contents[2].parts[0]``).
        index: the message (item, content) index.
        message: what is wrong, in plain words.
        provider_message: what the service answers (the ``message`` of its 400 error).
        severity: ``error`` (the service refuses the request) or ``warning`` (accepted, but likely a bug).
        call_id: the call concerned, when there is one.
        param: OpenAI's ``param`` field for this error, when it has one.
    """

    code: str
    position: str
    index: int
    message: str
    provider_message: str
    severity: Literal["error", "warning"] = "error"
    call_id: str | None = None
    param: str | None = None
    part: int | None = None

    def __str__(self) -> str:
        return f"{self.severity} {self.code} at {self.position}: {self.message}"


@dataclass(frozen=True, slots=True)
class Change:
    """One repair made by ``lint(..., fix=True)``: ``added``, ``dropped``, ``moved`` or ``replaced``, where, what."""

    action: Literal["added", "dropped", "moved", "replaced"]
    position: str
    detail: str

    def __str__(self) -> str:
        return f"{self.action} {self.position}: {self.detail}"


@dataclass(slots=True)
class Context:
    """What a validator knows beyond the request (the emulator fills it in; the linter runs without).

    Attributes:
        verify: ``verify(kind, value, content) -> bool`` checks a signature or encrypted content the caller
            issued (``kind`` is ``thinking``, ``thought`` or ``reasoning``); None skips the check.
        reasoning_for: the reasoning item id that preceded a Responses function-call item id, if issued.
        reasoning_content_for: call ids whose assistant turn came with ``reasoning_content``.
        require_thought_signatures: Gemini: signatures on function calls are required (Gemini 3 models).
    """

    verify: Callable[[str, str, str], bool] | None = None
    reasoning_for: dict[str, str] = field(default_factory=dict)
    reasoning_content_for: set[str] = field(default_factory=set)
    require_thought_signatures: bool | None = None


# -- the shared pairing rule ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Unit:
    """One message of any wire shape, reduced to what pairing needs."""

    index: int
    role: str
    calls: list[tuple[str, str, int | None, int]] = field(default_factory=list)
    """(id, name, part index, message index)."""
    results: list[tuple[str, str, int | None, int]] = field(default_factory=list)
    first_result: int = 0
    """How many parts come before the first result (Anthropic wants 0)."""
    other: bool = False
    """Holds something besides results (text, images)."""
    n_other: int = 0
    """How many parts are not results."""
    last: int = -1
    """The index of the last message of a merged turn (see :func:`_merge_turns`); -1: ``index``."""

    def __post_init__(self) -> None:
        if self.last < 0:
            self.last = self.index


def _merge_turns(units: list[_Unit]) -> list[_Unit]:
    """Consecutive messages of one role as one turn, as Anthropic and Gemini read them.

    Both services join consecutive same-role messages before checking a history: two assistant messages in
    a row whose calls the next user message answers are accepted (recorded in the conformance corpus,
    ``tests/fixtures/conformance``), and Anthropic documents that "consecutive user or assistant turns in
    your request will be combined into a single turn" (https://docs.anthropic.com/en/api/messages).
    """
    out: list[_Unit] = []
    for u in units:
        if out and out[-1].role == u.role:
            m = out[-1]
            if u.results and not m.results:
                m.first_result = m.n_other + u.first_result
            m.calls.extend(u.calls)
            m.results.extend(u.results)
            m.other = m.other or u.other
            m.n_other += u.n_other
            m.last = u.last
        else:
            out.append(_Unit(u.index, u.role, list(u.calls), list(u.results), u.first_result, u.other, u.n_other,
                             u.last))
    return out


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _not_object(index: int, part: int | None, where: str, value: Any, provider_message: str,
                call_id: str | None, param: str | None = None) -> Finding:
    """A call whose arguments are not a JSON object (see ``arguments_not_object`` in the module docs)."""
    return Finding("arguments_not_object", where, index,
                   f"the call's arguments are not a JSON object ({_short(value)}): send {{}} in their place and "
                   "keep the raw text in the result that tells the model what was wrong",
                   provider_message, call_id=call_id, param=param, part=part)


def _args_object(raw: Any) -> bool:
    """Whether an argument text (Chat, Responses) is a JSON object (``""`` counts: servers read it as ``{}``)."""
    if raw == "":
        return True
    if not isinstance(raw, str):
        return False
    try:
        return isinstance(json.loads(raw), dict)
    except (ValueError, RecursionError):
        return False


def _fix_arguments(findings: list[Finding], locate: Callable[[int, int | None], Any], key: str,
                   empty: Any) -> list[Change]:
    changes = []
    for f in findings:
        if f.code == "arguments_not_object":
            locate(f.index, f.part)[key] = copy.copy(empty)
            changes.append(Change("replaced", f.position, f"arguments that are not a JSON object by {empty!r}"))
    return changes


@dataclass(slots=True)
class _Raw:
    code: str
    unit: int
    part: int | None
    call_id: str
    name: str = ""
    ids: list[str] = field(default_factory=list)
    count: tuple[int, int] = (0, 0)


def _pair(  # noqa: C901 -- one pass with the three placement rules side by side
    units: list[_Unit], slot: Literal["run", "next", "anywhere"], by_name: bool = False
) -> list[_Raw]:
    """Calls and results paired by the provider's placement rule.

    ``run``: the results are the run of ``tool`` messages right after the call (Chat); ``next``: the results
    are in the very next message (Anthropic, Gemini); ``anywhere``: any later item (Responses). ``by_name``
    matches Gemini's id-less responses to calls by name.
    """
    out: list[_Raw] = []
    issued_at: dict[str, int] = {}
    for u in units:
        for cid, _, _, at in u.calls:
            if cid:
                issued_at.setdefault(cid, at)
    seen_calls: set[str] = set()
    answered: set[str] = set()
    waiting: list[tuple[_Unit, tuple[str, str, int | None, int], str]] = []
    owner: int | None = None  # list position of the message whose calls are waiting

    def flush() -> None:
        for _u, c, k in waiting:
            if k not in answered:
                out.append(_Raw("unanswered_call", c[3], c[2], c[0], c[1]))
        waiting.clear()

    for pos, u in enumerate(units):
        if slot == "next":
            in_slot = owner is not None and pos == owner + 1
        elif slot == "run":
            in_slot = owner is not None and u.role == "tool"
        else:
            in_slot = True
        if not in_slot and slot != "anywhere":
            flush()
            owner = None
        open_keys = {k: c for _, c, k in waiting if k not in answered} if in_slot else {}
        by_names: dict[str, list[str]] = {}
        for k, c in open_keys.items():
            by_names.setdefault(c[1], []).append(k)
        for rid, rname, j, at in u.results:
            key = rid or f"name:{rname}"
            if key not in open_keys and by_name and by_names.get(rname):
                key = by_names[rname].pop(0)
            if key in open_keys and key not in answered:
                answered.add(key)
            elif rid and rid in answered:
                out.append(_Raw("duplicate_result", at, j, rid, rname))
            elif rid and issued_at.get(rid, -1) > at:
                out.append(_Raw("result_before_call", at, j, rid, rname))
            else:
                out.append(_Raw("orphan_result", at, j, rid, rname))
        if u.calls:
            if slot != "anywhere":
                flush()
            for n, c in enumerate(u.calls):
                if c[0] and c[0] in seen_calls:
                    out.append(_Raw("duplicate_call_id", c[3], c[2], c[0], c[1]))
                    continue
                if c[0]:
                    seen_calls.add(c[0])
                waiting.append((u, c, c[0] or f"name:{c[1]}#{u.index}.{n}"))
            owner = pos
    flush()
    return out


# -- OpenAI Chat Completions ------------------------------------------------------------------------------

_CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _chat_units(messages: list[Any]) -> list[_Unit]:
    units = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        u = _Unit(i, str(role))
        if role == "assistant":
            for j, tc in enumerate(m.get("tool_calls") or ()):
                u.calls.append((tc.get("id") or "", (tc.get("function") or {}).get("name") or "", j, i))
        elif role == "tool":
            u.results.append((m.get("tool_call_id") or "", "", None, i))
        units.append(u)
    return units


def _check_chat(body: dict[str, Any], ctx: Context | None) -> list[Finding]:  # noqa: C901
    messages = body.get("messages") or []
    out: list[Finding] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if m.get("malformed"):
            continue
        if role not in _CHAT_ROLES:
            out.append(Finding("bad_role", f"messages[{i}].role", i, f"role {role!r} is not a Chat role",
                               f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                               "'function', 'tool', and 'developer'.", param=f"messages.[{i}].role"))
        elif role in ("system", "developer") and any(
                isinstance(p, dict) and p.get("role") not in ("system", "developer") for p in messages[:i]):
            out.append(Finding("system_not_first", f"messages[{i}]", i,
                               f"a {role} message after the conversation started (accepted, but easy to miss)",
                               "", "warning"))
        for j, tc in enumerate(m.get("tool_calls") or ()):
            raw = tc["function"].get("arguments")
            if raw is not None and not _args_object(raw):
                out.append(_not_object(i, j, f"messages[{i}].tool_calls[{j}].function.arguments", raw,
                                       _compatible_server_message(raw), tc.get("id") or None,
                                       f"messages.[{i}].tool_calls.[{j}].function.arguments"))
    for r in _pair(_chat_units(messages), "run"):
        pos = f"messages[{r.unit}]" + (f".tool_calls[{r.part}]" if r.part is not None else "")
        if r.code in ("orphan_result", "result_before_call", "duplicate_result"):
            prev = _previous_chat_calls(messages, r.unit)
            if prev is None:
                text = ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        "with 'tool_calls'.")
            else:
                text = (f"Invalid parameter: 'tool_call_id' of '{r.call_id}' not found in 'tool_calls' of previous "
                        "message.")
            what = {"orphan_result": "answers no call issued before it",
                    "result_before_call": "comes before the call it answers",
                    "duplicate_result": "answers a call already answered"}[r.code]
            out.append(Finding(r.code, pos, r.unit, f"the tool message for {r.call_id!r} {what}", text,
                               "warning" if r.code == "duplicate_result" else "error", r.call_id,
                               f"messages.[{r.unit}].role"))
        elif r.code == "unanswered_call":
            ids = [x.call_id for x in _pair(_chat_units(messages), "run")
                   if x.code == "unanswered_call" and x.unit == r.unit]
            out.append(Finding(r.code, pos, r.unit, f"call {r.call_id!r} ({r.name}) has no tool message after it",
                               "An assistant message with 'tool_calls' must be followed by tool messages responding "
                               f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                               f"{', '.join(ids)}", call_id=r.call_id, param=f"messages.[{r.unit}].role", part=r.part))
        elif r.code == "duplicate_call_id":
            out.append(Finding(r.code, pos, r.unit, f"call id {r.call_id!r} was already used by an earlier call",
                               f"Invalid 'messages[{r.unit}].tool_calls': duplicate tool call id '{r.call_id}'.",
                               call_id=r.call_id, param=f"messages.[{r.unit}].tool_calls", part=r.part))
    if body.get("tool_choice") is not None and not body.get("tools") and "messages" in body and "tools" in body:
        out.append(_tool_choice_finding())
    if ctx is not None and ctx.reasoning_content_for:
        for i, m in enumerate(messages):
            if m.get("role") == "assistant" and not m.get("reasoning_content") and any(
                    (tc.get("id") in ctx.reasoning_content_for) for tc in m.get("tool_calls") or ()):
                out.append(Finding("missing_reasoning", f"messages[{i}]", i,
                                   "this tool-call turn came with reasoning_content, which must be sent back",
                                   f"Missing `reasoning_content` field in the assistant message at message index {i}",
                                   param=f"messages.[{i}].reasoning_content"))
    return out


def _compatible_server_message(raw: Any) -> str:
    """What an OpenAI-compatible server answers for a history call whose arguments are not a JSON object.

    vLLM (and the proxies in front of it) ``json.loads`` the arguments of earlier calls before rendering the
    chat template (``_postprocess_messages`` in ``vllm/entrypoints/chat_utils.py``; an empty string becomes
    ``{}``): invalid JSON fails with the decoder's message, and a value that is not an object fails in the
    chat templates that iterate the arguments' items (Jinja's "Can only get item pairs from a mapping.").
    The OpenAI service itself accepts such histories; ``{}`` is accepted by all.
    """
    if isinstance(raw, str):
        try:
            json.loads(raw)
        except ValueError as exc:
            return str(exc)
        except RecursionError:
            return "maximum recursion depth exceeded while decoding a JSON document"
    return "Can only get item pairs from a mapping."


def _tool_choice_finding() -> Finding:
    return Finding("tool_choice_without_tools", "tool_choice", -1, "tool_choice is set but no tools are offered",
                   "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                   param="tool_choice")


def _previous_chat_calls(messages: list[Any], i: int) -> list[str] | None:
    k = i - 1
    while k >= 0 and messages[k].get("role") == "tool":
        k -= 1
    if k >= 0 and messages[k].get("role") == "assistant" and messages[k].get("tool_calls"):
        return [tc.get("id") for tc in messages[k]["tool_calls"]]
    return None


def _fix_chat(messages: list[Any], findings: list[Finding]) -> list[Change]:
    changes = _fix_arguments(findings, lambda i, j: messages[i]["tool_calls"][j or 0]["function"], "arguments", "{}")
    drop = {f.index for f in findings if f.code in ("orphan_result", "result_before_call", "duplicate_result")}
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


# -- OpenAI Responses -------------------------------------------------------------------------------------


def _responses_units(items: list[Any]) -> list[_Unit]:
    units = []
    for i, it in enumerate(items):
        kind = it.get("type") if isinstance(it, dict) else None
        if kind is None and isinstance(it, dict) and "role" in it:
            kind = "message"
        u = _Unit(i, str(it.get("role") or kind) if isinstance(it, dict) else "?")
        if kind == "function_call":
            u.calls.append((it.get("call_id") or "", it.get("name") or "", None, i))
        elif kind == "function_call_output":
            u.results.append((it.get("call_id") or "", "", None, i))
        units.append(u)
    return units


def _check_responses(body: dict[str, Any], ctx: Context | None) -> list[Finding]:  # noqa: C901
    items = body.get("input")
    if not isinstance(items, list):
        return []
    out: list[Finding] = []
    ids: set[str] = set()
    started = False
    for i, it in enumerate(items):
        kind = it.get("type") or ("message" if "role" in it else None)
        item_id = it.get("id")
        if item_id:
            if item_id in ids:
                out.append(Finding("duplicate_call_id" if kind == "function_call" else "duplicate_item", f"input[{i}]",
                                   i, f"item id {item_id!r} appears twice",
                                   f"Duplicate item found with id {item_id}. Remove duplicate items from your input "
                                   "and try again.", param="input"))
            ids.add(item_id)
        if kind == "message":
            role = it.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                out.append(Finding("bad_role", f"input[{i}].role", i, f"role {role!r} is not a Responses role",
                                   f"Invalid value: '{role}'. Supported values are: 'assistant', 'system', "
                                   "'developer', and 'user'.", param=f"input[{i}].role"))
            elif role in ("system", "developer") and started:
                out.append(Finding("system_not_first", f"input[{i}]", i,
                                   f"a {role} message after the conversation started (accepted, but easy to miss)",
                                   "", "warning"))
            else:
                started = started or role in ("user", "assistant")
        elif kind == "reasoning":
            if not _follows_reasoning(items[i + 1] if i + 1 < len(items) else None):
                out.append(Finding("missing_reasoning", f"input[{i}]", i,
                                   "a reasoning item must be followed by the output item it led to (an edited or "
                                   "new message in its place does not count)",
                                   f"Item '{item_id}' of type 'reasoning' was provided without its required "
                                   "following item.", param="input"))
            if body.get("store") is False and not it.get("encrypted_content"):
                out.append(Finding("missing_reasoning", f"input[{i}]", i,
                                   "with store=false a reasoning item needs its encrypted_content",
                                   f"Item with id '{item_id}' not found. Items are not persisted when `store` is "
                                   "set to false. Try again with `store` set to true, or remove this item from your "
                                   "input.", param="input"))
            elif ctx is not None and ctx.verify is not None and it.get("encrypted_content") and not (isinstance(
                    it["encrypted_content"], str) and ctx.verify("reasoning", it["encrypted_content"], str(item_id))):
                out.append(Finding("invalid_signature", f"input[{i}].encrypted_content", i,
                                   "the encrypted reasoning content was altered",
                                   f"The encrypted content for item {item_id} could not be verified.", param="input"))
        if kind == "function_call" and "arguments" in it and not _args_object(it["arguments"]):
            out.append(_not_object(i, None, f"input[{i}].arguments", it["arguments"],
                                   _compatible_server_message(it["arguments"]), it.get("call_id") or None, "input"))
        if kind == "function_call" and ctx is not None and item_id in ctx.reasoning_for:
            rs = ctx.reasoning_for[item_id]
            if not any(isinstance(p, dict) and p.get("id") == rs for p in items[:i]):
                out.append(Finding("missing_reasoning", f"input[{i}]", i,
                                   f"the call came after reasoning item {rs!r}, which was not sent back",
                                   f"Item '{item_id}' of type 'function_call' was provided without its required "
                                   f"'reasoning' item: '{rs}'.", call_id=it.get("call_id"), param="input"))
    # With server-side state (previous_response_id, conversation, or item references to stored items) a
    # function_call_output may answer a call that is not in `input`: the service accepts it (recorded in the
    # conformance corpus), so only what the input itself shows is checked.
    stateful = bool(body.get("previous_response_id") or body.get("conversation")) or any(
        it.get("type") == "item_reference" for it in items)
    for r in _pair(_responses_units(items), "anywhere"):
        pos = f"input[{r.unit}]"
        if r.code in ("orphan_result", "result_before_call") and stateful:
            continue
        if r.code in ("orphan_result", "result_before_call", "duplicate_result"):
            out.append(Finding(r.code, pos, r.unit, f"the output for {r.call_id!r} " + {
                "orphan_result": "answers no call in the input",
                "result_before_call": "comes before its function_call item",
                "duplicate_result": "answers a call already answered"}[r.code],
                f"No tool call found for function call output with call_id {r.call_id}.",
                "warning" if r.code == "duplicate_result" else "error", r.call_id, "input"))
        elif r.code == "unanswered_call":
            out.append(Finding(r.code, pos, r.unit, f"call {r.call_id!r} ({r.name}) has no function_call_output",
                               f"No tool output found for function call {r.call_id}.", call_id=r.call_id,
                               param="input"))
        elif r.code == "duplicate_call_id" and not any(f.index == r.unit and f.code == r.code for f in out):
            out.append(Finding(r.code, pos, r.unit, f"call id {r.call_id!r} was already used by an earlier call",
                               f"Duplicate value for 'call_id' of {r.call_id} in input.", call_id=r.call_id,
                               param="input"))
    return out


def _follows_reasoning(nxt: Any) -> bool:
    """Whether an input item can be the output item a reasoning item led to.

    The service keeps the pair together: "Item 'rs_...' of type 'reasoning' was provided without its required
    following item." when the reasoning item ends the input, or is followed by anything that is not one of
    the model's own output items (a user message, a tool output, or an assistant message without its id, as
    an edited history sends; recorded in the conformance corpus).
    """
    if not isinstance(nxt, dict):
        return False
    kind = nxt.get("type") or ("message" if "role" in nxt else None)
    if kind == "message":
        return nxt.get("role") == "assistant" and bool(nxt.get("id"))
    return kind not in (None, "malformed", "function_call_output") and not str(kind).endswith("_output")


def _fix_responses(items: list[Any], findings: list[Finding]) -> list[Change]:
    changes = _fix_arguments(findings, lambda i, j: items[i], "arguments", "{}")
    drop = {f.index for f in findings if f.code in ("orphan_result", "result_before_call", "duplicate_result")}
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


# -- Anthropic Messages -----------------------------------------------------------------------------------


def _blocks(m: Any) -> list[Any]:
    content = m.get("content") if isinstance(m, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or ())


def _anthropic_units(messages: list[Any]) -> list[_Unit]:
    units = []
    for i, m in enumerate(messages):
        u = _Unit(i, str(m.get("role")))
        seen_other = 0
        for j, b in enumerate(_blocks(m)):
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


ANTHROPIC_INLINE_SYSTEM = ("claude-opus-4-8", "claude-opus-5", "claude-fable-5", "claude-mythos-5")
"""Model families that accept ``{"role": "system"}`` entries inside ``messages`` (text, and the
``tool_addition``/``tool_removal`` blocks of mid-conversation tool changes), as Anthropic lists them. Older
models refuse the entry ("role 'system' is not supported on this model"); ``claude-sonnet-5`` accepts it and
ignores it."""


ANTHROPIC_NO_INLINE_SYSTEM = ("claude-2", "claude-instant", "claude-3", "claude-sonnet-4", "claude-opus-4",
                              "claude-haiku-4")
"""Model families known to refuse a ``system`` entry inside ``messages`` (``claude-opus-4-8`` excepted)."""


def _anthropic_system(u: _Unit, model: str) -> Finding | None:
    """A ``system`` entry inside ``messages``: fine, an error or a warning, by model family.

    Fine on the models that take it, an error on those known to refuse it, a warning when the model is not
    known (or accepts the entry and ignores it).
    """
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


def _check_anthropic(body: dict[str, Any], ctx: Context | None) -> list[Finding]:  # noqa: C901
    messages = body.get("messages") or []
    out: list[Finding] = []
    all_units = _anthropic_units(messages)
    for u in all_units:
        if u.role == "system":
            found = _anthropic_system(u, str(body.get("model") or ""))
            if found is not None:
                out.append(found)
        elif u.role not in ("user", "assistant") and not messages[u.index].get("malformed"):
            out.append(Finding("bad_role", f"messages[{u.index}].role", u.index,
                               f"role {u.role!r} inside messages (the roles are user and assistant)",
                               f"messages.{u.index}.role: Input should be 'user' or 'assistant'"))
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for j, b in enumerate(_blocks(m)):
            if b.get("type") == "tool_use" and "input" in b and not isinstance(b["input"], dict):
                out.append(_not_object(i, j, f"messages[{i}].content[{j}].input", b["input"],
                                       f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary",
                                       b.get("id") or None))
    # Consecutive turns of one role are one turn to the service; system entries (where the model takes
    # them) are instructions between turns, not turns.
    units = _merge_turns([u for u in all_units if u.role in ("user", "assistant")])
    tool_blocks = any(u.calls or u.results for u in units)
    if tool_blocks and not body.get("tools") and "messages" in body and "tools" in body:
        out.append(Finding("tools_undefined", "tools", -1, "tool_use/tool_result blocks in the history but no tools",
                           "Requests which include `tool_use` or `tool_result` blocks must define tools."))
    not_first: set[int] = set()  # messages whose calls are answered, but not first in the next turn
    for k, u in enumerate(units):
        if not u.calls:
            continue
        nxt = units[k + 1] if k + 1 < len(units) else None
        if nxt is not None and nxt.results and nxt.first_result > 0:
            not_first.update(c[3] for c in u.calls)
            out.append(Finding("results_not_first", f"messages[{nxt.index}]", nxt.index,
                               "tool_result blocks must come first in the user message, before any text",
                               f"messages.{nxt.index}: Did not find {len(u.calls)} `tool_result` block(s) at the "
                               "beginning of this message. Messages following `tool_use` blocks must begin with a "
                               "matching number of `tool_result` blocks."))
    raws = _pair(units, "next")
    unanswered: dict[int, list[str]] = {}  # keyed by the message of each call
    for r in raws:
        if r.code == "unanswered_call":
            unanswered.setdefault(r.unit, []).append(r.call_id)
    for r in raws:
        pos = f"messages[{r.unit}].content[{r.part}]"
        if r.code in ("orphan_result", "result_before_call", "duplicate_result"):
            out.append(Finding(r.code, pos, r.unit, f"the tool_result for {r.call_id!r} " + {
                "orphan_result": "answers no tool_use of the previous message",
                "result_before_call": "comes before its tool_use",
                "duplicate_result": "answers a tool_use already answered"}[r.code],
                f"messages.{r.unit}.content.{r.part}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{r.call_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous "
                "message.", call_id=r.call_id, part=r.part))
        elif r.code == "unanswered_call":
            if r.unit in not_first:
                continue
            out.append(Finding(r.code, pos, r.unit, f"tool_use {r.call_id!r} ({r.name}) has no tool_result in the "
                               "next message", f"messages.{r.unit}: `tool_use` ids were found without `tool_result` "
                               f"blocks immediately after: {', '.join(unanswered[r.unit])}. Each `tool_use` block must "
                               "have a corresponding `tool_result` block in the next message.", call_id=r.call_id,
                               part=r.part))
        elif r.code == "duplicate_call_id":
            out.append(Finding(r.code, pos, r.unit, f"tool_use id {r.call_id!r} was already used",
                               f"messages.{r.unit}.content.{r.part}: `tool_use` ids must be unique",
                               call_id=r.call_id, part=r.part))
    out.extend(_anthropic_thinking(body, messages, ctx))
    for i, m in enumerate(messages):
        for j, b in enumerate(_blocks(m)):
            if b.get("type") == "text" and not b.get("text") and isinstance(m.get("content"), list):
                out.append(Finding("empty_text", f"messages[{i}].content[{j}]", i, "an empty text block",
                                   f"messages.{i}.content.{j}.text: text content blocks must be non-empty", part=j))
    return out


def _anthropic_thinking(body: dict[str, Any], messages: list[Any], ctx: Context | None) -> list[Finding]:
    out: list[Finding] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for j, b in enumerate(_blocks(m)):
            if b.get("type") != "thinking":
                continue
            if not b.get("signature"):
                out.append(Finding("missing_signature", f"messages[{i}].content[{j}]", i,
                                   "a thinking block without its signature",
                                   f"messages.{i}.content.{j}.thinking.signature: Field required", part=j))
            elif ctx is not None and ctx.verify is not None and not (isinstance(b["signature"], str) and ctx.verify(
                    "thinking", b["signature"], str(b.get("thinking") or ""))):
                out.append(Finding("invalid_signature", f"messages[{i}].content[{j}]", i,
                                   "the thinking block was altered (its signature does not match)",
                                   f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block", part=j))
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
        if last is not None and any(b.get("type") == "tool_use" for b in _blocks(messages[last])):
            first: dict[str, Any] = next(iter(_blocks(messages[last])), {})
            if first.get("type") not in ("thinking", "redacted_thinking"):
                out.append(Finding(
                    "missing_signature", f"messages[{last}].content[0]", last,
                    "with thinking enabled, the last assistant turn with tool use must start with its thinking block",
                    f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a "
                    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
                    "you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.",
                    part=0))
    return out


def _fix_anthropic(messages: list[Any], findings: list[Finding]) -> list[Change]:
    changes = _fix_arguments(findings, lambda i, j: messages[i]["content"][j or 0], "input", {})
    for i, m in enumerate(messages):
        if isinstance(m.get("content"), str):
            continue
        blocks = m.get("content") or []
        drops = {f.part for f in findings if f.index == i and f.code in (
            "orphan_result", "result_before_call", "duplicate_result")}
        if drops:
            for j in sorted((d for d in drops if d is not None), reverse=True):
                changes.append(Change("dropped", f"messages[{i}].content[{j}]",
                                      f"orphan tool_result for {blocks[j].get('tool_use_id')!r}"))
                del blocks[j]
        if any(f.index == i and f.code == "results_not_first" for f in findings):
            results = [b for b in blocks if b.get("type") == "tool_result"]
            m["content"] = results + [b for b in blocks if b.get("type") != "tool_result"]
            changes.append(Change("moved", f"messages[{i}]", f"{len(results)} tool_result block(s) to the start"))
    inserts: list[tuple[int, list[dict[str, Any]]]] = []
    for i in sorted({f.index for f in findings if f.code == "unanswered_call"}):
        ids = [f.call_id for f in findings if f.code == "unanswered_call" and f.index == i]
        blocks = [{"type": "tool_result", "tool_use_id": cid, "content": INTERRUPTED, "is_error": True} for cid in ids]
        inserts.append((i, blocks))
    for i, blocks in reversed(inserts):
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if nxt is not None and nxt.get("role") == "user":
            if isinstance(nxt.get("content"), str):
                nxt["content"] = [{"type": "text", "text": nxt["content"]}]
            n = sum(1 for b in nxt["content"] if b.get("type") == "tool_result")
            nxt["content"][n:n] = blocks
        else:
            messages.insert(i + 1, {"role": "user", "content": blocks})
        for b in blocks:
            changes.append(Change("added", f"messages[{i + 1}]",
                                  f"an 'interrupted' tool_result for {b['tool_use_id']!r}"))
    return changes


# -- Gemini -----------------------------------------------------------------------------------------------


def _gemini_units(contents: list[Any]) -> list[_Unit]:
    units = []
    for i, c in enumerate(contents):
        u = _Unit(i, str(c.get("role") or "user"))
        for j, p in enumerate(c.get("parts") or ()):
            if "functionCall" in p:
                fc = p["functionCall"] or {}
                u.calls.append((fc.get("id") or "", fc.get("name") or "", j, i))
            elif "functionResponse" in p:
                fr = p["functionResponse"] or {}
                u.results.append((fr.get("id") or "", fr.get("name") or "", j, i))
            else:
                u.other = True
        units.append(u)
    return units


def _check_gemini(body: dict[str, Any], ctx: Context | None) -> list[Finding]:  # noqa: C901
    contents = body.get("contents") or []
    out: list[Finding] = []
    raw_units = _gemini_units(contents)
    for u in raw_units:
        if u.role not in ("user", "model"):
            out.append(Finding("system_not_first" if u.role == "system" else "bad_role", f"contents[{u.index}].role",
                               u.index, f"role {u.role!r} in contents (the system prompt goes in systemInstruction)",
                               "Please use a valid role: user, model."))
    # The service reads consecutive contents of one role as one turn: two model contents in a row whose calls
    # the next user content answers are accepted (recorded: tests/fixtures/conformance, README "Sources").
    units = _merge_turns(raw_units)
    count_msg = ("Please ensure that the number of function response parts is equal to the number of function call "
                 "parts of the function call turn.")
    for k, u in enumerate(units):
        prev = units[k - 1] if k else None
        if u.calls and prev is not None and not (prev.role == "user"):
            out.append(Finding("call_misplaced", f"contents[{u.index}]", u.index,
                               "a function call turn must follow a user turn or a function response turn",
                               "Please ensure that function call turn comes immediately after a user turn or after a "
                               "function response turn."))
        if u.results and (prev is None or not prev.calls):
            for rid, name, j, at in u.results:
                code = "result_before_call" if any(
                    (rid and c[0] == rid) or (not rid and c[1] == name) for x in units[k + 1:] for c in x.calls
                ) else "orphan_result"
                out.append(Finding(code, f"contents[{at}].parts[{j}]", at,
                                   f"the function response for {name or rid!r} follows no function call turn",
                                   "Please ensure that function response turn comes immediately after a function call "
                                   "turn.", call_id=rid or None, part=j))
        elif u.results and prev is not None and len(u.results) != len(prev.calls):
            out.append(Finding("orphan_result" if len(u.results) > len(prev.calls) else "unanswered_call",
                               f"contents[{u.index}]", u.index,
                               f"{len(u.results)} function response(s) for {len(prev.calls)} call(s)", count_msg))
        if u.calls:
            nxt = units[k + 1] if k + 1 < len(units) else None
            if nxt is not None and not nxt.results:
                out.append(Finding("unanswered_call", f"contents[{u.calls[0][3]}]", u.calls[0][3],
                                   f"{len(u.calls)} call(s) with no function response turn after them", count_msg,
                                   call_id=u.calls[0][0] or None, part=u.calls[0][2]))
    for r in _pair(units, "next", by_name=True):
        if r.code in ("orphan_result",) and not any(f.index == r.unit for f in out):
            out.append(Finding(r.code, f"contents[{r.unit}].parts[{r.part}]", r.unit,
                               f"the function response {r.call_id or r.name!r} matches no call of the call turn",
                               f"Function response for `{r.name}` does not match any function call of the function "
                               "call turn.", call_id=r.call_id or None, part=r.part))
        elif r.code == "duplicate_call_id":
            out.append(Finding(r.code, f"contents[{r.unit}].parts[{r.part}]", r.unit,
                               f"function call id {r.call_id!r} was already used",
                               f"Duplicate function call id {r.call_id}.", "warning", r.call_id, part=r.part))
    for i, c in enumerate(contents):
        if c.get("role") != "model":
            continue
        for j, p in enumerate(c.get("parts") or ()):
            fc = p.get("functionCall")
            if isinstance(fc, dict) and "args" in fc and fc["args"] is not None and not isinstance(fc["args"], dict):
                out.append(_not_object(i, j, f"contents[{i}].parts[{j}].functionCall.args", fc["args"],
                                       f"Invalid value at 'contents[{i}].parts[{j}].function_call.args' "
                                       f"(type.googleapis.com/google.protobuf.Struct), {_short(fc['args'])}",
                                       fc.get("id") or None))
    out.extend(_gemini_signatures(body, contents, ctx))
    return out


GEMINI_PLACEHOLDER_SIGNATURES = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"})
"""The values Google documents for a client that has no real thought signature to send (histories from
another model, or edited by hand): the service then skips the validation
(https://ai.google.dev/gemini-api/docs/thought-signatures, "FAQs")."""


def _gemini_signatures(body: dict[str, Any], contents: list[Any], ctx: Context | None) -> list[Finding]:
    out: list[Finding] = []
    required = ctx.require_thought_signatures if ctx is not None else None
    if required is None:
        required = str(body.get("model") or "").split("/")[-1].startswith("gemini-3")
    start = 0  # the current turn starts after the last user content holding text
    for i, c in enumerate(contents):
        if (c.get("role") or "user") == "user" and any("text" in p for p in c.get("parts") or ()):
            start = i + 1
    for i, c in enumerate(contents):
        if c.get("role") != "model":
            continue
        first = True
        for j, p in enumerate(c.get("parts") or ()):
            sig = p.get("thoughtSignature")
            if "functionCall" in p:
                if first and not sig and i >= start and required:
                    name = (p["functionCall"] or {}).get("name")
                    out.append(Finding(
                        "missing_signature", f"contents[{i}].parts[{j}]", i,
                        f"the first function call of this step ({name}) needs the thoughtSignature it came with",
                        "Function call is missing a thought_signature in functionCall parts. This is required for "
                        "tools to work correctly, and missing thought_signature may lead to degraded model "
                        f"performance. Additional data, function call `default_api:{name}` , position {i + 1}. Please "
                        "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", part=j))
                first = False
            if (sig and sig not in GEMINI_PLACEHOLDER_SIGNATURES and ctx is not None and ctx.verify is not None
                    and not ctx.verify("thought", sig, "")):
                out.append(Finding("invalid_signature", f"contents[{i}].parts[{j}]", i,
                                   "this thoughtSignature was not issued for this conversation",
                                   "Corrupted thought signature.", part=j))
    return out


def _fix_gemini(contents: list[Any], findings: list[Finding]) -> list[Change]:
    changes: list[Change] = _fix_arguments(findings, lambda i, j: contents[i]["parts"][j]["functionCall"], "args", {})
    units = _merge_turns(_gemini_units(contents))
    for k in range(len(units) - 1, -1, -1):
        u = units[k]
        nxt = units[k + 1] if k + 1 < len(units) else None
        if u.results and (k == 0 or not units[k - 1].calls):
            for _, name, j, at in reversed(u.results):
                changes.append(Change("dropped", f"contents[{at}].parts[{j}]", f"orphan function response {name!r}"))
                del contents[at]["parts"][j or 0]
                if not contents[at]["parts"]:
                    del contents[at]
        if u.calls and (nxt is None or len(nxt.results) < len(u.calls)):
            answered = [name for _, name, _, _ in (nxt.results if nxt else [])]
            missing = list(u.calls)
            for name in answered:
                for c in missing:
                    if c[1] == name:
                        missing.remove(c)
                        break
            parts = [{"functionResponse": {"name": name, "response": {"error": INTERRUPTED},
                                           **({"id": cid} if cid else {})}} for cid, name, _, _ in missing]
            if nxt is not None and nxt.results:
                last = nxt.results[-1]
                contents[last[3]]["parts"][(last[2] or 0) + 1:(last[2] or 0) + 1] = parts
            else:
                contents.insert(u.last + 1, {"role": "user", "parts": parts})
            for p in parts:
                changes.append(Change("added", f"contents[{u.last + 1}]",
                                      f"an 'interrupted' function response for {p['functionResponse']['name']!r}"))
    return changes


# -- the public face --------------------------------------------------------------------------------------

_CHECKS: dict[str, Callable[[dict[str, Any], Context | None], list[Finding]]] = {
    "openai_chat": _check_chat,
    "openai_responses": _check_responses,
    "anthropic": _check_anthropic,
    "gemini": _check_gemini,
}
_LIST_KEY = {"openai_chat": "messages", "openai_responses": "input", "anthropic": "messages", "gemini": "contents"}
_FIXES: dict[str, Callable[[list[Any], list[Finding]], list[Change]]] = {
    "openai_chat": _fix_chat,
    "openai_responses": _fix_responses,
    "anthropic": _fix_anthropic,
    "gemini": _fix_gemini,
}


def validate(provider: str, body: dict[str, Any], context: Context | None = None) -> list[Finding]:
    """All findings for a whole request body of ``provider`` (what the emulator runs on every request).

    Any JSON value is read without an exception: values of the wrong type are ``malformed`` findings
    (:mod:`agentnb._shapes`), and the rules run on the rest.
    """
    return _validate(provider, body, context)[0]


def _validate(provider: str, body: Any, context: Context | None) -> tuple[list[Finding], dict[str, Any]]:
    if provider not in _CHECKS:
        raise ValueError(f"provider={provider!r}: use one of {', '.join(PROVIDERS)}")
    clean, malformed = normalize(provider, body)
    out = [Finding("malformed", m.position, m.index, m.message, m.provider_message, param=m.param) for m in malformed]
    try:
        out.extend(_CHECKS[provider](clean, context))
    except RecursionError:
        out.append(Finding("malformed", "body", -1, "the request is nested too deeply to read",
                           "Invalid request: the JSON body is nested too deeply."))
    except Exception as exc:  # a shape _shapes does not normalize yet: a finding, never a crash (see tests)
        out.append(Finding("unreadable", "body", -1, f"the request could not be read ({type(exc).__name__}: {exc})",
                           "Invalid request."))
    return out, clean


def _as_body(messages: Any, provider: str, tools: Any, model: str | None) -> Any:
    if isinstance(messages, dict):
        body = copy.deepcopy(messages)
    elif isinstance(messages, list | tuple) and messages and all(isinstance(m, Message) for m in messages):
        from .providers import anthropic, gemini, openai_chat, openai_responses

        adapter = {"openai_chat": openai_chat, "openai_responses": openai_responses, "anthropic": anthropic,
                   "gemini": gemini}[provider]
        body = adapter.render_request(list(messages))
    elif isinstance(messages, list | tuple):
        body = {_LIST_KEY[provider]: copy.deepcopy(list(messages))}
    else:  # not a list: reported by the shape check (a string is a valid Responses input)
        body = {_LIST_KEY[provider]: messages}
    if tools is not None:
        body["tools"] = tools
    if model is not None:
        body["model"] = model
    return body


@overload
def lint(messages: Sequence[Any] | dict[str, Any], provider: str, *, fix: Literal[False] = False,
         tools: Any = None, model: str | None = None) -> list[Finding]: ...


@overload
def lint(messages: Sequence[Any] | dict[str, Any], provider: str, *, fix: Literal[True],
         tools: Any = None, model: str | None = None) -> tuple[list[Any], list[Change]]: ...


def lint(messages: Sequence[Any] | dict[str, Any], provider: str, *, fix: bool = False, tools: Any = None,
         model: str | None = None) -> list[Finding] | tuple[list[Any], list[Change]]:
    """Check a history in ``provider``'s wire shape; with ``fix=True``, repair a copy of it.

    Args:
        messages: the message list in the provider's shape (Chat ``messages``, Responses ``input`` items,
            Anthropic ``messages``, Gemini ``contents``), a whole request body, or canonical
            :class:`~agentnb.Message` objects (rendered with the provider's adapter first).
        provider: ``openai_chat``, ``openai_responses``, ``anthropic`` or ``gemini``.
        fix: return ``(repaired_copy, changes)`` instead of the findings: unanswered calls get an
            "interrupted" result, orphan results are dropped, Anthropic results are moved first. Missing
            signatures cannot be repaired; lint the copy again to see what is left.
        tools: the request's tool definitions, to check rules that depend on them (Anthropic).
        model: the model name, to check rules that depend on it (Gemini 3 thought signatures).

    Returns:
        The findings in order of position, or ``(repaired_copy, changes)`` with ``fix=True``.

    Example:
        >>> bad = [{"role": "user", "content": "Add 1 and 2"},
        ...        {"role": "assistant", "content": None, "tool_calls": [
        ...            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
        ...        {"role": "tool", "tool_call_id": "call_9", "content": "3"}]
        >>> for f in lint(bad, "openai_chat"):
        ...     print(f)
        error unanswered_call at messages[1].tool_calls[0]: call 'call_1' (add) has no tool message after it
        error orphan_result at messages[2]: the tool message for 'call_9' answers no call issued before it
        >>> fixed, changes = lint(bad, "openai_chat", fix=True)
        >>> for c in changes:
        ...     print(c)
        dropped messages[2]: orphan tool message for 'call_9'
        added messages[2]: an 'interrupted' result for 'call_1' (add)
        >>> lint(fixed, "openai_chat")
        []
    """
    if provider not in _CHECKS:
        raise ValueError(f"provider={provider!r}: use one of {', '.join(PROVIDERS)}")
    try:
        body = _as_body(messages, provider, tools, model)
    except RecursionError:
        body = {_LIST_KEY[provider]: []}
        deep = Finding("malformed", _LIST_KEY[provider], -1, "the history is nested too deeply to copy",
                       "Invalid request: the JSON body is nested too deeply.")
        return ([], [Change("dropped", _LIST_KEY[provider], deep.message)]) if fix else [deep]
    findings, clean = _validate(provider, body, None)
    findings.sort(key=lambda f: (f.index, f.part if f.part is not None else -1))
    if not fix:
        return findings
    items = clean.get(_LIST_KEY[provider])
    if not isinstance(items, list):
        return ([] if items is None else items), []
    changes = _FIXES[provider](items, findings)
    for f in findings:
        if f.code == "malformed":
            changes.append(Change("dropped", f.position, f.message))
    items[:] = [it for it in items if not it.get("malformed")]
    return items, changes
