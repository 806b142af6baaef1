"""How the local emulator serves Ollama: the route, the error shape, request checks, the client.

The emulator mounts the API under ``/ollama``: ``ollama.Client(host=emu.url("ollama"))`` posts to
``/ollama/api/chat``. As the server does, a request without ``stream`` streams (JSON lines,
``application/x-ndjson``). Errors are ``{"error": "<message>"}`` with the HTTP status
(https://github.com/ollama/ollama/blob/main/docs/api.md#errors); the client raises them as
``ollama.ResponseError(error, status_code)``.
"""

from __future__ import annotations

from typing import Any

from .._wireapi import Endpoint, RouteMatch
from ._encode import encode

__all__ = ["ENDPOINT", "MOUNT", "check_request", "client", "default_message", "error_body"]

MOUNT = "/ollama"


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """Ollama's error body: ``{"error": message}`` (the status travels in the status line).

    Example:
        >>> error_body(404, 'model "qwen9" not found, try pulling it first')
        {'error': 'model "qwen9" not found, try pulling it first'}
    """
    return {"error": message}


def default_message(status: int) -> str:
    """The server's usual message for a status the emulator is asked to fail with."""
    if status in (429, 503):
        return "server busy, please try again.  maximum pending requests exceeded"
    if status >= 500:
        return "llama runner process has terminated: exit status 2"
    return "invalid request"


def check_request(body: dict[str, Any]) -> tuple[str, str | None] | None:
    """The 400 the server answers before reading the messages (a missing or non-string ``model``).

    Example:
        >>> check_request({"messages": []})
        ('model is required', 'model')
    """
    model = body.get("model")
    if model is None or model == "":
        return "model is required", "model"
    if not isinstance(model, str):
        kind = "number" if isinstance(model, int | float) else type(model).__name__
        return f"json: cannot unmarshal {kind} into Go struct field ChatRequest.model of type string", "model"
    return None


def _route(path: str) -> RouteMatch | None:
    return RouteMatch() if path.rstrip("/") == f"{MOUNT}/api/chat" else None


def client(base_url: str, async_: bool = False) -> Any:
    """An ``ollama`` client on ``base_url``."""
    from ._model import make_client

    return make_client(base_url, async_=async_)


ENDPOINT = Endpoint(mount=MOUNT, url_names=("ollama",), route=_route, encode=encode, error_body=error_body,
                    default_message=default_message, check_request=check_request, client=client,
                    stream_default=True, stream_media_type="application/x-ndjson")
