"""The OpenAI Responses model: :class:`OpenAIResponsesModel`, through the official ``openai`` client.

It wraps the ``openai`` client the user passes (``openai.OpenAI`` or ``openai.AsyncOpenAI``, or any client
of an OpenAI-compatible server through ``base_url``), renders each turn with this package's pure adapter
and parses the answer with it. See :mod:`agentnb.providers._sdk` for the request cycle, async clients,
errors and ``retry-after``. The ``openai`` SDK is imported only when a model or client is made.

The Chat Completions and Responses APIs accept a history with tool calls and results on a request that
offers no tools (the loop's finalization turn): ``tool_choice`` is then left out, since Chat Completions
refuses a ``tool_choice`` without ``tools`` ("'tool_choice' is only allowed when 'tools' are specified").
"""

from __future__ import annotations

from typing import Any

from .._sdk import SdkModel, call_kwargs, require
from . import _adapter as _adapter

__all__ = ["OpenAIResponsesModel", "client"]


class OpenAIResponsesModel(SdkModel):
    """A model behind the OpenAI Responses API, through the official ``openai`` client.

    Requests are stateless (the whole conversation as ``input`` items; no ``previous_response_id``).
    Reasoning items come back exactly as received, so pass ``store=False`` and
    ``include=["reasoning.encrypted_content"]`` as settings to keep a reasoning model's calls valid
    without server-side storage. Arguments as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.

    Example:
        >>> import agentnb as anb, openai
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = openai.OpenAI(base_url=emu.url("openai"), api_key="test")
        ...     anb.Loop(model=OpenAIResponsesModel(client, model="gpt-5", stream=True)).start("Hi").run().output
        'Hello!'
    """

    provider = _adapter.PROVIDER
    adapter = _adapter  # the pure wire mapping of this package
    extra = "openai"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("openai", self.extra)
        super().__init__(client, model=model, **options)

    def _send(self, body: dict[str, Any]) -> Any:
        create = self.client.responses.create
        return create(**call_kwargs(create, body, verbatim="input"))


def client(api_key: str, base_url: str | None = None, *, async_: bool = False, **options: Any) -> Any:
    """An ``openai`` client (sync or async) for this wire API; ``options`` go to the client (``max_retries``)."""
    openai = require("openai", "openai")
    return (openai.AsyncOpenAI if async_ else openai.OpenAI)(api_key=api_key, base_url=base_url, **options)
