"""How the local emulator serves the Messages API: route, error shape, request checks, the client.

Anthropic's error body is ``{"type": "error", "error": {"type", "message"}, "request_id"}``
(https://docs.anthropic.com/en/api/errors).
"""

from __future__ import annotations

import secrets
from typing import Any

from .._wireapi import Endpoint, RouteMatch
from ._encode import encode

__all__ = ["ENDPOINT"]


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """Anthropic's error body for ``status``."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            405: "invalid_request_error", 408: "timeout_error", 413: "request_too_large",
            429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_emu" + secrets.token_hex(8)}


def default_message(status: int) -> str:
    """Anthropic's usual message for a status the emulator is asked to fail with."""
    if status == 429:
        return "Number of request tokens has exceeded your per-minute rate limit."
    if status == 503:
        return "Service unavailable."
    return "Internal server error" if status >= 500 else "Invalid request."


def _check(body: dict[str, Any]) -> tuple[str, str | None] | None:
    if not body.get("model"):
        return "model: Field required", "model"
    if not isinstance(body["model"], str):
        return "model: Input should be a valid string", "model"
    if not body.get("max_tokens"):
        return "max_tokens: Field required", None
    if isinstance(body["max_tokens"], bool) or not isinstance(body["max_tokens"], int):
        return "max_tokens: Input should be a valid integer", None
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else ()):
        if isinstance(tool, dict) and "strict" in tool and not isinstance(tool["strict"], bool):
            return f"tools.{i}.custom.strict: Input should be a valid boolean", None
    return _check_tool_choice(body.get("tool_choice")) or _check_output_config(body.get("output_config"))


def _check_output_config(config: Any) -> tuple[str, str | None] | None:
    """The 400 for a malformed ``output_config``.

    JSON outputs: ``format`` is ``{"type": "json_schema", "schema": {...}}``
    (https://docs.claude.com/en/docs/build-with-claude/structured-outputs).
    """
    if config is None:
        return None
    if not isinstance(config, dict):
        return "output_config: Input should be a valid dictionary", None
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return "output_config.format.type: Input should be 'json_schema'", None
    if not isinstance(fmt.get("schema"), dict):
        return "output_config.format.schema: Field required", None
    return None


_CHOICE_TYPES = ("auto", "any", "tool", "none")


def _check_tool_choice(choice: Any) -> tuple[str, str | None] | None:
    """The 400 for a malformed ``tool_choice`` (None: well formed, or absent).

    An object tagged ``auto``, ``any``, ``tool`` (with a ``name``) or ``none``, whose ``disable_parallel_tool_use``
    is a boolean (https://docs.anthropic.com/en/api/messages).
    """
    if choice is None:
        return None
    if not isinstance(choice, dict):
        return "tool_choice: Input should be a valid dictionary or object to extract fields from", None
    kind = choice.get("type")
    if kind not in _CHOICE_TYPES or not isinstance(kind, str):
        tags = ", ".join(repr(t) for t in _CHOICE_TYPES)
        if "type" not in choice:
            return f"tool_choice: Unable to extract tag using discriminator 'type' (expected one of {tags})", None
        return (f"tool_choice: Input tag {kind!r} found using 'type' does not match any of the expected tags: "
                f"{tags}"), None
    if kind == "tool" and "name" not in choice:
        return "tool_choice.tool.name: Field required", None
    if kind == "tool" and not isinstance(choice["name"], str):
        return "tool_choice.tool.name: Input should be a valid string", None
    parallel = choice.get("disable_parallel_tool_use")
    if parallel is not None and not isinstance(parallel, bool):
        return f"tool_choice.{kind}.disable_parallel_tool_use: Input should be a valid boolean", None
    return None


def _route(path: str) -> RouteMatch | None:
    return RouteMatch() if path.startswith("/anthropic/v1/messages") else None


def client(base_url: str, async_: bool = False) -> Any:
    """An ``anthropic`` client on ``base_url`` (no SDK retries)."""
    from ._model import client as make

    return make("test", base_url, async_=async_, max_retries=0)


ENDPOINT = Endpoint(mount="/anthropic", url_names=("anthropic",), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, check_request=_check, client=client)
