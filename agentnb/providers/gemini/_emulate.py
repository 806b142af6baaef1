"""How the local emulator serves ``generateContent``: the model and streaming are in the path.

Google's error body is ``{"error": {"code", "message", "status"}}`` (https://ai.google.dev/gemini-api/docs/troubleshooting).
"""

from __future__ import annotations

import json
from typing import Any

from .._wireapi import Endpoint, RouteMatch
from ._encode import encode

__all__ = ["ENDPOINT"]


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """Google's error body for ``status``."""
    state = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "INVALID_ARGUMENT",
             408: "DEADLINE_EXCEEDED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
             503: "UNAVAILABLE"}.get(status, "INTERNAL")
    return {"error": {"code": status, "message": message, "status": state}}


def default_message(status: int) -> str:
    """Google's usual message for a status the emulator is asked to fail with."""
    if status == 429:
        return "Resource has been exhausted (e.g. check quota)."
    if status == 503:
        return "The model is overloaded. Please try again later."
    return "An internal error has occurred." if status >= 500 else "Invalid request."


_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1beta"
_MODES = ("MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED")


def _check(body: dict[str, Any]) -> tuple[str, str | None] | None:
    """The 400 for a malformed ``toolConfig`` (None: well formed, or absent).

    An object whose ``functionCallingConfig`` is an object with a ``mode`` of the enum (its name, or its number as
    protobuf's JSON allows) and ``allowedFunctionNames`` a list of strings (https://ai.google.dev/api/caching#ToolConfig).
    """
    key = "toolConfig" if "toolConfig" in body else "tool_config"
    config = body.get(key)
    if config is None:
        return None
    if not isinstance(config, dict):
        return f"Invalid value at 'tool_config' ({_TYPES}.ToolConfig), {_shown(config)}", None
    fcc_key = "functionCallingConfig" if "functionCallingConfig" in config else "function_calling_config"
    fcc = config.get(fcc_key)
    if fcc is None:
        return None
    where = "tool_config.function_calling_config"
    if not isinstance(fcc, dict):
        return f"Invalid value at '{where}' ({_TYPES}.FunctionCallingConfig), {_shown(fcc)}", None
    mode = fcc.get("mode")
    if mode is not None and not (isinstance(mode, str) and mode.upper() in _MODES) and not (
            isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode < len(_MODES)):
        return f"Invalid value at '{where}.mode' ({_TYPES}.FunctionCallingConfig.Mode), {_shown(mode)}", None
    names = fcc.get("allowedFunctionNames", fcc.get("allowed_function_names"))
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        return f"Invalid value at '{where}.allowed_function_names' (TYPE_STRING), {_shown(names)}", None
    return None


def _shown(value: Any) -> str:
    """A value as Google's messages quote it (JSON)."""
    return json.dumps(value)


def _route(path: str) -> RouteMatch | None:
    """``/gemini/v1beta/models/{model}:generateContent`` or ``:streamGenerateContent`` (``stream`` unread)."""
    if path.startswith("/gemini/") and "/models/" in path and ":" in path:
        model, _, method = path.split("/models/", 1)[1].partition(":")
        if method in ("generateContent", "streamGenerateContent"):
            return RouteMatch(model=model, stream=method == "streamGenerateContent")
    return None


def client(base_url: str, async_: bool = False) -> Any:
    """A ``google.genai`` client on ``base_url`` (its ``.aio`` when ``async_``)."""
    from ._model import client as make

    return make("test", base_url, async_=async_)


ENDPOINT = Endpoint(mount="/gemini", url_names=("gemini", "google"), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, check_request=_check, client=client)
