"""OpenAI models: :class:`OpenAIChatModel` (Chat Completions) and :class:`OpenAIResponsesModel` (Responses).

Both wrap the ``openai`` client the user passes (``openai.OpenAI`` or ``openai.AsyncOpenAI``, or any client
of an OpenAI-compatible server through ``base_url``), render each turn with the pure adapter of their wire
API (:mod:`.openai_chat`, :mod:`.openai_responses`) and parse the answer with it. See :mod:`._sdk` for the
request cycle, async clients, errors and ``retry-after``.

The Chat Completions and Responses APIs accept a history with tool calls and results on a request that
offers no tools (the loop's finalization turn): ``tool_choice`` is then left out, since Chat Completions
refuses a ``tool_choice`` without ``tools`` ("'tool_choice' is only allowed when 'tools' are specified").
"""

from __future__ import annotations

from typing import Any

from . import openai_chat, openai_responses
from ._sdk import SdkModel, call_kwargs, require

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel"]


class OpenAIChatModel(SdkModel):
    """A model behind the OpenAI Chat Completions API, through the official ``openai`` client.

    Args:
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (sync or async both work from a notebook).
        model: the model name (``gpt-4.1``, ...).
        stream: stream the answer (text and argument fragments become events as they arrive).
        settings: request settings applied on every turn (``temperature``, ``max_tokens``, ``tool_choice``,
            ``parallel_tool_calls``, ...); the loop's own settings win over these. Keyword arguments that
            are not options are settings too.
        max_argument_bytes: the cap on one streamed call's arguments (the turn ends INCOMPLETE past it).
        max_retry_wait: the longest ``retry-after`` honoured; a longer one makes the error final.
        sdk_retries: keep the SDK's own retries (off by default: the loop retries, with events).

    Example:
        >>> import agentnb as anb, openai
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = openai.OpenAI(base_url=emu.url("openai"), api_key="test")
        ...     anb.Loop(model=OpenAIChatModel(client, model="gpt-4.1")).start("Hi").run().output
        'Hello!'
    """

    provider = openai_chat.PROVIDER
    adapter = openai_chat
    extra = "openai"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("openai", self.extra)
        super().__init__(client, model=model, **options)

    def _send(self, body: dict[str, Any]) -> Any:
        create = self.client.chat.completions.create
        return create(**call_kwargs(create, body))


class OpenAIResponsesModel(SdkModel):
    """A model behind the OpenAI Responses API, through the official ``openai`` client.

    Requests are stateless (the whole conversation as ``input`` items; no ``previous_response_id``).
    Reasoning items come back exactly as received, so pass ``store=False`` and
    ``include=["reasoning.encrypted_content"]`` as settings to keep a reasoning model's calls valid
    without server-side storage. Arguments as for :class:`OpenAIChatModel`.

    Example:
        >>> import agentnb as anb, openai
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = openai.OpenAI(base_url=emu.url("openai"), api_key="test")
        ...     anb.Loop(model=OpenAIResponsesModel(client, model="gpt-5", stream=True)).start("Hi").run().output
        'Hello!'
    """

    provider = openai_responses.PROVIDER
    adapter = openai_responses
    extra = "openai"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("openai", self.extra)
        super().__init__(client, model=model, **options)

    def _send(self, body: dict[str, Any]) -> Any:
        create = self.client.responses.create
        return create(**call_kwargs(create, body))
