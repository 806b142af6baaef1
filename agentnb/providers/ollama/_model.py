"""The Ollama model: :class:`OllamaModel`, through the official ``ollama`` Python client.

Each turn is rendered by :mod:`._adapter` into the ``/api/chat`` body and handed to ``client.chat(**body)``
(``ollama.Client`` or ``ollama.AsyncClient``), whose keyword arguments are the body's keys; a key the
client does not name cannot be sent through it and is refused before anything is sent. The client
re-validates the body with its own pydantic models: tool schemas keep the subset of JSON Schema the server
reads (``type``, ``description``, ``enum``, ``items``, ``properties``, ``required``), the rest is dropped
there, as the server would drop it. The answer (a ``ChatResponse``, or an iterator of them when streaming)
is parsed by the same adapter.

Ollama usually needs no credential. A client made with ``headers={"Authorization": ...}`` (a proxy, the
hosted service) or with ``OLLAMA_API_KEY`` in the environment sends one; :meth:`OllamaModel.credentials`
reports it so a run masks it wherever it is echoed. The client does not retry; retries stay with the loop.
``ollama.ResponseError`` becomes a :class:`~agentnb.exceptions.ProviderError` with the HTTP status and the
server's ``error`` text; the ``ConnectionError`` the client raises when no server listens is a retryable
connection error whose message says how to start one.
"""

from __future__ import annotations

import os
from typing import Any

from ..._redact import client_credentials
from ...exceptions import ModelError, ProviderError
from .._sdk import SdkModel, map_error, require
from . import _adapter as wire

__all__ = ["DEFAULT_HOST", "OllamaModel", "client", "make_client"]

DEFAULT_HOST = "http://127.0.0.1:11434"
"""Where a local Ollama server listens unless ``OLLAMA_HOST`` says otherwise."""

_CHAT_KEYS = ("model", "messages", "tools", "stream", "think", "logprobs", "top_logprobs", "format", "options",
              "keep_alive")
"""The keyword arguments of ``Client.chat`` (ollama 0.6)."""


def make_client(host: str | None = None, *, async_: bool = False, **kwargs: Any) -> Any:
    """An ``ollama.Client`` (or ``AsyncClient``) for ``host``, else ``OLLAMA_HOST``, else the local default.

    Example:
        >>> make_client("http://127.0.0.1:9")._client.base_url
        URL('http://127.0.0.1:9')
    """
    ollama = require("ollama", "ollama")
    host = host or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST
    return (ollama.AsyncClient if async_ else ollama.Client)(host=host, **kwargs)


def client(api_key: str | None = None, base_url: str | None = None, *, async_: bool = False, **options: Any) -> Any:
    """The client ``anb.model("ollama:...")`` makes: ``base_url`` is the host; a key (rare) is a bearer header.

    Example:
        >>> client(None, "http://127.0.0.1:9")._client.headers.get("authorization") is None
        True
    """
    if api_key:
        options["headers"] = {**(options.get("headers") or {}), "Authorization": f"Bearer {api_key}"}
    return make_client(base_url, async_=async_, **options)


class OllamaModel(SdkModel):
    """A model served by Ollama's native chat API (``/api/chat``): a local model on a laptop, or a remote server.

    Args:
        client: an ``ollama.Client`` or ``ollama.AsyncClient``.
        model: the model name (``qwen3``, ``llama3.2``, ``gpt-oss:20b``, ...).
        stream: stream the answer (JSON lines).
        settings: request settings applied on every turn (``max_tokens``, ``temperature``, ``think``,
            ``options``, ``keep_alive``, ...). Keyword arguments that are not options are settings too.
        max_argument_bytes, max_retry_wait, capture_wire, wire_cap: as for
            :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.

    Example:
        >>> import agentnb as anb, ollama
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = ollama.Client(host=emu.url("ollama"))
        ...     anb.Loop(model=OllamaModel(client, model="qwen3")).start("Hi").run().output
        'Hello!'
    """

    provider = wire.PROVIDER
    adapter = wire
    extra = "ollama"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("ollama", self.extra)
        options.pop("sdk_retries", None)
        super().__init__(client, model=model, sdk_retries=True, **options)  # the client has no retries

    def credentials(self) -> list[str]:
        """The credential headers the client sends (``Authorization``, ...), usually none for a local server.

        Example:
            >>> import ollama
            >>> client = ollama.Client(host="http://127.0.0.1:9", headers={"Authorization": "Bearer zq9-tok-51"})
            >>> OllamaModel(client, model="qwen3").credentials()
            ['Bearer zq9-tok-51', 'zq9-tok-51']
        """
        found = client_credentials(self.client)
        found += client_credentials(getattr(self.client, "_client", None) or object())  # the httpx client's headers
        return list(dict.fromkeys(found))

    def _send(self, body: dict[str, Any]) -> Any:
        unknown = sorted(set(body) - set(_CHAT_KEYS))
        if unknown:
            raise ProviderError(f"ollama: the ollama client cannot send {unknown} (its chat() takes "
                                f"{', '.join(_CHAT_KEYS)}); put sampling settings in options={{...}}",
                                provider=self.provider, retryable=False)
        return self.client.chat(**body)

    def _error(self, exc: Exception) -> ModelError:
        if type(exc).__name__ == "ResponseError":  # ollama.ResponseError: the server's {"error": ...} and status
            status = getattr(exc, "status_code", None)
            status = status if isinstance(status, int) and status > 0 else None
            message = str(getattr(exc, "error", exc))
            return ProviderError(f"{self.provider}: {message}", status=status, provider=self.provider,
                                 body={"error": message})
        if isinstance(exc, ConnectionError) and map_error(exc, self.provider) is not None:
            host = str(getattr(getattr(self.client, "_client", None), "base_url", "") or DEFAULT_HOST)
            return ProviderError(f"{self.provider}: no Ollama server answers at {host} ({exc}); start one with "
                                 "`ollama serve`, or point OLLAMA_HOST (or host=...) at one", status=None,
                                 retryable=True, provider=self.provider)
        return super()._error(exc)
