"""How the local emulator serves the Responses API: its route; the error shape and client are OpenAI's."""

from __future__ import annotations

from ..openai_chat.emulate import MOUNT, check_model, client, default_message, error_body
from ..wireapi import Endpoint, RouteMatch
from .encode import encode

__all__ = ["ENDPOINT"]


def _route(path: str) -> RouteMatch | None:
    return RouteMatch() if path.startswith(f"{MOUNT}/responses") else None


ENDPOINT = Endpoint(mount=MOUNT, url_names=("openai_responses",), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, check_request=check_model,
                    client=client)
