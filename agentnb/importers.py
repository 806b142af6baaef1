"""Foreign histories into transcripts: OpenAI Chat messages, Responses items, Anthropic messages, Gemini contents.

Theory of operation. Each ``from_<format>`` function is a pure mapper from a request-side history (the list
you send, or log) to the canonical conversation (:mod:`agentnb.messages`), plus a list of :class:`Finding`
about its structure. The conversation becomes a transcript holding one event: a ``RunStarted`` whose messages
are the imported history. That is the honest minimum: no model turn, latency, token count or tool duration is
invented. The frames still see everything the history says: ``frames.messages()`` has every part and
``frames.calls()`` has every call with ``origin == "history"``, its tool, arguments and result status (from
Anthropic's ``is_error`` or Gemini's ``error`` key; Chat and Responses results are ``ok``); timing and token
columns stay null.

Findings name the item by its position in the input list (and a path inside it). :func:`lint` checks the
canonical structure every provider needs -- each call answered exactly once, after it, ids unique -- and the
importers add what only their format can get wrong (an Anthropic ``tool_result`` after text in its user
message, a Gemini response that matches no call, a part they cannot represent). A :class:`Finding` is a plain
record so a fuller provider linter can reuse it.

Example:
    >>> from agentnb.importers import from_openai_chat
    >>> imported = from_openai_chat([
    ...     {"role": "user", "content": "Weather in Paris?"},
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
    ...         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
    ...     {"role": "tool", "tool_call_id": "c9", "content": "?"},
    ... ], run_id="imported")
    >>> [f.code for f in imported.findings]
    ['orphan_result']
    >>> imported.transcript.frames.calls()[["tool", "status", "origin"]]
              tool status   origin
    0  get_weather     ok  history
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ._shapes import normalize
from .events import RunStarted
from .messages import Message, ReasoningPart, RefusalPart, ResultStatus, TextPart, ToolCallPart, ToolResultPart
from .states import LoopState
from .transcript import Transcript

Format = Literal["openai_chat", "openai_responses", "anthropic", "gemini", "pydantic_ai", "openai_agents", "langchain"]
Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One structural problem in a history.

    Attributes:
        code: a stable name (``orphan_result``, ``unanswered_call``, ``duplicate_call_id``,
            ``result_before_call``, ``duplicate_result``, ``anthropic_result_not_first``, ``unmatched_response``,
            ``unsupported_part``, ``unknown_role``, ``invalid_arguments``, ``not_a_message``, ``malformed``
            (a value of the wrong JSON type inside an item, left out), ``unreadable`` (an item no reader
            could read, left out)). Any JSON value imports without an exception.
        message: what is wrong, in a sentence.
        position: the index of the offending item in the input list (-1: not tied to one item).
        path: where inside it (``[3].content[1]``).
        severity: ``error`` (a provider would reject the history, or its meaning is lost) or ``warning``.

    Example:
        >>> Finding("orphan_result", "no call c9", 3, "[3]").severity
        'error'
    """

    code: str
    message: str
    position: int
    path: str = ""
    severity: Severity = "error"


@dataclass(slots=True)
class Imported:
    """What an importer gives back: the transcript, the conversation and the findings."""

    transcript: Transcript
    messages: list[Message]
    findings: list[Finding] = field(default_factory=list)
    format: str = ""

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    def __repr__(self) -> str:
        return f"<Imported {self.format}: {len(self.messages)} messages, {len(self.findings)} findings>"


