"""How the local emulator serves Chat Completions: route, error shape, request checks, the client.

OpenAI's error body is ``{"error": {"message", "type", "param", "code"}}``
(https://platform.openai.com/docs/guides/error-codes); the Responses API shares it and this module.
"""

from __future__ import annotations

from typing import Any

from ..wireapi import Endpoint, RouteMatch
from .encode import encode

__all__ = ["ENDPOINT", "client", "default_message", "error_body", "check_model"]

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


def _check(body: dict[str, Any]) -> tuple[str, str | None] | None:
    found = check_model(body)
    if found is None and not isinstance(body.get("messages"), list):
        return "Missing required parameter: 'messages'.", "messages"
    return found


def _route(path: str) -> RouteMatch | None:
    return RouteMatch() if path.startswith(f"{MOUNT}/chat/completions") else None


def client(base_url: str, async_: bool = False) -> Any:
    """An ``openai`` client on ``base_url`` (no SDK retries: a test sees each answer)."""
    from .model import client as make

    return make("test", base_url, async_=async_, max_retries=0)


ENDPOINT = Endpoint(mount=MOUNT, url_names=("openai", "openai_chat"), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, check_request=_check, client=client)
