"""Models and wire adapters. :mod:`.base` defines what a model is; :mod:`.scripted` is the offline model.

One pure adapter per wire API, with the same three functions (``render_request``, ``parse_response``,
``parse_stream``): :mod:`.openai_chat`, :mod:`.openai_responses`, :mod:`.anthropic`, :mod:`.gemini`. They
import no SDK; :mod:`.sse` turns streamed response bodies into the events they read.

The provider models wrap the official SDK clients (imported only when a model is made): :mod:`.openai_models`
(``OpenAIChatModel``, ``OpenAIResponsesModel``), :mod:`.anthropic_model`, :mod:`.gemini_model`; :mod:`.fallback`
chains models; :mod:`.factory` makes one from ``"provider:model-name"``.
"""

from . import anthropic, gemini, openai_chat, openai_responses, sse
from ._sdk import ProviderError
from .anthropic_model import AnthropicModel
from .base import ArgumentsDelta, Model, ModelRequest, StreamItem, TextDelta
from .factory import model
from .fallback import FallbackModel
from .gemini_model import GeminiModel
from .openai_models import OpenAIChatModel, OpenAIResponsesModel
from .scripted import ScriptedModel

__all__ = [
    "AnthropicModel",
    "ArgumentsDelta",
    "FallbackModel",
    "GeminiModel",
    "Model",
    "ModelRequest",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderError",
    "ScriptedModel",
    "StreamItem",
    "TextDelta",
    "anthropic",
    "gemini",
    "model",
    "openai_chat",
    "openai_responses",
    "sse",
]
