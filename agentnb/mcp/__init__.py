"""Tools from Model Context Protocol servers, run through the same path as local tools.

An :class:`MCPServer` names a server: a command started as a subprocess and spoken to over stdio
(:meth:`MCPServer.stdio`), or a streamable-HTTP endpoint (:meth:`MCPServer.http`). The first time its tools are
asked for (``Loop(tools=[server])``, ``server.tools()``) it connects with the official ``mcp`` SDK, lists the
server's tools and turns each into an :class:`MCPTool`, which is an ordinary :class:`agentnb.Tool`:

- the schema the model sees is the server's ``inputSchema``, verbatim, and the arguments the model sends are
  validated against that same schema (JSON Schema, with ``jsonschema``): a bad call is a ``schema`` rejection
  the model reads, exactly as for a local tool, and never reaches the server;
- the annotations become agentnb's risk model: ``readOnlyHint`` -> ``read`` (runs without asking; the MCP
  spec makes ``destructiveHint`` meaningless then), ``destructiveHint`` -> ``dangerous``, anything else ->
  ``write`` (both wait for a person, by risk), and ``idempotentHint`` -> ``idempotent``. Annotations are the
  server's claims about itself: a ``risk=`` the user declares per tool is a floor they can raise and never
  lower, and ``trust_annotations=False`` ignores them (every tool of an untrusted server is a write unless
  ``risk=`` says otherwise);
- approval, idempotency keys and the effect ledger, timeouts, and result binding are the registry's and the
  run's, unchanged. A side-effecting call also hands its idempotency key to the server in the request's
  ``_meta`` (``agentnb/idempotency_key``), so a server can deduplicate a retried write;
- no call waits for ever: each has the server's ``call_timeout`` (:data:`DEFAULT_CALL_TIMEOUT`, 60 s) as its
  ceiling, a cancelled run lets go of its calls in flight, and a session whose server breaks the protocol ends
  with an error result for the calls waiting on it.

The tools are listed when a session opens (the first connection, and every restart). A loop keeps the tools it
was built with, but their risk follows the latest listing (:meth:`MCPTool.current`); a tool the server no longer
has after a restart answers with the server's own error.

The package, by responsibility: :mod:`~agentnb.mcp._server` (:class:`MCPServer`: connecting, listing, calling),
:mod:`~agentnb.mcp._connection` (one session on the background loop), :mod:`~agentnb.mcp._tool` (:class:`MCPTool`
and the annotations read as risk), :mod:`~agentnb.mcp._schema` (arguments checked against the server's schema)
and :mod:`~agentnb.mcp._results` (what a call comes back as). Import from ``agentnb.mcp``.
"""

from __future__ import annotations

from ._schema import SchemaArguments
from ._schema import schema_arguments as schema_arguments
from ._server import DEFAULT_CALL_TIMEOUT, MCPServer
from ._tool import IDEMPOTENCY_META_KEY, MCPTool

__all__ = ["DEFAULT_CALL_TIMEOUT", "IDEMPOTENCY_META_KEY", "MCPServer", "MCPTool", "SchemaArguments"]
