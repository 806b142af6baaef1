"""Ollama's native chat API (``POST /api/chat``) as a wire API: a local model on a laptop, no key, no cloud.

Everything about the format lives in this package, and :data:`API` is its one entry in
:data:`agentnb.providers.WIRE_APIS`:

=================== =====================================================================================
module              what
=================== =====================================================================================
:mod:`._adapter`     requests (:func:`render_request`), whole responses and JSON-lines streams; the theory
                    of binding results to calls without call ids
:mod:`._history`     request bodies read back (:func:`parse_history`): the importer and the emulator's decoder
:mod:`._shapes`      the shape check (:func:`~._shapes.normalize`): wrong JSON types as findings
:mod:`._rules`       the lint rules, with their fixes and examples
:mod:`._encode`      scripted turns written as the server writes them (the emulator)
:mod:`._emulate`     the emulator's route, error bodies and request checks
:mod:`._model`       :class:`OllamaModel` over the official ``ollama`` client; ``anb.model("ollama:qwen3")``
=================== =====================================================================================

``anb.model("ollama:qwen3")`` talks to the server at ``OLLAMA_HOST`` (default ``http://127.0.0.1:11434``);
``base_url=`` points it elsewhere, e.g. at the local emulator (``emu.url("ollama")``) when no model is
installed.

Example:
    >>> import agentnb as anb
    >>> with anb.emulator.Emulator([{"text": "Hi from a local model."}]) as emu:
    ...     m = anb.model("ollama:qwen3", base_url=emu.url("ollama"))
    ...     anb.Loop(model=m).start("Hello").run().output
    'Hi from a local model.'
"""

from __future__ import annotations

from .._wireapi import WireAPI
from ._adapter import PROVIDER, iter_json_lines, parse_response, parse_stream, render_request, render_tool
from ._emulate import ENDPOINT
from ._history import parse_history
from ._model import OllamaModel, client
from ._rules import RULES, OllamaView
from ._shapes import normalize

__all__ = ["API", "PROVIDER", "OllamaModel", "iter_json_lines", "parse_history", "parse_response",
           "parse_stream", "render_request", "render_tool"]

API = WireAPI(
    name=PROVIDER,
    title="Ollama /api/chat",
    render_request=render_request,
    parse_response=parse_response,
    parse_stream=parse_stream,
    parse_history=parse_history,
    list_key="messages",
    system_key=None,
    normalize=normalize,
    rules=RULES,
    view=OllamaView,
    emulator=ENDPOINT,
    model_class=OllamaModel,
    client=client,
    prefixes=("ollama",),
    api_key_env=("OLLAMA_API_KEY",),  # the hosted service's key; a local server needs none (needs_key=False)
    sdk_extra="ollama",
    where=("messages[0], role system", "assistant tool_calls[].function (no id; arguments an object)",
           "role tool message (tool_name), in the calls' order"),
    native_output=True,
    otel_name="ollama",
    needs_key=False,
)
"""Ollama's entry in :data:`agentnb.providers.WIRE_APIS`."""
