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
                          or a string (each service's validation error*, see :mod:`agentnb.providers._shapes`)
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
turns); so do these checks. The checks are small rule objects that live with their wire API
(``agentnb/providers/<api>/rules.py``, see :mod:`agentnb._findings`); this module runs the rules of the API
named, from :data:`agentnb.providers.WIRE_APIS`. The rules were checked against the recorded traffic in
``tests/fixtures/conformance`` (``bench/conformance.py`` prints the agreement).

Sources: https://platform.openai.com/docs/guides/function-calling,
https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use,
https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks,
https://ai.google.dev/gemini-api/docs/function-calling, https://ai.google.dev/gemini-api/docs/thought-signatures,
https://api-docs.deepseek.com/guides/thinking_mode (``reasoning_content`` with tool calls).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal, overload

from ._findings import INTERRUPTED, Change, Context, Finding, fix_rules, run_rules
from ._messages import Message
from .providers._registry import WIRE_APIS, wire_api
from .providers.anthropic._rules import ANTHROPIC_INLINE_SYSTEM, ANTHROPIC_NO_INLINE_SYSTEM
from .providers.gemini._rules import GEMINI_PLACEHOLDER_SIGNATURES

__all__ = ["Change", "Context", "Finding", "lint", "validate"]

Provider = str
"""A wire API name: a key of :data:`agentnb.providers.WIRE_APIS`."""
PROVIDERS: tuple[str, ...] = tuple(WIRE_APIS)
"""Every wire API the linter checks (the registry's names)."""

_REEXPORTED = (INTERRUPTED, ANTHROPIC_INLINE_SYSTEM, ANTHROPIC_NO_INLINE_SYSTEM, GEMINI_PLACEHOLDER_SIGNATURES)


def validate(provider: str, body: dict[str, Any], context: Context | None = None) -> list[Finding]:
    """All findings for a whole request body of ``provider`` (what the emulator runs on every request).

    Any JSON value is read without an exception: values of the wrong type are ``malformed`` findings
    (:mod:`agentnb.providers._shapes`), and the rules run on the rest.
    """
    return validate_view(provider, body, context)[0]


def validate_view(provider: str, body: Any, context: Context | None) -> tuple[list[Finding], dict[str, Any]]:
    api = wire_api(provider)
    clean, malformed = api.normalize(body)
    out = [Finding("malformed", m.position, m.index, m.message, m.provider_message, param=m.param) for m in malformed]
    try:
        out.extend(run_rules(api.rules, api.view(clean, context)))
    except RecursionError:
        out.append(Finding("malformed", "body", -1, "the request is nested too deeply to read",
                           "Invalid request: the JSON body is nested too deeply."))
    except Exception as exc:  # a shape providers/_shapes does not normalize yet: a finding, never a crash (see tests)
        out.append(Finding("unreadable", "body", -1, f"the request could not be read ({type(exc).__name__}: {exc})",
                           "Invalid request."))
    return out, clean


def _as_body(messages: Any, provider: str, tools: Any, model: str | None) -> Any:
    api = wire_api(provider)
    if isinstance(messages, dict):
        body = copy.deepcopy(messages)
    elif isinstance(messages, list | tuple) and messages and all(isinstance(m, Message) for m in messages):
        body = api.render_request(list(messages))
    elif isinstance(messages, list | tuple):
        body = {api.list_key: copy.deepcopy(list(messages))}
    else:  # not a list: reported by the shape check (a string is a valid Responses input)
        body = {api.list_key: messages}
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
    api = wire_api(provider)
    try:
        body = _as_body(messages, provider, tools, model)
    except RecursionError:
        body = {api.list_key: []}
        deep = Finding("malformed", api.list_key, -1, "the history is nested too deeply to copy",
                       "Invalid request: the JSON body is nested too deeply.")
        return ([], [Change("dropped", api.list_key, deep.message)]) if fix else [deep]
    findings, clean = validate_view(provider, body, None)
    findings.sort(key=lambda f: (f.index, f.part if f.part is not None else -1))
    if not fix:
        return findings
    items = clean.get(api.list_key)
    if not isinstance(items, list):
        return ([] if items is None else items), []
    changes = fix_rules(api.rules, items, findings)
    for f in findings:
        if f.code == "malformed":
            changes.append(Change("dropped", f.position, f.message))
    items[:] = [it for it in items if not it.get("malformed")]
    return items, changes
