"""OpenAI Chat Completions (and OpenAI-compatible servers): everything about this wire format, in one package.

=================== =====================================================================================
module              what it holds
=================== =====================================================================================
:mod:`._adapter`     ``render_request``, ``parse_response``, ``parse_stream`` (pure, no SDK)
:mod:`._history`     ``parse_history``: a request body read back (the importer and the emulator's decoder)
:mod:`._shapes`      ``normalize``: a body of any JSON shape made safe to read
:mod:`._rules`       the lint rules and their fixes
:mod:`._encode`      the emulator's encoder; :mod:`._emulate` its route, error body and request checks
:mod:`._model`       :class:`OpenAIChatModel` (the ``openai`` SDK, imported when a model is made)
=================== =====================================================================================

:data:`API` is this package's entry in :data:`agentnb.providers.WIRE_APIS`.
"""

from __future__ import annotations

from .._wireapi import WireAPI
from ._adapter import PROVIDER, parse_response, parse_stream, render_request, render_tool
from ._emulate import ENDPOINT
from ._history import parse_history
from ._model import OpenAIChatModel, client
from ._rules import RULES, ChatView
from ._shapes import normalize

__all__ = [
    "API",
    "OpenAIChatModel",
    "PROVIDER",
    "parse_history",
    "parse_response",
    "parse_stream",
    "render_request",
    "render_tool",
]

API = WireAPI(
    name=PROVIDER,
    title="OpenAI Chat Completions",
    render_request=render_request,
    parse_response=parse_response,
    parse_stream=parse_stream,
    parse_history=parse_history,
    list_key="messages",
    system_key=None,
    normalize=normalize,
    rules=RULES,
    view=ChatView,
    emulator=ENDPOINT,
    model_class=OpenAIChatModel,
    client=client,
    prefixes=("openai", "openai-chat", "openai_chat"),
    api_key_env=("OPENAI_API_KEY",),
    sdk_extra="openai",
    where=("messages[0], role system", "assistant tool_calls[] (id)", "role tool message (tool_call_id)"),
    native_output=True,
    otel_name="openai",
    vendor="openai",
)
"""This wire API's entry in :data:`agentnb.providers.WIRE_APIS`."""
