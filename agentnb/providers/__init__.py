"""Models and wire APIs. :mod:`.base` defines what a model is; :mod:`.scripted` is the offline model.

What a model is asked and answers with (the request, its options, the stream items) is in :mod:`agentnb.request`.

One package per wire API, each holding everything about that format (rendering, parsing whole and streamed
responses, reading histories back, the emulator's encoder, lint rules, the SDK model):
:mod:`.openai_chat`, :mod:`.openai_responses`, :mod:`.anthropic`, :mod:`.gemini`. Each exports a
:class:`~.wireapi.WireAPI` named ``API``; :data:`WIRE_APIS` (:mod:`.registry`) lists them, and every part
of agentnb that treats providers one by one iterates it. The pure parts import no SDK; :mod:`.sse` turns
streamed response bodies into the events they read. :mod:`.fallback` chains models; :mod:`.factory` makes
one from ``"provider:model-name"``.
"""

from ..exceptions import ProviderError
from . import anthropic, gemini, openai_chat, openai_responses, sse
from .anthropic import AnthropicModel
from .base import Model
from .factory import model
from .fallback import FallbackModel
from .gemini import GeminiModel
from .openai_chat import OpenAIChatModel
from .openai_responses import OpenAIResponsesModel
from .registry import WIRE_APIS, wire_api
from .scripted import ScriptedModel
from .wireapi import WireAPI

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
    "sse",
    "wire_api",
]
