"""Ollama's native chat API (``/api/chat``): a local model on a laptop, as a wire API (work in progress)."""

from . import wire
from .wire import PROVIDER

__all__ = ["PROVIDER", "wire"]
