"""The tree in the static view: run → turns → model calls and tool calls, as nested lists with their times.

The saved ``text/html`` (:func:`.viewdata.fallback_html`: GitHub, nbviewer, nbconvert, a notebook reopened
without its widget's model) lists the tree the live debugger opens on (:mod:`.tree`), above the flat events:
one item per node with its duration, tokens, cost, status and a tool call's effect mark, nested as the page
nests them, readable without a stylesheet (GitHub strips it). A long run lists its first and last nodes and
says how many it left out.
"""

from __future__ import annotations

from .render import esc
from .timeline import Timeline
from .tree import Node, TreeEncoder, tree_of

STATIC_TREE_EVENTS = 5_000
"""Events the static view builds a tree of when the debugger has none built (a longer run: its first ones)."""


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _line(node: Node) -> str:
    bits = [_ms(max(0.0, node.end_ms - node.start_ms))]
    if node.tokens:
        bits.append(f"{node.tokens:,} tok")
    if node.cost:
        bits.append(f"${node.cost:.4f}")
    if node.fragments:
        bits.append(f"{node.fragments:,} fragments")
    status = f" · <i>{esc(node.status)}</i>" if node.status else ""
    effect = f" · {esc(node.effect)}" if node.effect else ""
    label = f"<b>{esc(node.label)}</b>" if node.kind in ("run", "turn") else esc(node.label)
    return f'<li class="agentnb-tree-{esc(node.kind)}">{label} · {" · ".join(bits)}{status}{effect}'


def _limit(rows: int) -> int:
    """Tree nodes listed beside ``rows`` events: a half as many (a node's line is longer than an event's row)."""
    return max(2, rows // 2)


def tree_html(tree: TreeEncoder, rows: int = 400) -> str:
    """The tree as nested ``<ul>`` lists in a ``<details>``: at most ``rows // 2`` nodes (the first and last ones).

    Example:
        >>> import agentnb as anb
        >>> from agentnb._debugger.tree import tree_of
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> html = tree_html(tree_of(loop.start("Paris?").run().events))
        >>> html.count('class="agentnb-tree-turn"'), html.count('class="agentnb-tree-call"'), "get_weather" in html
        (2, 1, True)
    """
    nodes = tree.nodes
    if not nodes:
        return ""
    n = len(nodes)
    limit = _limit(rows)
    half = limit // 2
    shown = list(range(n)) if n <= limit else [*range(half), -1, *range(n - half, n)]
    out: list[str] = []
    depth = -1
    for i in shown:
        if i < 0:
            out.append(f'<li class="agentnb-muted">… {n - 2 * half:,} more nodes …</li>')
            continue
        node = nodes[i]
        if node.depth > depth:
            out.append("<ul>" * (node.depth - depth))
        else:
            out.append("</li>" + "</ul></li>" * (depth - node.depth))
        depth = node.depth
        out.append(_line(node))
    out.append("</li>" + "</ul></li>" * depth + "</ul>")
    return (f'<details open class="agentnb-fallback-tree"><summary><b>tree</b> (turns, model calls, tool calls; '
            f'{n:,} nodes)</summary>{"".join(out)}</details>')


def static_tree(tl: Timeline, rows: int, built: TreeEncoder | None = None) -> str:
    """The static view's tree of ``tl``: ``built`` when it holds every event, else one built of the first events.

    Building the tree costs about 15 µs an event, and the static view is drawn when the debugger is displayed:
    a run longer than :data:`STATIC_TREE_EVENTS` whose tree the debugger has not built yet (its page has not
    said hello) gets the tree of its first events, and says so.
    """
    n = len(tl)
    if built is not None and len(built.groups) >= n:
        return tree_html(built, rows)
    upto = min(n, STATIC_TREE_EVENTS)
    drawn = tree_html(tl.kept("static tree", upto, lambda: tree_of(tl.events[:upto])), rows)
    if n <= STATIC_TREE_EVENTS:
        return drawn
    note = (f'<div class="agentnb-muted">the tree of the first {STATIC_TREE_EVENTS:,} of {n:,} events (the live '
            "debugger draws all of it); every event is listed below</div>")
    return drawn.replace("</summary>", f"</summary>{note}", 1)


__all__ = ["STATIC_TREE_EVENTS", "static_tree", "tree_html"]
