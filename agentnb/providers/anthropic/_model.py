"""Anthropic models: :class:`AnthropicModel`, through the official ``anthropic`` client.

Renders each turn with this package's pure adapter (:mod:`._adapter`) and parses the answer with it (see :mod:`.._sdk`
for the request cycle, async clients, errors and ``retry-after``).

The finalization turn. The loop's last, tools-free request has ``tools == []`` and the tool choice ``none``.
The Messages API refuses a request whose history holds ``tool_use``/``tool_result`` blocks but which defines
no tools ("Requests which include `tool_use` or `tool_result` blocks must define tools", reported in
https://github.com/anthropics/anthropic-sdk-python/issues/494). So this model sends the tools the run defines
(``request.run_tools``, which the engine puts on every request; for a request that does not carry them,
minimal definitions named after the calls in the history) with ``tool_choice: {"type": "none"}``, which the
API documents as "the model will not use any tools"
(https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use#forcing-tool-use).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._messages import ToolCallPart, ToolResultPart
from ..._request import ModelRequest
from ...events import ToolInfo
from .._sdk import SdkModel, call_kwargs, require
from . import _adapter as _adapter

__all__ = ["AnthropicModel", "client"]


class AnthropicModel(SdkModel):
    """A Claude model behind the Anthropic Messages API.

    Args:
        client: an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``.
        model: the model name (``claude-sonnet-4-6``, ...).

    Keyword Args:
        stream (bool): stream the answer.
        settings (dict[str, Any] | None): request settings applied on every turn (``max_tokens`` -- default
            4096 --, ``temperature``, ``tool_choice``, ``parallel_tool_calls``, ``thinking``, ...). Keyword
            arguments that are not options are settings too.
        max_argument_bytes (int): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        max_retry_wait (float): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        sdk_retries (bool): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        capture_wire (bool): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.
        wire_cap (int): as for :class:`~agentnb.providers.openai_chat.OpenAIChatModel`.

    Example:
        >>> import agentnb as anb, anthropic
        >>> with anb.emulator.Emulator([{"text": "Hello!"}]) as emu:
        ...     client = anthropic.Anthropic(base_url=emu.url("anthropic"), api_key="test")
        ...     anb.Loop(model=AnthropicModel(client, model="claude-sonnet-4-6")).start("Hi").run().output
        'Hello!'
    """

    provider = _adapter.PROVIDER
    adapter = _adapter  # the pure wire mapping of this package
    extra = "anthropic"

    def __init__(self, client: Any, *, model: str, **options: Any) -> None:
        require("anthropic", self.extra)
        super().__init__(client, model=model, **options)

    def _offered(self, request: ModelRequest) -> Sequence[ToolInfo]:
        if request.tools:
            return request.tools
        used: dict[str, None] = {}
        for m in request.messages:
            for p in m.parts:
                if isinstance(p, ToolCallPart | ToolResultPart):
                    used[p.name] = None
        if not used:
            return request.tools
        if request.run_tools:
            return request.run_tools
        return [ToolInfo(name=n or "tool", description="", parameters={"type": "object"}) for n in used]

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages body; a tools-free request over a tool history keeps the tools, with choice none."""
        body = super().render(request)
        if not request.tools and body.get("tools"):
            body["tool_choice"] = {"type": "none"}
        return body

    def _send(self, body: dict[str, Any]) -> Any:
        create = self.client.messages.create
        return create(**call_kwargs(create, body, verbatim="messages"))


def client(api_key: str, base_url: str | None = None, *, async_: bool = False, **options: Any) -> Any:
    """An ``anthropic`` client (sync or async); ``options`` go to the client (``max_retries``)."""
    sdk = require("anthropic", "anthropic")
    return (sdk.AsyncAnthropic if async_ else sdk.Anthropic)(api_key=api_key, base_url=base_url, **options)
