"""How the local emulator serves the Responses API: its route; the error shape and client are OpenAI's."""

from __future__ import annotations

from typing import Any

from .._wireapi import Endpoint, RouteMatch
from ..openai_chat._emulate import MOUNT, Problem, check_model, check_tool_choice, client, default_message, error_body
from ._encode import encode

__all__ = ["ENDPOINT"]

HOSTED = ("file_search", "web_search_preview", "web_search_preview_2025_03_11", "computer_use_preview",
          "code_interpreter", "image_generation", "mcp")
"""The built-in tools a Responses ``tool_choice`` names by its type alone (``mcp`` with a ``server_label``)."""


def _check(body: dict[str, Any]) -> Problem | None:
    """The 400s before the history: the model, and a malformed ``tool_choice`` (its Responses form)."""
    return check_model(body) or check_tool_choice(body, nested=False, hosted=HOSTED)


def _route(path: str) -> RouteMatch | None:
    return RouteMatch() if path.startswith(f"{MOUNT}/responses") else None


ENDPOINT = Endpoint(mount=MOUNT, url_names=("openai_responses",), route=_route, encode=encode,
                    error_body=error_body, default_message=default_message, check_request=_check,
                    client=client)
