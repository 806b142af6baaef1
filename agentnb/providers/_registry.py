"""The registry of wire APIs: :data:`WIRE_APIS`, the one list of the formats agentnb speaks.

Every part of agentnb that treats wire APIs one by one -- the linter, the importers, the emulator, the
debugger's wire view, ``anb.model("prefix:name")``, structured output, OpenTelemetry -- iterates this
mapping. Adding a wire API is one package under :mod:`agentnb.providers` that exports a
:class:`~agentnb.providers._wireapi.WireAPI` named ``API``, plus one line below (see
``docs/contributing.md``, "Adding a wire API"). The order is the order of presentation (the wire view's tabs).

Example:
    >>> from agentnb.providers._registry import WIRE_APIS
    >>> list(WIRE_APIS)
    ['openai_chat', 'openai_responses', 'anthropic', 'gemini', 'ollama']
"""

from __future__ import annotations

from types import MappingProxyType

from . import anthropic, gemini, ollama, openai_chat, openai_responses
from ._wireapi import WireAPI

__all__ = ["NATIVE_OUTPUT", "NATIVE_OUTPUT_STRICT_ONLY", "WIRE_APIS", "WireAPI", "wire_api"]

WIRE_APIS: MappingProxyType[str, WireAPI] = MappingProxyType({api.name: api for api in (
    openai_chat.API,
    openai_responses.API,
    anthropic.API,
    gemini.API,
    ollama.API,
)})
"""Every wire API by name (read-only)."""

NATIVE_OUTPUT = frozenset(api.name for api in WIRE_APIS.values() if api.native_output)
"""Wire APIs whose structured-output mode ``output_mode="auto"`` uses (the others get the output tool)."""

NATIVE_OUTPUT_STRICT_ONLY = frozenset(api.name for api in WIRE_APIS.values() if api.native_output_strict_only)
"""Of those, the APIs whose structured-output mode takes only a strict-form schema (else the output tool)."""


def wire_api(name: str) -> WireAPI:
    """The wire API called ``name``; a ValueError that lists them for an unknown one.

    Example:
        >>> wire_api("gemini").list_key
        'contents'
    """
    try:
        return WIRE_APIS[name]
    except KeyError:
        raise ValueError(f"provider={name!r}: use one of {', '.join(WIRE_APIS)}") from None
