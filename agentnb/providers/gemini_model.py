""":class:`GeminiModel` under its first import path (kept): it lives in :mod:`.gemini`."""

from __future__ import annotations

from .gemini.model import GeminiModel

__all__ = ["GeminiModel"]
