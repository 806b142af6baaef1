"""OpenAI Responses: everything about this wire format, in one package.

The modules are those of every wire API package (see :mod:`agentnb.providers.openai_chat`): :mod:`._adapter`,
:mod:`._history`, :mod:`._shapes`, :mod:`._rules`, :mod:`._encode`, :mod:`._emulate`, :mod:`._model`
(:class:`OpenAIResponsesModel`). :data:`API` is its entry in :data:`agentnb.providers.WIRE_APIS`.
"""

from __future__ import annotations

from .._wireapi import WireAPI
from ._adapter import PROVIDER, parse_response, parse_stream, render_request, render_tool
from ._emulate import ENDPOINT
from ._history import parse_history
from ._model import OpenAIResponsesModel, client
from ._rules import RULES, ResponsesView
from ._shapes import normalize

__all__ = [
    "API",
    "OpenAIResponsesModel",
    "PROVIDER",
    "parse_history",
    "parse_response",
    "parse_stream",
    "render_request",
    "render_tool",
]

API = WireAPI(
    name=PROVIDER,
    title="OpenAI Responses",
    render_request=render_request,
    parse_response=parse_response,
    parse_stream=parse_stream,
    parse_history=parse_history,
    list_key="input",
    system_key="instructions",
    normalize=normalize,
    rules=RULES,
    view=ResponsesView,
    emulator=ENDPOINT,
    model_class=OpenAIResponsesModel,
    client=client,
    prefixes=("openai-responses", "openai_responses"),
    api_key_env=("OPENAI_API_KEY",),
    sdk_extra="openai",
    where=("instructions", "function_call item (call_id)", "function_call_output item (call_id)"),
    native_output=True,
    otel_name="openai",
    vendor="openai",
)
"""This wire API's entry in :data:`agentnb.providers.WIRE_APIS`."""
