""":class:`AnthropicModel` under its first import path (kept): it lives in :mod:`.anthropic`."""

from __future__ import annotations

from .anthropic.model import AnthropicModel

__all__ = ["AnthropicModel"]
