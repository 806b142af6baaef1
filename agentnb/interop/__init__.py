"""Histories kept by agent frameworks, imported as transcripts.

``anb.import_history(obj, format=...)`` reads, besides the four providers' message lists:

- ``"pydantic_ai"``: a PydanticAI history (``result.all_messages()``, ``all_messages_json()`` or the dicts
  of ``ModelMessagesTypeAdapter``) -- :func:`agentnb.interop.pydantic_ai.from_pydantic_ai`;
- ``"openai_agents"``: the OpenAI Agents SDK's ``RunResult.to_input_list()`` --
  :func:`agentnb.interop.openai_agents.from_openai_agents` (its traces: :class:`AgentsTraceCollector`);
- ``"langchain"``: a LangChain message list (``messages_to_dict`` or the messages) --
  :func:`agentnb.interop.langchain.from_langchain`.

Like the provider importers, each gives an :class:`~agentnb.importers.Imported`: a transcript of one
``RunStarted`` holding the conversation (nothing is invented: no turn timing or usage), and the same
structural findings (each call answered once, after it, ids unique) plus what only the framework's format can
get wrong (a part agentnb cannot represent). The frameworks themselves are needed only to pass their own
objects; dicts and JSON text import without them.
"""

from __future__ import annotations

from typing import Any

from ..importers import Imported
from .langchain import from_langchain
from .openai_agents import AgentsTraceCollector, from_openai_agents
from .pydantic_ai import from_pydantic_ai

FRAMEWORKS: dict[str, Any] = {
    "pydantic_ai": from_pydantic_ai,
    "openai_agents": from_openai_agents,
    "langchain": from_langchain,
}
"""The framework formats ``import_history`` accepts, and their importers."""


def import_framework_history(history: Any, format: str, **options: Any) -> Imported:
    """Import a framework history (see the module docstring); ``options`` go to the importer."""
    result: Imported = FRAMEWORKS[format](history, **options)
    return result


__all__ = ["FRAMEWORKS", "AgentsTraceCollector", "from_langchain", "from_openai_agents", "from_pydantic_ai",
           "import_framework_history"]
