"""Models and wire APIs. :mod:`._base` defines what a model is; :mod:`._scripted` is the offline model.

What a model is asked and answers with (the request, its options, the stream items) is in :mod:`agentnb._request`.

One package per wire API, each holding everything about that format (rendering, parsing whole and streamed
responses, reading histories back, the emulator's encoder, lint rules, the SDK model):
:mod:`.openai_chat`, :mod:`.openai_responses`, :mod:`.anthropic`, :mod:`.gemini`. Each exports a
:class:`~._wireapi.WireAPI` named ``API``; :data:`WIRE_APIS` (:mod:`._registry`) lists them, and every part
of agentnb that treats providers one by one iterates it. The pure parts import no SDK; :mod:`._sse` turns
streamed response bodies into the events they read. :mod:`._fallback` chains models; :mod:`._factory` makes
one from ``"provider:model-name"``.
"""

from .._request import tool_choice_of
from ..exceptions import ProviderError
from . import anthropic, gemini, openai_chat, openai_responses
from ._base import Model
from ._factory import model
from ._fallback import FallbackModel
from ._registry import WIRE_APIS, wire_api
from ._scripted import ScriptedModel
from ._wireapi import WireAPI
from .anthropic import AnthropicModel
from .gemini import GeminiModel
from .openai_chat import OpenAIChatModel
from .openai_responses import OpenAIResponsesModel

__all__ = [
    "WIRE_APIS",
    "AnthropicModel",
    "FallbackModel",
    "GeminiModel",
    "Model",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderError",
    "ScriptedModel",
    "WireAPI",
    "anthropic",
    "gemini",
    "model",
    "openai_chat",
    "openai_responses",
    "tool_choice_of",
    "wire_api",
]
