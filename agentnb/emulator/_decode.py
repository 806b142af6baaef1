"""Requests read back into the canonical conversation, so a script's functions see what the client sent.

Only what a script needs is kept: roles, text, calls (id, name, arguments) and results (id, name, content).
Continuation data is the validator's business (:mod:`agentnb.lint`), not the script's. The bodies come here
after the validator and :func:`agentnb._shapes.normalize`, so messages, blocks and parts are objects; values
the services leave free (a content, a tool's fields) are read with :func:`_obj` and :func:`_text`, which take
any JSON value.
"""

from __future__ import annotations

import json
from typing import Any

from ..events import ToolInfo
from ..messages import Message, TextPart, ToolCallPart, ToolResultPart


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_s(c.get("text")) for c in content if isinstance(c, dict))
    return ""


def _call(call_id: str, name: str, args: Any) -> ToolCallPart:
    raw = args if isinstance(args, str) else json.dumps(args or {})
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw,
                        arguments=parsed if isinstance(parsed, dict) else None)


def _result(call_id: str, name: str, content: Any, error: bool = False) -> ToolResultPart:
    text = content if isinstance(content, str) else _text(content) if isinstance(content, list) else json.dumps(content)
    return ToolResultPart(call_id=call_id, name=name, status="error" if error else "ok", content=text)


def chat(body: dict[str, Any]) -> tuple[list[Message], list[ToolInfo]]:
    """Chat Completions ``messages`` and ``tools``."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for m in body.get("messages") or ():
        role = m.get("role")
        if role in ("system", "developer"):
            out.append(Message.system(_text(m.get("content"))))
        elif role == "user":
            out.append(Message.user(_text(m.get("content"))))
        elif role == "assistant":
            parts: list[Any] = [TextPart(text=_text(m.get("content")))] if m.get("content") else []
            for tc in m.get("tool_calls") or ():
                fn = _obj(tc.get("function"))
                names[tc.get("id") or ""] = fn.get("name") or ""
                parts.append(_call(tc.get("id") or "", fn.get("name") or "", fn.get("arguments") or ""))
            out.append(Message(role="assistant", parts=tuple(parts)))
        elif role == "tool":
            cid = m.get("tool_call_id") or ""
            part = _result(cid, names.get(cid, ""), m.get("content"))
            if out and out[-1].role == "tool":
                out[-1] = Message(role="tool", parts=(*out[-1].parts, part))
            else:
                out.append(Message(role="tool", parts=(part,)))
    tools = [_tool(_obj(t.get("function")), "parameters") for t in body.get("tools") or ()]
    return out, tools


def responses(body: dict[str, Any]) -> tuple[list[Message], list[ToolInfo]]:
    """Responses ``instructions``, ``input`` and ``tools``."""
    out: list[Message] = []
    if body.get("instructions"):
        out.append(Message.system(str(body["instructions"])))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    names: dict[str, str] = {}
    for it in items or ():
        kind = it.get("type") or "message"
        if kind == "message":
            role = it.get("role")
            text = _text(it.get("content"))
            if role == "assistant":
                out.append(Message.assistant(text))
            elif role in ("system", "developer"):
                out.append(Message.system(text))
            else:
                out.append(Message.user(text))
        elif kind == "function_call":
            names[it.get("call_id") or ""] = it.get("name") or ""
            part = _call(it.get("call_id") or "", it.get("name") or "", it.get("arguments") or "")
            if out and out[-1].role == "assistant":
                out[-1] = Message(role="assistant", parts=(*out[-1].parts, part))
            else:
                out.append(Message(role="assistant", parts=(part,)))
        elif kind == "function_call_output":
            cid = it.get("call_id") or ""
            rpart = _result(cid, names.get(cid, ""), it.get("output"))
            if out and out[-1].role == "tool":
                out[-1] = Message(role="tool", parts=(*out[-1].parts, rpart))
            else:
                out.append(Message(role="tool", parts=(rpart,)))
    tools = [_tool(t, "parameters") for t in body.get("tools") or ()]
    return out, tools


def anthropic(body: dict[str, Any]) -> tuple[list[Message], list[ToolInfo]]:
    """Messages ``system``, ``messages`` and ``tools``."""
    out: list[Message] = []
    if body.get("system"):
        out.append(Message.system(_text(body["system"])))
    names: dict[str, str] = {}
    for m in body.get("messages") or ():
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        if m.get("role") == "assistant":
            parts: list[Any] = []
            for b in blocks:
                if b.get("type") == "text":
                    parts.append(TextPart(text=_s(b.get("text"))))
                elif b.get("type") == "tool_use":
                    names[b.get("id") or ""] = b.get("name") or ""
                    parts.append(_call(b.get("id") or "", b.get("name") or "", b.get("input") or {}))
            out.append(Message(role="assistant", parts=tuple(parts)))
            continue
        results = [_result(b.get("tool_use_id") or "", names.get(b.get("tool_use_id") or "", ""), b.get("content"),
                           bool(b.get("is_error"))) for b in blocks if b.get("type") == "tool_result"]
        if results:
            out.append(Message(role="tool", parts=tuple(results)))
        text = "".join(_s(b.get("text")) for b in blocks if b.get("type") == "text")
        if text:
            out.append(Message.user(text))
    tools = [_tool(t, "input_schema") for t in body.get("tools") or ()]
    return out, tools


def gemini(body: dict[str, Any]) -> tuple[list[Message], list[ToolInfo]]:
    """``generateContent`` ``systemInstruction``, ``contents`` and ``tools``."""
    out: list[Message] = []
    system = body.get("systemInstruction")
    if system:
        out.append(Message.system(system if isinstance(system, str) else _text(_obj(system).get("parts"))))
    n = 0
    for c in body.get("contents") or ():
        parts = c.get("parts") or ()
        if c.get("role") == "model":
            mparts: list[Any] = []
            for p in parts:
                if "functionCall" in p:
                    fc = p["functionCall"] or {}
                    n += 1
                    mparts.append(_call(fc.get("id") or f"gemini_{n}", fc.get("name") or "", fc.get("args") or {}))
                elif "text" in p and not p.get("thought"):
                    mparts.append(TextPart(text=_s(p["text"])))
            out.append(Message(role="assistant", parts=tuple(mparts)))
            continue
        results = []
        for p in parts:
            if "functionResponse" in p:
                fr = p["functionResponse"] or {}
                response = fr.get("response")
                response = response if isinstance(response, dict) else {"output": response}
                value = response.get("output", response.get("error", response))
                results.append(_result(fr.get("id") or "", fr.get("name") or "", value, "error" in response))
        if results:
            out.append(Message(role="tool", parts=tuple(results)))
        text = "".join(_s(p.get("text")) for p in parts)
        if text:
            out.append(Message.user(text))
    tools = [_tool({**d, "parameters": d.get("parameters") or d.get("parametersJsonSchema") or d.get(
        "parameters_json_schema")}, "parameters") for t in body.get("tools") or () for d in t["functionDeclarations"]]
    return out, tools


def _tool(d: dict[str, Any], schema_key: str) -> ToolInfo:
    """A tool definition as a script sees it (a name and description that are not strings are left out)."""
    name, description, schema = d.get("name"), d.get("description"), d.get(schema_key)
    return ToolInfo(name=name if isinstance(name, str) else "",
                    description=description if isinstance(description, str) else "",
                    parameters=schema if isinstance(schema, dict) else {})