class _Builder:
    """Collects canonical messages with the input position each came from, and findings."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.sources: list[list[int]] = []
        """The input position of each part of each message."""
        self.findings: list[Finding] = []
        self.names: dict[str, str] = {}

    def add(self, role: Any, parts: Sequence[Any], position: int | Sequence[int], *,
            merge_results: bool = False) -> None:
        if not parts:
            return
        positions = [position] * len(parts) if isinstance(position, int) else list(position)
        if merge_results and self.messages and self.messages[-1].role == "tool" and role == "tool":
            last = self.messages[-1]
            self.messages[-1] = Message(role="tool", parts=(*last.parts, *parts))
            self.sources[-1].extend(positions)
            return
        self.messages.append(Message(role=role, parts=tuple(parts)))
        self.sources.append(positions)

    def find(self, code: str, message: str, position: int, path: str, severity: Severity = "error") -> None:
        self.findings.append(Finding(code, message, position, path, severity))

    def call(self, call_id: str, name: str, raw: str, arguments: Any, index: int, position: int, path: str,
             **extra: Any) -> ToolCallPart:
        parsed = arguments if isinstance(arguments, dict) else _loads(raw)
        if parsed is None:
            self.find("invalid_arguments", f"the arguments of call {call_id!r} are not a JSON object", position,
                      path, "warning")
        self.names.setdefault(call_id, name)
        return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw, arguments=parsed, index=index, **extra)

    def result(self, call_id: str, content: str, status: ResultStatus = "ok", name: str | None = None,
               audit: Any = None) -> ToolResultPart:
        return ToolResultPart(call_id=call_id, name=name or self.names.get(call_id, ""), status=status,
                              content=content, audit=audit)

    def text(self, value: Any, position: int, path: str) -> str:
        """Text of a content value: a string, or a list of text parts (others become a placeholder)."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, Mapping):
            value = [value]
        out: list[str] = []
        for j, part in enumerate(value):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                kind = part.get("type", "?") if isinstance(part, Mapping) else type(part).__name__
                self.find("unsupported_part", f"a {kind!r} part is kept as a placeholder", position,
                          f"{path}[{j}]", "warning")
                out.append(f"[{kind}]")
        return "".join(out)

    def done(self, fmt: str, model: str | None, run_id: str | None, ts: datetime | None) -> Imported:
        findings = [*self.findings, *_lint(self.messages, self.sources)]
        findings.sort(key=lambda f: (f.position, f.code))
        event = RunStarted(
            seq=0, ts=ts or datetime.now(UTC), run_id=run_id or f"imported_{fmt}", turn=0, state=LoopState.READY,
            messages=self.messages, model=f"{fmt}:{model or 'unknown'}", tools=[],
            settings={"imported_from": fmt, "findings": len(findings)},
        )
        return Imported(Transcript([event]), list(self.messages), findings, fmt)


