"""An MCP server whose tools are drawn at random, for notebook 10: ``python -m agentnb.workshop._mcp_shop SEED``.

Names do not tell what a tool does to the world; its MCP annotations do (and they are only the server's
claims). So every draw holds traps for a rule that reads names: a tool that sounds like a read but writes
(``get_coupon`` issues one), a read that sounds like a write (``quote_refund`` only computes), and a tool
with no annotations at all, which the MCP spec says to treat as possibly destructive, whatever its name. The
same seed draws the same server, so the check can compute what a right answer keeps.

Example:
    >>> kinds = dict((name, kind) for name, kind in draw(7))
    >>> sorted(set(kinds.values()))
    ['destructive', 'read', 'unannotated', 'write']
"""

from __future__ import annotations

import random
import sys
from typing import Any, Literal

Kind = Literal["read", "write", "destructive", "unannotated"]

READS = ("get_order", "list_invoices", "search_catalog", "show_stock", "read_ticket", "find_customer")
READS_THAT_SOUND_LIKE_WRITES = ("quote_refund", "preview_cancellation", "estimate_shipping_change")
WRITES = ("set_note", "update_address", "add_tag", "assign_ticket")
WRITES_THAT_SOUND_LIKE_READS = ("get_coupon", "lookup_and_mark_seen", "fetch_and_archive_mail")
DESTRUCTIVE = ("refund", "cancel_order", "delete_customer", "get_and_clear_cart")
UNANNOTATED = ("lookup_stock", "list_orders_v2", "check_price", "fetch_report")


def draw(seed: int) -> list[tuple[str, Kind]]:
    """The server's tools for ``seed``: ``(name, kind)`` in the order the server lists them."""
    rng = random.Random(seed)
    tools: list[tuple[str, Kind]] = [(n, "read") for n in rng.sample(READS, 2)]
    tools.append((rng.choice(READS_THAT_SOUND_LIKE_WRITES), "read"))
    tools.append((rng.choice(WRITES), "write"))
    tools.append((rng.choice(WRITES_THAT_SOUND_LIKE_READS), "write"))
    tools.append((rng.choice(DESTRUCTIVE), "destructive"))
    tools.append((rng.choice(UNANNOTATED), "unannotated"))
    rng.shuffle(tools)
    return tools


def sounds_like_read(name: str) -> bool:
    """What a rule reading names would think: the name starts like a read."""
    return name.startswith(("get", "list", "search", "show", "read", "find", "lookup", "fetch", "check"))


def build(seed: int) -> Any:
    """The server for ``seed``, with one ``item_id`` argument per tool and annotations by kind."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("shop", instructions="A shop's back office (tools drawn at random).", log_level="WARNING")
    for name, kind in draw(seed):
        annotations = {
            "read": ToolAnnotations(read_only_hint=True),
            "write": ToolAnnotations(read_only_hint=False, destructive_hint=False),
            "destructive": ToolAnnotations(read_only_hint=False, destructive_hint=True),
            "unannotated": None,
        }[kind]

        def fn(item_id: str, _name: str = name) -> dict[str, Any]:
            return {"tool": _name, "item_id": item_id, "done": True}

        description = f"{name.replace('_', ' ').capitalize()} for one item of the shop."
        server.add_tool(_one_argument(fn, name), name=name, description=description, annotations=annotations)
    return server


def _one_argument(fn: Any, name: str) -> Any:
    def tool(item_id: str) -> dict[str, Any]:
        out: dict[str, Any] = fn(item_id)
        return out

    tool.__name__ = name
    return tool


def main(argv: list[str] | None = None) -> None:
    """Serve the tools of one seed over stdio."""
    args = sys.argv[1:] if argv is None else argv
    build(int(args[0]) if args else 0).run("stdio")


if __name__ == "__main__":
    main()
