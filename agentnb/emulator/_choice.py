"""The emulator honours ``tool_choice`` as the services do: ``none`` drops calls, a forced tool gets called.

A scripted turn is what the test wanted the model to say; the request's tool choice is what the service would
enforce. So a turn with calls under ``tool_choice="none"`` loses them, and a turn without the required call under
``required`` or ``{"name": ...}`` gets one, with the smallest arguments the tool's schema accepts
(:func:`agentnb.emulator._instance.minimal_instance`, which refuses, naming the field, what it cannot make up).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._messages import ModelTurn, TextPart, ToolCallPart
from ._instance import minimal_instance


def honour_tool_choice(turn: ModelTurn, choice: str | dict[str, str] | None, tools: Sequence[Any]) -> ModelTurn:
    """Make a scripted turn obey the request's tool choice, as the service would.

    ``none``: the turn's calls are dropped (the text stays). ``required``/``{"name": ...}``: a turn without a
    call of the required tool gets one, with the smallest arguments the tool's schema accepts.
    """
    calls = turn.message.tool_calls
    if choice == "none" and calls:
        parts = tuple(p for p in turn.message.parts if not isinstance(p, ToolCallPart))
        text = () if turn.message.text else (TextPart(text="(no tools: tool_choice is none)"),)
        return replace(turn, message=replace(turn.message, parts=(*parts, *text)), finish_reason="stop",
                       finish_reason_raw="stop")
    if choice == "required" and not calls and tools:
        wanted = tools[0]
    elif isinstance(choice, dict) and not any(c.name == choice["name"] for c in calls):
        wanted = next((t for t in tools if t.name == choice["name"]), None)
        if wanted is None:
            return turn
    else:
        return turn
    try:
        args = minimal_instance(wanted.parameters)
    except ValueError as exc:  # the forced call cannot be made up: say which tool, and how to script it
        raise ValueError(f"tool_choice forces a call of {wanted.name!r}, but {exc}") from None
    call = ToolCallPart(call_id=f"call_forced_{wanted.name}", name=wanted.name, arguments=args,
                        arguments_raw=json.dumps(args))
    return replace(turn, message=replace(turn.message, parts=(call,)), finish_reason="tool_calls",
                   finish_reason_raw="tool_calls")


def enforce_strict(turn: ModelTurn, strict: dict[str, dict[str, Any]]) -> ModelTurn:
    """Make scripted calls of strict tools fit their schemas, as constrained decoding does on the service.

    A field that does not fit (or is missing) gets the smallest value its schema accepts (``null`` where it may
    be null); unknown fields are dropped. Calls of other tools are left as scripted, fitting or not.
    """
    if not strict or not turn.message.tool_calls:
        return turn
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema ships with Jupyter and the mcp extra
        return turn
    parts = []
    changed = False
    for p in turn.message.parts:
        schema = strict.get(p.name) if isinstance(p, ToolCallPart) else None
        if isinstance(p, ToolCallPart) and schema is not None:
            args = p.arguments if isinstance(p.arguments, dict) else {}
            if not jsonschema.Draft202012Validator(schema).is_valid(args):
                try:
                    fixed = conform(args, schema, schema.get("$defs", {}), jsonschema)
                except ValueError as exc:  # strict decoding would always fit: say what cannot be made up
                    raise ValueError(f"the scripted call of strict tool {p.name!r} does not fit its schema, and {exc}"
                                     ) from None
                p = replace(p, arguments=fixed, arguments_raw=json.dumps(fixed))
                changed = True
        parts.append(p)
    return replace(turn, message=replace(turn.message, parts=tuple(parts))) if changed else turn


def conform(value: Any, schema: dict[str, Any], defs: dict[str, Any], jsonschema: Any, where: str = "$") -> Any:
    """``value`` made to fit ``schema``: what fits is kept, the rest replaced by the smallest fitting value."""
    if "$ref" in schema:
        schema = defs.get(str(schema["$ref"]).split("/")[-1], {})
    whole = {**schema, "$defs": defs} if defs else schema
    if jsonschema.Draft202012Validator(whole).is_valid(value):
        return value
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds and isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: conform(value.get(k), props[k], defs, jsonschema, f"{where}.{k}") for k in props}
    if "null" in kinds or any(isinstance(a, dict) and a.get("type") == "null" for a in schema.get("anyOf", [])):
        return None
    return minimal_instance(schema, defs, where)
