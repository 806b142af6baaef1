"""The OpenAI models under their first import path: they live in :mod:`.openai_chat` and :mod:`.openai_responses`."""

from __future__ import annotations

from .openai_chat.model import OpenAIChatModel
from .openai_responses.model import OpenAIResponsesModel

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel"]
