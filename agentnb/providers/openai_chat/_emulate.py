"""How the local emulator serves Chat Completions: route, error shape, request checks, the client.

OpenAI's error body is ``{"error": {"message", "type", "param", "code"}}``
(https://platform.openai.com/docs/guides/error-codes); the Responses API shares it and this module.
"""

from __future__ import annotations

from typing import Any

from .._wireapi import Endpoint, RouteMatch
from ._encode import encode

__all__ = ["ENDPOINT", "check_model", "check_tool_choice", "client", "default_message", "error_body"]

MOUNT = "/openai/v1"


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body for ``status``."""
    kind = {400: "invalid_request_error", 404: "invalid_request_error", 405: "invalid_request_error",
            408: "invalid_request_error", 413: "invalid_request_error", 429: "requests"}.get(status, "server_error")
    code = {429: "rate_limit_exceeded", 404: "unknown_url", 405: "method_not_allowed"}.get(status)
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def default_message(status: int) -> str:
    """OpenAI's usual message for a status the emulator is asked to fail with."""
    if status == 429:
        return "Rate limit reached for requests. Please try again shortly."
    if status == 503:
        return "The engine is currently overloaded, please try again later."
    if status >= 500:
        return "The server had an error while processing your request. Sorry about that!"
    return "Invalid request."


def check_model(body: dict[str, Any]) -> tuple[str, str | None] | None:
    """The 400 OpenAI answers for a missing or non-string ``model``."""
    if not body.get("model"):
        return "you must provide a model parameter", "model"
    if not isinstance(body["model"], str):
        return "Invalid type for 'model': expected a string.", "model"
    return None


Problem = tuple[str, str | None]
"""A 400's message and its ``param``."""


def _got(value: Any) -> str:
    """A JSON value's type as OpenAI's type errors name it (``but got a decimal number instead``)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else "null"


def _invalid_type(param: str, expected: str, value: Any) -> Problem:
    return f"Invalid type for '{param}': expected {expected}, but got {_got(value)} instead.", param


def _word(obj: dict[str, Any], key: str, param: str) -> Problem | None:
    """The 400 for a required string field of a ``tool_choice`` object that is missing or not a string."""
    if key not in obj or obj[key] is None:
        return f"Missing required parameter: '{param}'.", param
    return None if isinstance(obj[key], str) else _invalid_type(param, "a string", obj[key])


def _allowed_tools(spec: Any, param: str) -> Problem | None:
    """``{"mode": "auto" | "required", "tools": [...]}`` (Chat nests it under ``allowed_tools``)."""
    if not isinstance(spec, dict):
        return _invalid_type(param, "an object", spec)
    if spec.get("mode") not in ("auto", "required"):
        return (f"Invalid value: {spec.get('mode')!r}. Supported values are: 'auto' and 'required'.",
                f"{param}.mode")
    if not isinstance(spec.get("tools"), list):
        return _invalid_type(f"{param}.tools", "an array", spec.get("tools"))
    return None


def check_tool_choice(body: dict[str, Any], *, nested: bool = True,
                      hosted: tuple[str, ...] = ()) -> Problem | None:
    """The 400 OpenAI answers for a malformed ``tool_choice`` (None: it is well formed, or absent).

    A string is ``none``, ``auto`` or ``required``; an object has a ``type``: ``function`` (the name under
    ``function`` in Chat Completions, ``nested``, and beside ``type`` in the Responses API), ``allowed_tools``,
    ``custom``, or one of the ``hosted`` tool types the Responses API names by type alone.
    (https://platform.openai.com/docs/api-reference/chat/create#chat-create-tool_choice)
    """
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice in ("none", "auto", "required"):
            return None
        return f"Invalid value: {choice!r}. Supported values are: 'none', 'auto', and 'required'.", "tool_choice"
    if not isinstance(choice, dict):
        return _invalid_type("tool_choice", "one of a string or an object", choice)
    kind = choice.get("type")
    if kind is None:
        return "Missing required parameter: 'tool_choice.type'.", "tool_choice.type"
    if kind in ("function", "custom") and nested:
        inner = choice.get(kind)
        if inner is None:
            return f"Missing required parameter: 'tool_choice.{kind}'.", f"tool_choice.{kind}"
        if not isinstance(inner, dict):
            return _invalid_type(f"tool_choice.{kind}", "an object", inner)
        return _word(inner, "name", f"tool_choice.{kind}.name")
    if kind in ("function", "custom"):
        return _word(choice, "name", "tool_choice.name")
    if kind == "allowed_tools":
        return _allowed_tools(choice.get("allowed_tools") if nested else choice, "tool_choice.allowed_tools"
                              if nested else "tool_choice")
    if kind == "mcp" and hosted:
        return _word(choice, "server_label", "tool_choice.server_label")
    if isinstance(kind, str) and kind in hosted:
        return None
    supported = ", ".join(repr(k) for k in ("function", "allowed_tools", "custom", *hosted))
    if not isinstance(kind, str):
        return _invalid_type("tool_choice.type", "a string", kind)
    return f"Invalid value: {kind!r}. Supported values are: {supported}.", "tool_choice.type"


def _check(body: dict[str, Any]) -> Problem | None:
    found = check_model(body)
    if found is None and not isinstance(body.get("messages"), list):
        return "Missing required parameter: 'messages'.", "messages"
    return found or check_tool_choice(body)


def _route(path: str) -> RouteMatch | None:
    return RouteMatch() if path.startswith(f"{MOUNT}/chat/completions") else None


def client(base_url: str, async_: bool = False) -> Any:
    """An ``openai`` client on ``base_url`` (no SDK retries: a test sees each answer)."""
    from ._model import client as make

    return make("test", base_url, async_=async_, max_retries=0)


ENDPOINT = Endpoint(mount=MOUNT, url_names=("openai", "openai_chat"), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, check_request=_check, client=client)
