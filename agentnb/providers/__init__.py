"""Models and wire adapters. :mod:`.base` defines what a model is; :mod:`.scripted` is the offline model.

One pure adapter per wire API, with the same three functions (``render_request``, ``parse_response``,
``parse_stream``): :mod:`.openai_chat`, :mod:`.openai_responses`, :mod:`.anthropic`, :mod:`.gemini`. They
import no SDK; :mod:`.sse` turns streamed response bodies into the events they read.
"""

from . import anthropic, gemini, openai_chat, openai_responses, sse
from .base import ArgumentsDelta, Model, ModelRequest, StreamItem, TextDelta
from .scripted import ScriptedModel

__all__ = [
    "ArgumentsDelta",
    "Model",
    "ModelRequest",
    "ScriptedModel",
    "StreamItem",
    "TextDelta",
    "anthropic",
    "gemini",
    "openai_chat",
    "openai_responses",
    "sse",
]
