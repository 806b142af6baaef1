"""Foreign histories into transcripts: OpenAI Chat messages, Responses items, Anthropic messages, Gemini contents.

Theory of operation. Each ``from_<format>`` function reads a request-side history (the list you send, or
log) into the canonical conversation (:mod:`agentnb._messages`) with the ``parse_history`` of that wire API
(:data:`agentnb.providers.WIRE_APIS`: the same function the emulator decodes requests with), plus a list of
:class:`~agentnb._findings.Finding` from the same lint rules as :func:`agentnb.lint` (one vocabulary of codes).
The conversation becomes a transcript holding one event: a ``RunStarted`` whose messages
are the imported history. That is the honest minimum: no model turn, latency, token count or tool duration is
invented. The frames still see everything the history says: ``frames.messages()`` has every part and
``frames.calls()`` has every call with ``origin == "history"``, its tool, arguments and result status (from
Anthropic's ``is_error`` or Gemini's ``error`` key; Chat and Responses results are ``ok``); timing and token
columns stay null.

Findings name the item by its index in the input list (``index``) and a position inside it in the
provider's terms (``messages[3].content[1]``). A history is a log, not a request: a call in its last message
that has no result yet is a warning (it may be pending), where :func:`agentnb.lint` calls it an error.
Reading adds what only a reader sees (a part the canonical conversation cannot hold: ``unsupported_part``).
:func:`lint` checks the canonical structure every provider needs -- each call answered exactly once, after
it, ids unique -- on canonical messages (:mod:`agentnb._pairing`); the framework importers use it.

Framework histories. Besides the wire APIs' lists, :func:`import_history` (``anb.import_history(obj, format=...)``)
reads the histories agent frameworks keep, each from a module of this package:

- ``"pydantic_ai"``: a PydanticAI history (``result.all_messages()``, ``all_messages_json()`` or the dicts
  of ``ModelMessagesTypeAdapter``) -- :func:`agentnb.importers._pydantic_ai.from_pydantic_ai`;
- ``"openai_agents"``: the OpenAI Agents SDK's ``RunResult.to_input_list()`` --
  :func:`agentnb.importers._openai_agents.from_openai_agents` (its traces: :class:`AgentsTraceCollector`);
- ``"langchain"``: a LangChain message list (``messages_to_dict`` or the messages) --
  :func:`agentnb.importers._langchain.from_langchain`.

Like the wire importers, each gives an :class:`Imported`: a transcript of one ``RunStarted`` holding the
conversation (nothing is invented), and the same structural findings plus what only the framework's format
can get wrong (a part agentnb cannot represent). The frameworks themselves are needed only to pass their own
objects; dicts and JSON text import without them.

The package, by responsibility: :mod:`.wire` (``from_<api>``, :func:`read`, :class:`Imported`), the framework
modules (:mod:`.pydantic_ai`, :mod:`.openai_agents`, :mod:`.langchain`, sharing :mod:`._base`), and here the
one entry point that knows them all, :func:`import_history`: the modules depend on :mod:`.wire`, and only
this door depends on them.

Example:
    >>> from agentnb.importers import from_openai_chat
    >>> imported = from_openai_chat([
    ...     {"role": "user", "content": "Weather in Paris?"},
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
    ...         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
    ...     {"role": "tool", "tool_call_id": "c9", "content": "?"},
    ... ], run_id="imported")
    >>> [(f.code, f.position) for f in imported.findings]
    [('orphan_result', 'messages[3]')]
    >>> imported.transcript.frames.calls()[["tool", "status", "origin"]]
              tool status   origin
    0  get_weather     ok  history
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._findings import Finding
from ..providers._registry import WIRE_APIS
from ._langchain import from_langchain
from ._openai_agents import AgentsTraceCollector, from_openai_agents
from ._pydantic_ai import from_pydantic_ai
from ._wire import Imported, from_anthropic, from_gemini, from_openai_chat, from_openai_responses, lint, read

Format = str
"""A format :func:`import_history` reads: the name of a wire API of :data:`agentnb.providers.WIRE_APIS`
(``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini``, ...) or of a framework history
(``pydantic_ai``, ``openai_agents``, ``langchain``)."""

FRAMEWORKS: dict[str, Callable[..., Imported]] = {
    "pydantic_ai": from_pydantic_ai,
    "openai_agents": from_openai_agents,
    "langchain": from_langchain,
}
"""The framework formats :func:`import_history` accepts, and their importers."""

_SYSTEM_OPTIONS = ("system", "instructions", "system_instruction")
"""The names a system prompt kept apart from the history goes by (one per format that has one)."""


def import_history(history: Sequence[Any], format: Format, **options: Any) -> Imported:
    """Import a history in ``format`` (a wire API of :data:`agentnb.providers.WIRE_APIS`, or a framework's).

    Args:
        history: the message, item or content list.
        format: its wire format (``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini``, ...) or
            ``pydantic_ai``, ``openai_agents``, ``langchain``.
        **options: ``model``, ``run_id``, ``ts``, and the system prompt for the formats that keep it apart
            (``system``, ``instructions`` or ``system_instruction``: any of the three names).

    Example:
        >>> import_history([{"role": "user", "parts": [{"text": "Hi"}]}], "gemini").transcript.state
        <LoopState.READY: 'READY'>
    """
    if format in FRAMEWORKS:
        return FRAMEWORKS[format](history, **options)
    api = WIRE_APIS.get(format)
    if api is None:
        raise ValueError(f"unknown format {format!r}; formats: {', '.join(WIRE_APIS)}, {', '.join(FRAMEWORKS)}")
    system = next((options.pop(k) for k in _SYSTEM_OPTIONS if k in options), None)
    return read(api, history, system, **options)



__all__ = [
    "FRAMEWORKS", "AgentsTraceCollector", "Finding", "Format", "Imported", "from_anthropic", "from_gemini",
    "from_langchain", "from_openai_agents", "from_openai_chat", "from_openai_responses", "from_pydantic_ai",
    "import_history", "lint", "read",
]
