"""Tools: typed Python functions the model may call, an explicit registry, and the dispatcher.

``@tool`` reads a function's signature and Google-style docstring and builds a pydantic model of its
parameters; the JSON schema offered to the model comes from that model, and the same model validates the
arguments the model sends. The model's text never selects an arbitrary callable: a call is looked up only in
the loop's :class:`ToolRegistry`, and every way a call can go wrong becomes a structured error result the
model can read and correct (see :meth:`ToolRegistry.check`):

- an unknown name -> an error listing the tools that exist;
- arguments that are not a JSON object -> an error quoting the parse error (never repaired);
- arguments that fail the schema -> an error naming each bad field;
- a tool that raises -> an error with the exception type and message;
- a tool past its timeout -> a ``timeout`` result.

Tools need not be Python functions: a :class:`ToolSource` (an MCP server, see :mod:`agentnb.mcp`) hands the
registry several :class:`Tool` objects at once, and from then on they are ordinary tools.

The package, by responsibility: :mod:`~agentnb.tools._definition` (:class:`Tool`, :class:`ToolContext`),
:mod:`~agentnb.tools._schema` (``@tool``: from a signature and docstring to the arguments model and schema),
:mod:`~agentnb.tools._results` (:class:`Outcome` and the texts a model reads) and
:mod:`~agentnb.tools._registry` (:class:`ToolRegistry`, :class:`ToolSource`). Import from ``agentnb.tools``.
"""

from __future__ import annotations

from ._definition import ApprovalPolicy, Risk, Tool, ToolContext
from ._registry import ToolRegistry, ToolSource, as_registry
from ._results import Outcome, describe_errors, jsonable, render_value
from ._schema import parse_docstring, tool

__all__ = [
    "ApprovalPolicy",
    "Outcome",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolSource",
    "as_registry",
    "describe_errors",
    "jsonable",
    "parse_docstring",
    "render_value",
    "tool",
]