def _loads(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _dumps(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _get(item: Any, b: _Builder, i: int) -> Mapping[str, Any] | None:
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)  # an SDK object
    if callable(dump):
        data = dump(exclude_none=True)
        if isinstance(data, Mapping):
            return data
    b.find("not_a_message", f"item {i} is a {type(item).__name__}, not a message", i, f"[{i}]")
    return None


def _items(history: Any, fmt: str, b: _Builder) -> list[Any]:
    """The history as plain dicts the readers can trust (:func:`agentnb._shapes.normalize`).

    An item that is not a message is a ``not_a_message`` finding; a value of the wrong JSON type inside one
    (a block that is a string, ``tool_calls`` that is not a list) is a ``malformed`` finding and is left out.
    Items that cannot be read come back as None, so positions stay those of the input.
    """
    if isinstance(history, Mapping) or not isinstance(history, Sequence) or isinstance(history, str | bytes):
        b.find("not_a_message", f"the history is a {type(history).__name__}, not a list of messages", -1, "")
        return []
    dicts = [dict(d) if (d := _get(item, b, i)) is not None else None for i, item in enumerate(history)]
    key = {"openai_chat": "messages", "openai_responses": "input", "anthropic": "messages", "gemini": "contents"}[fmt]
    clean, malformed = normalize(fmt, {key: [d if d is not None else {} for d in dicts]})
    for bad in malformed:
        b.find("malformed", bad.message, bad.index, bad.position.removeprefix(key))
    items = clean.get(key)
    return [None if d is None or c.get("malformed") else c for d, c in zip(dicts, items or (), strict=False)]




# -- the canonical checks every provider needs --------------------------------------------------------------


def lint(messages: Sequence[Message]) -> list[Finding]:
    """Structural findings on a canonical conversation (positions are message indices).

    Checks that every call id is unique, every result answers a call made before it, and every call is
    answered exactly once (a call in the last assistant message with no answer yet is only a warning).

    Example:
        >>> from agentnb.messages import Message, ToolResultPart
        >>> orphan = ToolResultPart(call_id="x", name="f", status="ok", content="")
        >>> [(f.code, f.position, f.path) for f in lint([Message(role="tool", parts=(orphan,))])]
        [('orphan_result', 0, '[0]')]
    """
    return _lint(messages, [[k] * len(m.parts) for k, m in enumerate(messages)])


def _lint(messages: Sequence[Message], sources: Sequence[Sequence[int]]) -> list[Finding]:  # noqa: C901
    out: list[Finding] = []
    calls: dict[str, tuple[int, int]] = {}
    answered: dict[str, int] = {}
    all_calls = {p.call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    for k, m in enumerate(messages):
        for j, p in enumerate(m.parts):
            pos = sources[k][j]
            where = f"[{pos}]" if pos >= 0 else ""
            if isinstance(p, ToolCallPart):
                if p.call_id in calls:
                    out.append(Finding("duplicate_call_id", f"call id {p.call_id!r} is used twice", pos, where))
                calls[p.call_id] = (k, pos)
            elif isinstance(p, ToolResultPart):
                cid = p.call_id
                if cid in answered:
                    out.append(Finding("duplicate_result", f"call {cid!r} is answered twice", pos, where))
                elif cid not in all_calls:
                    out.append(Finding("orphan_result", f"result for call {cid!r}, which no message asks for",
                                       pos, where))
                elif cid not in calls:
                    out.append(Finding("result_before_call", f"result for call {cid!r} comes before the call",
                                       pos, where))
                answered.setdefault(cid, k)
    for cid, (k, pos) in calls.items():
        if cid not in answered:
            pending = k == len(messages) - 1
            out.append(Finding(
                "unanswered_call",
                f"call {cid!r} has no result" + (" yet (the history ends with it)" if pending else ""),
                pos, f"[{pos}]", "warning" if pending else "error",
            ))
    return out


# -- OpenAI Chat Completions ----------------------------------------------------------------------------------


def from_openai_chat(messages: Sequence[Any], *, model: str | None = None, run_id: str | None = None,
                     ts: datetime | None = None) -> Imported:
    """Import a Chat Completions ``messages`` list (dicts or SDK objects).

    ``system``/``developer`` become system messages; an assistant's ``tool_calls`` become calls and its
    ``refusal`` a refusal part; consecutive ``tool`` messages become one tool message of results (the legacy
    ``function`` role and ``function_call`` are read too).

    Example:
        >>> from_openai_chat([{"role": "user", "content": "Hi"}]).messages[0].text
        'Hi'
    """
    b = _Builder()
    for i, m in enumerate(_items(messages, "openai_chat", b)):
        if m is None:
            continue
        try:
            role = m.get("role")
            if role in ("system", "developer", "user"):
                text = b.text(m.get("content"), i, f"[{i}].content")
                b.add("user" if role == "user" else "system", [TextPart(text=text)], i)
            elif role == "assistant":
                parts: list[Any] = []
                text = b.text(m.get("content"), i, f"[{i}].content")
                if text:
                    parts.append(TextPart(text=text))
                if m.get("refusal"):
                    parts.append(RefusalPart(text=str(m["refusal"])))
                for j, tc in enumerate(m.get("tool_calls") or []):
                    fn = tc.get("function") or {}
                    raw = _dumps(fn.get("arguments", "{}"))
                    parts.append(b.call(str(tc.get("id") or f"call_{i}_{j}"), str(fn.get("name", "")), raw, None, j, i,
                                        f"[{i}].tool_calls[{j}]"))
                if m.get("function_call"):
                    fc = m["function_call"]
                    raw = _dumps(fc.get("arguments", "{}"))
                    parts.append(b.call(f"function_{i}", str(fc.get("name", "")), raw, None, 0, i,
                                        f"[{i}].function_call"))
                b.add("assistant", parts or [TextPart(text="")], i)
            elif role in ("tool", "function"):
                cid = str(m.get("tool_call_id") or "")
                if role == "function":  # legacy: answers the latest function_call of that name
                    cid = next((c for c, n in reversed(b.names.items()) if n == m.get("name")), f"function_{i}")
                content = b.text(m.get("content"), i, f"[{i}].content")
                b.add("tool", [b.result(cid, content)], i, merge_results=True)
            else:
                b.find("unknown_role", f"role {role!r} is not a Chat Completions role", i, f"[{i}].role")
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.find("unreadable", f"item {i} could not be read ({type(exc).__name__}: {exc})", i, f"[{i}]")
    return b.done("openai_chat", model, run_id, ts)


# -- OpenAI Responses -----------------------------------------------------------------------------------------


def from_openai_responses(items: Sequence[Any], *, instructions: str | None = None, model: str | None = None,
                          run_id: str | None = None, ts: datetime | None = None) -> Imported:
    """Import a Responses ``input`` list, or ``input`` + ``output`` items joined (dicts or SDK objects).

    Consecutive assistant items (``message``, ``function_call``, ``reasoning``) become one assistant message;
    ``function_call_output`` items become results; ``instructions`` become the system message.

    Example:
        >>> from_openai_responses([{"role": "user", "content": "Hi"}], instructions="Be brief.").messages[0].role
        'system'
    """
    b = _Builder()
    if instructions:
        b.add("system", [TextPart(text=instructions)], -1)
    pending: list[Any] = []
    pending_at: list[int] = []

    def flush() -> None:
        b.add("assistant", list(pending), list(pending_at))
        pending.clear()
        pending_at.clear()

    for i, m in enumerate(_items(items, "openai_responses", b)):
        if m is None:
            continue
        try:
            kind = m.get("type", "message")
            role = m.get("role")
            if kind == "message" and role == "assistant":
                content = m.get("content")
                for j, c in enumerate(content if isinstance(content, list) else [content]):
                    pending_at.append(i)
                    if isinstance(c, Mapping) and c.get("type") == "refusal":
                        pending.append(RefusalPart(text=str(c.get("refusal", ""))))
                    else:
                        pending.append(TextPart(text=b.text(c, i, f"[{i}].content[{j}]")))
            elif kind == "function_call":
                raw = _dumps(m.get("arguments", "{}"))
                index = sum(1 for p in pending if isinstance(p, ToolCallPart))
                pending_at.append(i)
                pending.append(b.call(str(m.get("call_id", "")), str(m.get("name", "")), raw, None, index, i, f"[{i}]",
                                      provider_id=m.get("id")))
            elif kind == "reasoning":
                summary = "".join(s.get("text", "") for s in m.get("summary") or [] if isinstance(s, Mapping))
                pending_at.append(i)
                pending.append(ReasoningPart(provider="openai_responses", text=summary or None, data=dict(m)))
            elif kind == "function_call_output":
                flush()
                out = m.get("output", "")
                b.add("tool", [b.result(str(m.get("call_id", "")), b.text(out, i, f"[{i}].output"))], i,
                      merge_results=True)
            elif kind == "message" and role in ("user", "system", "developer"):
                flush()
                b.add("user" if role == "user" else "system", [TextPart(text=b.text(m.get("content"), i,
                                                                                    f"[{i}].content"))], i)
            else:
                flush()
                b.find("unsupported_part", f"a {kind!r} item is left out", i, f"[{i}]", "warning")
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.find("unreadable", f"item {i} could not be read ({type(exc).__name__}: {exc})", i, f"[{i}]")
    flush()
    return b.done("openai_responses", model, run_id, ts)


# -- Anthropic Messages ---------------------------------------------------------------------------------------


def _anthropic_result_text(content: Any, b: _Builder, i: int, path: str) -> str:
    return b.text(content, i, path)


def from_anthropic(messages: Sequence[Any], *, system: str | Sequence[Any] | None = None,
                   model: str | None = None, run_id: str | None = None, ts: datetime | None = None) -> Imported:
    """Import an Anthropic Messages ``messages`` list (with the separate ``system`` parameter if any).

    A user message's ``tool_result`` blocks become a tool message (``is_error`` gives status ``error``) and its
    other blocks a user message after it; ``thinking`` blocks become reasoning parts kept for Anthropic.
    The Messages API wants the results first in their user message: a result after text is a finding.

    Example:
        >>> from_anthropic([{"role": "user", "content": "Hi"}], system="Be brief.").messages[1].text
        'Hi'
    """
    b = _Builder()
    if system:
        b.add("system", [TextPart(text=b.text(system, -1, "system"))], -1)
    for i, m in enumerate(_items(messages, "anthropic", b)):
        if m is None:
            continue
        try:
            role = m.get("role")
            content = m.get("content")
            blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
            if role == "assistant":
                parts: list[Any] = []
                for j, blk in enumerate(blocks):
                    kind = blk.get("type")
                    if kind == "text":
                        parts.append(TextPart(text=str(blk.get("text", ""))))
                    elif kind == "tool_use":
                        args = blk.get("input") or {}
                        parts.append(b.call(str(blk.get("id", "")), str(blk.get("name", "")), _dumps(args), args,
                                            sum(1 for p in parts if isinstance(p, ToolCallPart)), i,
                                            f"[{i}].content[{j}]"))
                    elif kind in ("thinking", "redacted_thinking"):
                        parts.append(ReasoningPart(provider="anthropic", text=blk.get("thinking"), data=dict(blk)))
                    else:
                        b.find("unsupported_part", f"a {kind!r} block in an assistant message is left out", i,
                               f"[{i}].content[{j}]", "warning")
                b.add("assistant", parts or [TextPart(text="")], i)
            elif role == "user":
                results: list[Any] = []
                texts: list[Any] = []
                for j, blk in enumerate(blocks):
                    if blk.get("type") == "tool_result":
                        if texts:
                            b.find("anthropic_result_not_first", "a tool_result block follows other content; the "
                                   "Messages API wants results first in the user message", i, f"[{i}].content[{j}]")
                        text = _anthropic_result_text(blk.get("content"), b, i, f"[{i}].content[{j}].content")
                        status: ResultStatus = "error" if blk.get("is_error") else "ok"
                        results.append(b.result(str(blk.get("tool_use_id", "")), text, status))
                    else:
                        texts.append(TextPart(text=b.text(blk, i, f"[{i}].content[{j}]")))
                b.add("tool", results, i)
                b.add("user", texts, i)
            else:
                b.find("unknown_role", f"role {role!r} is not a Messages role (use the system parameter)", i,
                       f"[{i}].role")
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.find("unreadable", f"item {i} could not be read ({type(exc).__name__}: {exc})", i, f"[{i}]")
    return b.done("anthropic", model, run_id, ts)


# -- Gemini ---------------------------------------------------------------------------------------------------


def from_gemini(contents: Sequence[Any], *, system_instruction: Any = None, model: str | None = None,
                run_id: str | None = None, ts: datetime | None = None) -> Imported:
    """Import a Gemini ``contents`` list (dicts or SDK objects; camelCase or snake_case keys).

    ``functionCall`` parts become calls; a call without an ``id`` gets ``gemini_<item>_<part>``. A
    ``functionResponse`` answers the call with its ``id``, or else the oldest unanswered call of that name;
    one matching nothing is a finding. A response holding an ``error`` key has status ``error``. Thought parts
    become reasoning parts kept for Gemini.

    Example:
        >>> out = from_gemini([{"role": "user", "parts": [{"text": "Hi"}]}])
        >>> out.messages[0].role, out.ok
        ('user', True)
    """
    b = _Builder()
    if system_instruction:
        sys_parts = system_instruction.get("parts") if isinstance(system_instruction, Mapping) else system_instruction
        b.add("system", [TextPart(text=b.text(sys_parts, -1, "system_instruction"))], -1)
    waiting: list[tuple[str, str]] = []  # (name, call id) of calls not answered yet, oldest first
    for i, m in enumerate(_items(contents, "gemini", b)):
        if m is None:
            continue
        try:
            role = m.get("role", "user")
            parts_in = m.get("parts") or []
            if role == "model":
                parts: list[Any] = []
                for j, p in enumerate(parts_in):
                    fc = p.get("functionCall") or p.get("function_call")
                    sig = p.get("thoughtSignature") or p.get("thought_signature")
                    if fc:
                        gid = fc.get("id")
                        cid = str(gid or f"gemini_{i}_{j}")
                        data = {k: v for k, v in (("id", gid), ("thoughtSignature", sig)) if v}
                        args = fc.get("args") or {}
                        parts.append(b.call(cid, str(fc.get("name", "")), _dumps(args), args,
                                            sum(1 for q in parts if isinstance(q, ToolCallPart)), i,
                                            f"[{i}].parts[{j}]",
                                            provider_id=gid, provider_data={"gemini": data} if data else None))
                        waiting.append((str(fc.get("name", "")), cid))
                    elif p.get("thought"):
                        parts.append(ReasoningPart(provider="gemini", text=p.get("text"), data={"part": dict(p)}))
                    elif "text" in p:
                        parts.append(TextPart(text=str(p["text"]),
                                              provider_data={"gemini": {"thoughtSignature": sig}} if sig else None))
                    else:
                        b.find("unsupported_part", "a model part with no text or call is left out", i,
                               f"[{i}].parts[{j}]", "warning")
                b.add("assistant", parts or [TextPart(text="")], i)
            elif role in ("user", "function", "tool"):
                results: list[Any] = []
                texts: list[Any] = []
                for j, p in enumerate(parts_in):
                    fr = p.get("functionResponse") or p.get("function_response")
                    if fr:
                        name = str(fr.get("name", ""))
                        gid = fr.get("id")
                        match = next((w for w in waiting if (gid and w[1] == gid) or (not gid and w[0] == name)), None)
                        if match is None:
                            b.find("unmatched_response", f"a functionResponse for {name!r} matches no call", i,
                                   f"[{i}].parts[{j}]")
                            cid = str(gid or f"gemini_response_{i}_{j}")
                        else:
                            waiting.remove(match)
                            cid = match[1]
                        response = fr.get("response") or {}
                        failed = isinstance(response, Mapping) and "error" in response
                        status: ResultStatus = "error" if failed else "ok"
                        value = response.get("output", response.get("error", response)) if isinstance(
                            response, Mapping) and len(response) == 1 else response
                        results.append(b.result(cid, _dumps(value), status, name=name))
                    else:
                        texts.append(TextPart(text=b.text(p, i, f"[{i}].parts[{j}]")))
                b.add("tool", results, i, merge_results=True)
                b.add("user", texts, i)
            else:
                b.find("unknown_role", f"role {role!r} is not a Gemini role", i, f"[{i}].role")
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.find("unreadable", f"item {i} could not be read ({type(exc).__name__}: {exc})", i, f"[{i}]")
    return b.done("gemini", model, run_id, ts)


_IMPORTERS = {
    "openai_chat": from_openai_chat,
    "openai_responses": from_openai_responses,
    "anthropic": from_anthropic,
    "gemini": from_gemini,
}


def import_history(history: Sequence[Any], format: Format, **options: Any) -> Imported:
    """Import a history in ``format`` (``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini``).

    Args:
        history: the message, item or content list.
        format: its wire format.
        **options: passed to the importer (``model``, ``run_id``, ``ts``, and ``system``/``instructions``/
            ``system_instruction`` for the formats that keep the system prompt apart).

    Example:
        >>> import_history([{"role": "user", "parts": [{"text": "Hi"}]}], "gemini").transcript.state
        <LoopState.READY: 'READY'>
    """
    if format in ("pydantic_ai", "openai_agents", "langchain"):  # framework histories: agentnb.interop
        from .interop import import_framework_history

        return import_framework_history(history, format, **options)
    try:
        importer: Any = _IMPORTERS[format]
    except KeyError:
        raise ValueError(f"unknown format {format!r}; formats: {', '.join(_IMPORTERS)}, "
                         "pydantic_ai, openai_agents, langchain") from None
    result: Imported = importer(history, **options)
    return result


__all__ = [
    "Finding", "Format", "Imported", "from_anthropic", "from_gemini", "from_openai_chat", "from_openai_responses",
    "import_history", "lint",
]

