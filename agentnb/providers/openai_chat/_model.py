"""The OpenAI Chat Completions model: :class:`OpenAIChatModel`, through the official ``openai`` client.

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

__all__ = ["OpenAIChatModel", "client"]


class OpenAIChatModel(SdkModel):
    """A model behind the OpenAI Chat Completions API, through the official ``openai`` client.

    Args:
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (sync or async both work from a notebook).
        model: the model name (``gpt-4.1``, ...).

    Keyword Args:
        stream (bool): stream the answer (text and argument fragments become events as they arrive).
        settings (dict[str, Any] | None): request settings applied on every turn (``temperature``,
            ``max_tokens``, ``tool_choice``, ``parallel_tool_calls``, ...); the loop's own settings win over
            these. Keyword arguments that are not options are settings too.
        max_argument_bytes (int): the cap on one streamed call's arguments (the turn ends INCOMPLETE past it).
        max_retry_wait (float): the longest ``retry-after`` honoured; a longer one makes the error final.
        sdk_retries (bool): keep the SDK's own retries (off by default: the loop retries, with events).
        capture_wire (bool): keep each request's HTTP exchange on its turn (``turn.wire``: the body and headers
            as sent, credentials masked, the response or the stream's frames with their times), shown by the
            debugger's Wire tab; on by default (see :mod:`agentnb.providers._capture`).
        wire_cap (int): the bytes of body and response one request keeps (then "truncated at N bytes of M").

    Example:
        >>> import agentnb as anb, openai
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = openai.OpenAI(base_url=emu.url("openai"), api_key="test")
        ...     anb.Loop(model=OpenAIChatModel(client, model="gpt-4.1")).start("Hi").run().output
        'Hello!'
    """

    provider = _adapter.PROVIDER
    adapter = _adapter  # the pure wire mapping of this package
    extra = "openai"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("openai", self.extra)
        super().__init__(client, model=model, **options)

    def _send(self, body: dict[str, Any]) -> Any:
        create = self.client.chat.completions.create
        return create(**call_kwargs(create, body, verbatim="messages"))


def client(api_key: str, base_url: str | None = None, *, async_: bool = False, **options: Any) -> Any:
    """An ``openai`` client (sync or async) for this wire API; ``options`` go to the client (``max_retries``)."""
    openai = require("openai", "openai")
    return (openai.AsyncOpenAI if async_ else openai.OpenAI)(api_key=api_key, base_url=base_url, **options)
