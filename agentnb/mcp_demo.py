"""A small Model Context Protocol server for the course: a shop's orders and refunds.

Run it over stdio (the default, what :meth:`agentnb.MCPServer.stdio` starts) or over streamable HTTP::

    python -m agentnb.mcp_demo                          # stdio
    python -m agentnb.mcp_demo --http --port 8765        # http://127.0.0.1:8765/mcp

Its tools carry MCP annotations, so they show how agentnb maps them onto its own model:

- ``lookup_order`` and ``list_orders`` are read-only (``readOnlyHint``): they run without asking;
- ``refund`` is destructive (``destructiveHint``): every call waits for a person's approval;
- ``set_note`` is an idempotent write (``idempotentHint``): it asks for approval, and a call whose outcome
  is unknown after a crash may be re-run.

A failure the model can correct (an unknown order, a refund larger than the order) is an MCP ``isError``
result, which agentnb turns into an error result the model reads. The state lives in the process: a
restarted server starts from the same three orders.

Example:
    >>> import agentnb as anb, sys
    >>> with anb.MCPServer.stdio(sys.executable, ["-m", "agentnb.mcp_demo"]) as shop:  # doctest: +SKIP
    ...     print(shop.tool_names)
    ['lookup_order', 'list_orders', 'refund', 'set_note']
"""

from __future__ import annotations

import argparse
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

__all__ = [
    "build",
    "main",
]

_ORDERS: dict[str, dict[str, Any]] = {
    "42": {"order_id": "42", "item": "Blue kettle", "amount_cents": 1999, "status": "delivered", "note": ""},
    "43": {"order_id": "43", "item": "Tea set", "amount_cents": 4500, "status": "shipped", "note": ""},
    "44": {"order_id": "44", "item": "Cup", "amount_cents": 799, "status": "delivered", "note": ""},
}
_REFUNDS: dict[str, dict[str, Any]] = {}


def _order(order_id: str) -> dict[str, Any]:
    if order_id not in _ORDERS:
        raise ToolError(f"No order {order_id!r}. Known orders: {', '.join(_ORDERS)}.")
    return _ORDERS[order_id]


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up one order: its item, amount, status and any refund.

    Args:
        order_id: The order number, e.g. "42".
    """
    return {**_order(order_id), "refund": _REFUNDS.get(order_id)}


def list_orders(status: Literal["delivered", "shipped", "refunded"] | None = None) -> list[dict[str, Any]]:
    """List the shop's orders, optionally only those with one status.

    Args:
        status: Only orders with this status.
    """
    return [dict(o) for o in _ORDERS.values() if status is None or o["status"] == status]


def refund(order_id: str, amount_cents: int, reason: str = "") -> dict[str, Any]:
    """Refund (part of) an order. Moves money: a person approves every call.

    Args:
        order_id: The order number.
        amount_cents: The amount to refund, in cents (at most the order's amount).
        reason: Why the customer is refunded.
    """
    order = _order(order_id)
    if order_id in _REFUNDS:
        raise ToolError(f"Order {order_id} was already refunded ({_REFUNDS[order_id]['refund_id']}).")
    if not 0 < amount_cents <= order["amount_cents"]:
        raise ToolError(f"amount_cents must be between 1 and {order['amount_cents']} for order {order_id}.")
    done = {"refund_id": f"rf_{order_id}_{amount_cents}", "order_id": order_id, "amount_cents": amount_cents,
            "reason": reason}
    _REFUNDS[order_id] = done
    order["status"] = "refunded"
    return done


def set_note(order_id: str, note: str) -> dict[str, Any]:
    """Set the internal note of an order (setting the same note twice changes nothing).

    Args:
        order_id: The order number.
        note: The note's new text.
    """
    _order(order_id)["note"] = note
    return {"order_id": order_id, "note": note}


def build() -> MCPServer:
    """The shop server with its four tools and their annotations (built on demand: the SDK configures logging)."""
    server = MCPServer(
        "shop",
        instructions="Orders and refunds of a small web shop. Look an order up before refunding it.",
        log_level="WARNING",  # stderr is the server's log; keep it to what matters
    )
    server.add_tool(lookup_order, annotations=ToolAnnotations(title="Look up an order", read_only_hint=True))
    server.add_tool(list_orders, annotations=ToolAnnotations(title="List orders", read_only_hint=True))
    server.add_tool(refund, annotations=ToolAnnotations(title="Refund an order", read_only_hint=False,
                                                        destructive_hint=True))
    server.add_tool(set_note, annotations=ToolAnnotations(title="Set an order's note", read_only_hint=False,
                                                          destructive_hint=False, idempotent_hint=True))
    return server


def main(argv: list[str] | None = None) -> None:
    """Serve the shop over stdio, or over streamable HTTP with ``--http``."""
    parser = argparse.ArgumentParser(prog="python -m agentnb.mcp_demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind with --http (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to bind with --http (default 8765)")
    args = parser.parse_args(argv)
    server = build()
    if args.http:
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
