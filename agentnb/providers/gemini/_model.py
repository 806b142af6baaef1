"""Gemini models: :class:`GeminiModel`, through the official ``google-genai`` client.

Each turn is rendered by this package's pure adapter (:mod:`._adapter`) into the REST body of
``generateContent`` (camelCase
JSON, the shape the service validates), then handed to the SDK as ``contents`` plus a
``GenerateContentConfig``: ``systemInstruction``, ``tools``, ``toolConfig``, ``safetySettings`` and the
fields of ``generationConfig`` move into the config, whose pydantic models accept the camelCase names. Both
are built from JSON text (``model_validate_json``) so that ``thoughtSignature`` values, base64 in JSON and
bytes in the SDK, are decoded once and sent back byte for byte
(https://ai.google.dev/gemini-api/docs/thought-signatures). The SDK turns them back into the REST body, so
what reaches the wire is what the adapter rendered.

Streaming uses ``generate_content_stream`` (``:streamGenerateContent?alt=sse``). The SDK does not retry
unless asked (``HttpOptions.retry_options``), so retries stay with the loop. See :mod:`._sdk` for async
clients (pass ``client.aio``), errors and ``retry-after``.
"""

from __future__ import annotations

import json
from typing import Any

from .._sdk import RENDERS, SdkModel, require
from . import _adapter as _adapter

__all__ = ["GeminiModel", "client"]

_CONFIG_KEYS = ("systemInstruction", "tools", "toolConfig", "safetySettings", "cachedContent", "labels")


class GeminiModel(SdkModel):
    """A Gemini model behind the Gemini API (``generateContent``).

    Args:
        client: a ``google.genai.Client`` (sync) or its ``.aio`` (async).
        model: the model name (``gemini-2.5-flash``, ...).

    Keyword Args:
        stream (bool): stream the answer.
        settings (dict[str, Any] | None): request settings applied on every turn (``max_tokens``,
            ``temperature``, ``tool_choice``, ``generation_config``, ``schema_dialect``, ...). Keyword arguments
            that are not options are settings too.
        max_argument_bytes (int): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        max_retry_wait (float): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        capture_wire (bool): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        wire_cap (int): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.

    Example:
        >>> import agentnb as anb
        >>> from google import genai
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = genai.Client(api_key="test", http_options={"base_url": emu.url("gemini")})
        ...     anb.Loop(model=GeminiModel(client, model="gemini-2.5-flash")).start("Hi").run().output
        'Hello!'
    """

    provider = _adapter.PROVIDER
    adapter = _adapter  # the pure wire mapping of this package
    extra = "gemini"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("google.genai", self.extra)
        options.pop("sdk_retries", None)
        super().__init__(client, model=model, sdk_retries=True, **options)

    def _send(self, body: dict[str, Any]) -> Any:
        types = require("google.genai.types", self.extra)
        contents = _contents(types, body.get("contents") or [], RENDERS.get())
        config: dict[str, Any] = {k: body[k] for k in _CONFIG_KEYS if k in body}
        config.update(body.get("generationConfig") or {})
        rest = {k: v for k, v in body.items() if k not in (*_CONFIG_KEYS, "contents", "generationConfig")}
        config.update(rest)
        sdk_config = types.GenerateContentConfig.model_validate_json(json.dumps(config)) if config else None
        models = self.client.models
        send = models.generate_content_stream if self.stream else models.generate_content
        return send(model=self.name, contents=contents, config=sdk_config)


def _contents(types: Any, items: list[dict[str, Any]], renders: dict[str, Any] | None) -> list[Any]:
    """The SDK's ``Content`` of each rendered content, each made once per run.

    The render cache shares a content's dict between the turns that send it (:mod:`agentnb.providers._render`),
    so the ``Content`` made from it last turn is that dict's: the contents kept from the last turn (a prefix of
    the same dicts) are not converted again, only the new ones (about 40 µs each).
    """
    last_items, last = renders.get(_CONTENTS, ((), ())) if renders is not None else ((), ())
    n = len(last_items)
    # the same dicts compare in C at a pointer's cost; an equal dict that is another object makes an equal Content
    if n and len(items) >= n and items[:n - 1] == last_items[:n - 1]:
        k = n if items[n - 1] == last_items[n - 1] else n - 1
    else:
        k = 0
    made = [*last[:k], *(types.Content.model_validate_json(json.dumps(c)) for c in items[k:])]
    if renders is not None:
        renders[_CONTENTS] = (list(items), made)
    return made


_CONTENTS = "gemini.sdk_contents"
"""Where :func:`_contents` keeps the last turn's contents in the run's render cache."""


def client(api_key: str, base_url: str | None = None, *, async_: bool = False, **options: Any) -> Any:
    """A ``google.genai`` client (its ``.aio`` when ``async_``); ``options`` are not used by this SDK."""
    genai = require("google.genai", "gemini")
    made = genai.Client(api_key=api_key, http_options={"base_url": base_url} if base_url else None)
    return made.aio if async_ else made
