"""``generateContent`` request bodies read back into canonical messages (the importer and the emulator's decoder).

``systemInstruction`` becomes the system message. ``functionCall`` parts become calls; a call without an
``id`` gets ``gemini_<content>_<part>``. A ``functionResponse`` answers the call with its ``id``, or else the
oldest unanswered call of that name (the service's own rule); one matching nothing keeps its own id or
``gemini_response_<content>_<part>`` (a lint rule reports it). A response holding an ``error`` key has status
``error``. Thought parts become reasoning parts kept for Gemini. The bodies come normalized
(:mod:`agentnb.providers._shapes` turns snake_case names into camelCase).
"""

from __future__ import annotations

from typing import Any

from ..._messages import ReasoningPart, ResultStatus, TextPart, ToolCallPart
from .._history import Builder, dumps_value, items_of, tool_info
from .._wireapi import History

__all__ = ["parse_history", "requested_choice"]


class _Reader:
    def __init__(self) -> None:
        self.b = Builder("contents")
        self.waiting: list[tuple[str, str]] = []  # (name, call id) of calls not answered yet, oldest first

    def model(self, i: int, parts_in: list[Any]) -> None:
        b = self.b
        parts: list[Any] = []
        for j, p in enumerate(parts_in):
            fc, sig = p.get("functionCall"), p.get("thoughtSignature")
            if fc:
                gid = fc.get("id")
                cid = str(gid or f"gemini_{i}_{j}")
                data = {k: v for k, v in (("id", gid), ("thoughtSignature", sig)) if v}
                args = fc.get("args") or {}
                n = sum(1 for q in parts if isinstance(q, ToolCallPart))
                parts.append(b.call(cid, str(fc.get("name") or ""), dumps_value(args), args, n, provider_id=gid,
                                    provider_data={"gemini": data} if data else None))
                self.waiting.append((str(fc.get("name") or ""), cid))
            elif p.get("thought"):
                parts.append(ReasoningPart(provider="gemini", text=p.get("text"), data={"part": dict(p)}))
            elif "text" in p:
                parts.append(TextPart(text=str(p["text"]),
                                      provider_data={"gemini": {"thoughtSignature": sig}} if sig else None))
            else:
                b.find("unsupported_part", "a model part with no text or call is left out", i,
                       b.where(i, f".parts[{j}]"), "warning")
        b.add("assistant", parts or [TextPart(text="")], i)

    def user(self, i: int, parts_in: list[Any]) -> None:
        b = self.b
        results: list[Any] = []
        texts: list[Any] = []
        for j, p in enumerate(parts_in):
            fr = p.get("functionResponse")
            if fr:
                results.append(self.response(i, j, fr))
            else:
                texts.append(TextPart(text=b.text(p, i, b.where(i, f".parts[{j}]"))))
        b.add("tool", results, i, merge_results=True)
        b.add("user", texts, i)

    def response(self, i: int, j: int, fr: dict[str, Any]) -> Any:
        name, gid = str(fr.get("name") or ""), fr.get("id")
        match = next((w for w in self.waiting if (gid and w[1] == gid) or (not gid and w[0] == name)), None)
        if match is None:
            cid = str(gid or f"gemini_response_{i}_{j}")
        else:
            self.waiting.remove(match)
            cid = match[1]
        response = fr.get("response")
        response = response if isinstance(response, dict) else {"output": response}
        status: ResultStatus = "error" if "error" in response else "ok"
        value = response.get("output", response.get("error", response)) if len(response) == 1 else response
        return self.b.result(cid, dumps_value(value), status, name=name)


def parse_history(body: dict[str, Any]) -> History:
    """The ``systemInstruction``, ``contents`` and ``tools`` of a (normalized) ``generateContent`` body.

    Example:
        >>> out = parse_history({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]})
        >>> out.messages[0].role, out.findings
        ('user', [])
    """
    r = _Reader()
    system = body.get("systemInstruction")
    if system:
        value = system.get("parts") if isinstance(system, dict) else system
        r.b.add("system", [TextPart(text=r.b.text(value, -1, "systemInstruction"))], -1)
    for i, c in enumerate(items_of(body, "contents")):
        if not isinstance(c, dict) or c.get("malformed"):
            continue
        try:
            if c.get("role") == "model":
                r.model(i, c.get("parts") or [])
            elif (c.get("role") or "user") in ("user", "function", "tool"):
                r.user(i, c.get("parts") or [])
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            r.b.unreadable(i, exc)
    tools = [tool_info({**d, "parameters": d.get("parameters") or d.get("parametersJsonSchema")}, "parameters")
             for t in body.get("tools") or () if isinstance(t, dict) for d in t.get("functionDeclarations") or ()
             if isinstance(d, dict)]
    return r.b.history(tools, tool_choice=requested_choice(body))


def requested_choice(body: dict[str, Any]) -> str | dict[str, str] | None:
    """``toolConfig.functionCallingConfig`` in canonical form (``ANY`` with one allowed name forces it)."""
    config = body.get("toolConfig") or body.get("tool_config")
    config = config if isinstance(config, dict) else {}  # a malformed one is the emulator's 400, read as absent
    fcc = config.get("functionCallingConfig") or config.get("function_calling_config")
    fcc = fcc if isinstance(fcc, dict) else {}
    mode = str(fcc.get("mode", "AUTO")).upper()
    names = fcc.get("allowedFunctionNames") or fcc.get("allowed_function_names")
    names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if mode == "NONE":
        return "none"
    if mode in ("ANY", "VALIDATED") and len(names) == 1:
        return {"name": str(names[0])}
    return "required" if mode == "ANY" else None
