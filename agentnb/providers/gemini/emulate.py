"""How the local emulator serves ``generateContent``: the model and streaming are in the path.

Google's error body is ``{"error": {"code", "message", "status"}}`` (https://ai.google.dev/gemini-api/docs/troubleshooting).
"""

from __future__ import annotations

from typing import Any

from ..wireapi import Endpoint, RouteMatch
from .encode import encode

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


def _route(path: str) -> RouteMatch | None:
    """``/gemini/v1beta/models/{model}:generateContent`` or ``:streamGenerateContent`` (``stream`` unread)."""
    if path.startswith("/gemini/") and "/models/" in path and ":" in path:
        model, _, method = path.split("/models/", 1)[1].partition(":")
        if method in ("generateContent", "streamGenerateContent"):
            return RouteMatch(model=model, stream=method == "streamGenerateContent")
    return None


def client(base_url: str, async_: bool = False) -> Any:
    """A ``google.genai`` client on ``base_url`` (its ``.aio`` when ``async_``)."""
    from .model import client as make

    return make("test", base_url, async_=async_)


ENDPOINT = Endpoint(mount="/gemini", url_names=("gemini", "google"), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, client=client)
