"""Strict tool schemas: ``@anb.tool(strict=True)`` turns ordinary type hints into a schema strict mode accepts.

OpenAI's strict function calling (Chat Completions ``"strict": true``, the Responses API's default) constrains the
model's decoding to the schema, so the arguments always fit -- but only for schemas that follow its rules: every
object lists all its properties in ``required`` and sets ``additionalProperties: false``; an optional property is
expressed as one that may be ``null``; and only a subset of JSON Schema is supported. :func:`strict_schema`
rewrites a pydantic-made schema to those rules:

- every property becomes required; one that was optional becomes nullable (``"type": ["integer", "null"]``, or
  ``{"anyOf": [..., {"type": "null"}]}``), and a ``null`` the model sends for it means "use the default" (the
  tool's :meth:`~agentnb.Tool.validate` drops it before pydantic fills the default in);
- ``additionalProperties: false`` on every object, ``$defs`` included;
- ``default`` values move into the description (strict mode has no ``default``); ``title`` is dropped.

What strict mode cannot express is refused at definition time with a :class:`~agentnb.ToolDefinitionError`
naming the field and why: a mapping with free keys (``dict[str, int]``), a tuple (``prefixItems``), ``not``,
``if``/``then``/``else``, ``patternProperties``, and a value of no type at all (``Any``, ``object``, a parameter
without an annotation: its schema is ``{}``, which strict mode refuses, since it constrains decoding to a type).

Example:
    >>> import agentnb as anb
    >>> @anb.tool(strict=True)
    ... def search(query: str, limit: int = 10) -> list[str]:
    ...     '''Search the catalogue.'''
    ...     return []
    >>> search.parameters["required"], search.parameters["properties"]["limit"]["type"]
    (['query', 'limit'], ['integer', 'null'])
    >>> search.validate({"query": "kettle", "limit": None}).limit  # null means "the default"
    10
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .exceptions import ToolDefinitionError

_UNSUPPORTED = {
    "not": "'not' has no strict-mode form",
    "if": "'if'/'then'/'else' have no strict-mode form",
    "patternProperties": "'patternProperties' (keys matching a pattern) has no strict-mode form",
    "prefixItems": "a tuple (fixed positions, 'prefixItems') has no strict-mode form; use a list or an object",
    "dependentRequired": "'dependentRequired' has no strict-mode form",
    "dependentSchemas": "'dependentSchemas' has no strict-mode form",
}
_DROP = ("title", "default", "examples")
_TYPED = frozenset({"type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"})
"""A schema with none of these keys accepts any value: ``{}`` (``Any``), or only a description."""


def strict_schema(tool: str, schema: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A strict-mode version of a tool's parameters schema, and the top-level properties that became nullable.

    Raises:
        ToolDefinitionError: the schema cannot be made strict (the message names the field and why).
    """
    out = copy.deepcopy(schema)
    defs = out.get("$defs", {})
    for name, sub in defs.items():
        _strict(tool, sub, f"$defs.{name}")
    nullable = _strict(tool, out, "")
    return out, nullable


def _strict(tool: str, node: Any, path: str) -> tuple[str, ...]:
    if not isinstance(node, dict):
        return ()
    for key, why in _UNSUPPORTED.items():
        if key in node:
            raise ToolDefinitionError(f"tool {tool!r}: {_where(path)} cannot be strict: {why}")
    if not _TYPED & node.keys():
        raise ToolDefinitionError(
            f"tool {tool!r}: {_where(path)} cannot be strict: it has no type (Any, object, or no annotation), and "
            "strict mode constrains every value to a type; give it one (str, int, list[str], a pydantic model, "
            "X | None ...), or leave strict off"
        )
    _describe_default(node)
    for key in _DROP:
        node.pop(key, None)
    if "allOf" in node:
        parts = node.pop("allOf")
        if len(parts) != 1:
            raise ToolDefinitionError(f"tool {tool!r}: {_where(path)} cannot be strict: 'allOf' of {len(parts)} "
                                      "schemas has no strict-mode form")
        node.update(parts[0])
    if "oneOf" in node:  # for data the model writes, "exactly one of" and "any of" describe the same choices
        node["anyOf"] = node.pop("oneOf")
    for i, alt in enumerate(node.get("anyOf", [])):
        _strict(tool, alt, f"{path}|{i}")
    if "items" in node:
        _strict(tool, node["items"], f"{path}[]")
    if node.get("type") == "object" or "properties" in node:
        return _strict_object(tool, node, path)
    return ()


def _strict_object(tool: str, node: dict[str, Any], path: str) -> tuple[str, ...]:
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) or (extra is True) or ("properties" not in node and extra is not False):
        raise ToolDefinitionError(
            f"tool {tool!r}: {_where(path)} is a mapping with free keys (like dict[str, ...]); strict mode needs "
            "every key declared: use a pydantic model or a TypedDict"
        )
    props: dict[str, Any] = node.setdefault("properties", {})
    required = set(node.get("required", []))
    nullable = []
    for name, sub in props.items():
        _strict(tool, sub, f"{path}.{name}" if path else name)
        if name not in required:
            _make_nullable(sub)
            nullable.append(name)
    node["required"] = list(props)
    node["additionalProperties"] = False
    node["type"] = "object"
    return tuple(nullable)


def _make_nullable(sub: dict[str, Any]) -> None:
    kind = sub.get("type")
    if isinstance(kind, str):
        if kind != "null":
            sub["type"] = [kind, "null"]
    elif isinstance(kind, list):
        if "null" not in kind:
            kind.append("null")
    elif "anyOf" in sub:
        if not any(alt.get("type") == "null" for alt in sub["anyOf"] if isinstance(alt, dict)):
            sub["anyOf"].append({"type": "null"})
    else:  # a $ref, an enum, a const: wrap it
        inner = {k: sub.pop(k) for k in list(sub) if k != "description"}
        sub["anyOf"] = [inner, {"type": "null"}]
    if "enum" in sub and None not in sub["enum"]:
        sub["enum"] = [*sub["enum"], None]


def _describe_default(node: dict[str, Any]) -> None:
    if "default" not in node:
        return
    text = f"(default: {json.dumps(node['default'], ensure_ascii=False)})"
    description = node.get("description")
    node["description"] = f"{description} {text}" if description else text


def _where(path: str) -> str:
    return f"field {path!r}" if path else "the arguments"
