"""``agentnb.model("provider:model-name")``: a provider model from a short string and the environment.

The prefix picks the wire API (each :class:`~agentnb.providers._wireapi.WireAPI` in
:data:`~agentnb.providers.WIRE_APIS` lists its ``prefixes``, ``api_key_env``, ``model_class`` and ``client``);
the client is made from the environment's API key (or the ``api_key`` and ``base_url`` given), sync or
async:

======================================= ============================ ===================================
prefix                                  model class                  key (environment)
======================================= ============================ ===================================
``openai:`` / ``openai-chat:``          OpenAIChatModel              ``OPENAI_API_KEY``
``openai-responses:``                   OpenAIResponsesModel         ``OPENAI_API_KEY``
``anthropic:``                          AnthropicModel               ``ANTHROPIC_API_KEY``
``gemini:`` / ``google:``               GeminiModel                  ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``
``ollama:``                             OllamaModel                  none (``base_url``: ``OLLAMA_HOST``)
======================================= ============================ ===================================
"""

from __future__ import annotations

import os
from typing import Any

from ._sdk import SdkModel
from ._wireapi import WireAPI

__all__ = ["model", "prefixes"]


def prefixes() -> dict[str, WireAPI]:
    """Every prefix ``anb.model`` takes, and the wire API it picks."""
    from ._registry import WIRE_APIS

    return {p: api for api in WIRE_APIS.values() for p in api.prefixes}


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
    known = prefixes()
    if not sep or not name or prefix not in known:
        raise ValueError(f"model({spec!r}): write 'provider:model-name' with provider one of "
                         f"{', '.join(sorted(known))}")
    api = known[prefix]
    if api_key is None:
        api_key = api.key(os.environ.items())
        if api_key is None and api.needs_key:
            raise ValueError(f"no API key for {api.prefixes[0]}: set {' or '.join(api.api_key_env)}, or pass "
                             "api_key=... (for offline work, point base_url at agentnb.emulator.Emulator)")
    return api.model_class(api.client(api_key, base_url, async_=async_), model=name, **options)
