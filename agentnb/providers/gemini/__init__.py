"""Google Gemini (``generateContent``): everything about this wire format, in one package.

The modules are those of every wire API package (see :mod:`agentnb.providers.openai_chat`): :mod:`._adapter`,
:mod:`._history`, :mod:`._shapes`, :mod:`._rules`, :mod:`._encode`, :mod:`._emulate`, :mod:`._model`
(:class:`GeminiModel`). :data:`API` is its entry in :data:`agentnb.providers.WIRE_APIS`.
"""

from __future__ import annotations

from .._wireapi import WireAPI
from ._adapter import PROVIDER, gemini_schema, parse_response, parse_stream, render_request, render_tool
from ._emulate import ENDPOINT
from ._history import parse_history
from ._model import GeminiModel, client
from ._rules import RULES, GeminiView
from ._shapes import normalize

__all__ = [
    "API",
    "GeminiModel",
    "PROVIDER",
    "gemini_schema",
    "parse_history",
    "parse_response",
    "parse_stream",
    "render_request",
    "render_tool",
]

API = WireAPI(
    name=PROVIDER,
    title="Google Gemini",
    render_request=render_request,
    parse_response=parse_response,
    parse_stream=parse_stream,
    parse_history=parse_history,
    list_key="contents",
    system_key="systemInstruction",
    normalize=normalize,
    rules=RULES,
    view=GeminiView,
    emulator=ENDPOINT,
    model_class=GeminiModel,
    client=client,
    prefixes=("gemini", "google", "google-gla"),
    api_key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    sdk_extra="gemini",
    where=("systemInstruction", "functionCall part (name)", "functionResponse part (name)"),
    native_output=True,
    otel_name="gcp.gemini",
    vendor="google",
)
"""This wire API's entry in :data:`agentnb.providers.WIRE_APIS`."""
