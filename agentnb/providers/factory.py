"""``agentnb.model("provider:model-name")``: a provider model from a short string and the environment.

The prefix picks the wire API and the SDK; the client is made from the environment's API key (or the
``api_key`` and ``base_url`` given), sync or async:

======================================= ============================ ===================================
prefix                                  model class                  key (environment)
======================================= ============================ ===================================
``openai:`` / ``openai-chat:``          OpenAIChatModel              ``OPENAI_API_KEY``
``openai-responses:``                   OpenAIResponsesModel         ``OPENAI_API_KEY``
``anthropic:``                          AnthropicModel               ``ANTHROPIC_API_KEY``
``gemini:`` / ``google:``               GeminiModel                  ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``
======================================= ============================ ===================================
"""

from __future__ import annotations

import os
from typing import Any

from ._sdk import SdkModel, require

__all__ = ["model"]

_KEYS = {"openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
         "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
_PREFIXES = {"openai": "openai_chat", "openai-chat": "openai_chat", "openai_chat": "openai_chat",
             "openai-responses": "openai_responses", "openai_responses": "openai_responses",
             "anthropic": "anthropic", "gemini": "gemini", "google": "gemini", "google-gla": "gemini"}


def _client(sdk: str, api_key: str | None, base_url: str | None, async_: bool) -> Any:
    if api_key is None:
        names = _KEYS[sdk]
        api_key = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if api_key is None:
            raise ValueError(f"no API key for {sdk}: set {' or '.join(names)}, or pass api_key=... "
                             "(for offline work, point base_url at agentnb.emulator.Emulator)")
    if sdk == "openai":
        openai = require("openai", "openai")
        return (openai.AsyncOpenAI if async_ else openai.OpenAI)(api_key=api_key, base_url=base_url)
    if sdk == "anthropic":
        anthropic = require("anthropic", "anthropic")
        return (anthropic.AsyncAnthropic if async_ else anthropic.Anthropic)(api_key=api_key, base_url=base_url)
    genai = require("google.genai", "gemini")
    client = genai.Client(api_key=api_key, http_options={"base_url": base_url} if base_url else None)
    return client.aio if async_ else client


def model(spec: str, *, api_key: str | None = None, base_url: str | None = None, async_: bool = False,
          **options: Any) -> SdkModel:
    """A provider model from ``"provider:model-name"``, its client made from the environment's API key.

    Args:
        spec: ``openai:gpt-4.1``, ``openai-responses:gpt-5``, ``anthropic:claude-sonnet-4-6``,
            ``gemini:gemini-2.5-flash`` (see the module docs for every prefix).
        api_key: the key (default: from the environment).
        base_url: another endpoint (a proxy, an OpenAI-compatible server, the local emulator).
        async_: make the SDK's async client.
        **options: passed to the model class (``stream``, ``settings``, ``temperature``, ...).

    Raises:
        ValueError: an unknown prefix, or no key.
        ImportError: the SDK is missing (the message names the extra to install).

    Example:
        >>> import agentnb as anb
        >>> with anb.emulator.Emulator([{"text": "Hi!"}]) as emu:
        ...     m = anb.model("anthropic:claude-sonnet-4-6", base_url=emu.url("anthropic"), api_key="test")
        ...     anb.Loop(model=m).start("Hello").run().output
        'Hi!'
    """
    prefix, sep, name = spec.partition(":")
    if not sep or not name or prefix not in _PREFIXES:
        raise ValueError(f"model({spec!r}): write 'provider:model-name' with provider one of "
                         f"{', '.join(sorted(_PREFIXES))}")
    wire = _PREFIXES[prefix]
    if wire in ("openai_chat", "openai_responses"):
        from .openai_models import OpenAIChatModel, OpenAIResponsesModel

        cls: type[SdkModel] = OpenAIChatModel if wire == "openai_chat" else OpenAIResponsesModel
        return cls(_client("openai", api_key, base_url, async_), model=name, **options)
    if wire == "anthropic":
        from .anthropic_model import AnthropicModel

        return AnthropicModel(_client("anthropic", api_key, base_url, async_), model=name, **options)
    from .gemini_model import GeminiModel

    return GeminiModel(_client("gemini", api_key, base_url, async_), model=name, **options)
