"""Anthropic Messages: everything about this wire format, in one package.

The modules are those of every wire API package (see :mod:`agentnb.providers.openai_chat`): :mod:`._adapter`,
:mod:`._history`, :mod:`._shapes`, :mod:`._rules`, :mod:`._encode`, :mod:`._emulate`, :mod:`._model`
(:class:`AnthropicModel`). :data:`API` is its entry in :data:`agentnb.providers.WIRE_APIS`.
"""

from __future__ import annotations

from .._wireapi import WireAPI
from ._adapter import DEFAULT_MAX_TOKENS, PROVIDER, parse_response, parse_stream, render_request, render_tool
from ._emulate import ENDPOINT
from ._history import parse_history
from ._model import AnthropicModel, client
from ._rules import RULES, AnthropicView
from ._shapes import normalize

__all__ = [
    "API",
    "AnthropicModel",
    "DEFAULT_MAX_TOKENS",
    "PROVIDER",
    "parse_history",
    "parse_response",
    "parse_stream",
    "render_request",
    "render_tool",
]

API = WireAPI(
    name=PROVIDER,
    title="Anthropic Messages",
    render_request=render_request,
    parse_response=parse_response,
    parse_stream=parse_stream,
    parse_history=parse_history,
    list_key="messages",
    system_key="system",
    normalize=normalize,
    rules=RULES,
    view=AnthropicView,
    emulator=ENDPOINT,
    model_class=AnthropicModel,
    client=client,
    prefixes=("anthropic",),
    api_key_env=("ANTHROPIC_API_KEY",),
    sdk_extra="anthropic",
    where=("system", "tool_use block (id)", "tool_result block in the next user message (tool_use_id)"),
    native_output=True,
    native_output_strict_only=True,
    otel_name="anthropic",
    vendor="anthropic",
)
"""This wire API's entry in :data:`agentnb.providers.WIRE_APIS`."""
