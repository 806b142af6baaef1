"""The state machine drawn as SVG straight from :data:`agentnb._states.TRANSITIONS`.

Every edge of the table is drawn (hover an edge for the events that take it); edges out of the current
state are emphasized and the current state is filled, so the picture always matches the engine.
"""

from __future__ import annotations

import html
from collections import defaultdict

from .._states import TRANSITIONS, LoopState

S = LoopState
W, H, GAP = 128, 30, 142
_ROW1 = [S.NEW, S.READY, S.MODEL_REQUESTED, S.RESPONDED, S.VALIDATING, S.EXECUTING, S.RESULTS_READY]
_ROW2 = [S.COMPLETED, S.REFUSED, S.INCOMPLETE, S.FAILED, S.BUDGET_EXHAUSTED, S.NO_PROGRESS, S.CANCELLED]
POS: dict[LoopState, tuple[float, float]] = {s: (6 + i * GAP, 86) for i, s in enumerate(_ROW1)}
POS.update({s: (6 + i * GAP, 196) for i, s in enumerate(_ROW2)})
POS[S.WAITING_APPROVAL] = (6 + 4.5 * GAP, 8)


def _anchor(a: LoopState, b: LoopState) -> tuple[float, float, float, float]:
    ax, ay = POS[a]
    bx, by = POS[b]
    if ay == by:  # same row: side to side
        if bx > ax:
            return ax + W, ay + H / 2, bx, by + H / 2
        return ax, ay + H / 2, bx + W, by + H / 2
    if by > ay:  # downwards
        return ax + W / 2, ay + H, bx + W / 2, by
    return ax + W / 2, ay, bx + W / 2, by + H


def state_diagram(current: LoopState | None = None) -> str:
    """SVG of the whole state machine with ``current`` highlighted."""
    grouped: dict[tuple[LoopState, LoopState], list[str]] = defaultdict(list)
    for src, row in TRANSITIONS.items():
        for ev, targets in row.items():
            for dst in targets:
                if dst is not src:
                    grouped[(src, dst)].append(ev)
    edges = []
    for (src, dst), evs in sorted(grouped.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value)):
        hot = src is current
        stroke = "var(--jp-brand-color1)" if hot else "var(--jp-border-color1)"
        width = 2.2 if hot else 0.9
        opacity = 1 if hot else (0.35 if dst.is_terminal else 0.8)
        names = html.escape(", ".join(sorted(evs)))
        title = f"<title>{src.value} → {dst.value}: {names}</title>"
        if src is S.RESULTS_READY and dst is S.MODEL_REQUESTED:
            x1, y1 = POS[src][0] + W / 2, POS[src][1] + H
            x2, y2 = POS[dst][0] + W / 2, POS[dst][1] + H
            d = f"M{x1},{y1} C{x1},{y1 + 55} {x2},{y2 + 55} {x2},{y2}"
        else:
            x1, y1, x2, y2 = _anchor(src, dst)
            d = f"M{x1},{y1} L{x2},{y2}"
        edges.append(
            f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width}" opacity="{opacity}" '
            f'marker-end="url(#agentnb-arrow{"-hot" if hot else ""})">{title}</path>'
        )
    nodes = []
    for state, (x, y) in POS.items():
        is_cur = state is current
        fill = "var(--jp-brand-color1)" if is_cur else "var(--jp-layout-color2)"
        color = "var(--jp-ui-inverse-font-color0, white)" if is_cur else "var(--jp-ui-font-color1)"
        border = "var(--jp-brand-color1)" if is_cur else (
            "var(--jp-success-color1)" if state is S.COMPLETED else "var(--jp-border-color1)")
        dash = ' stroke-dasharray="4 2"' if state.is_terminal and not is_cur else ""
        cls = ' class="agentnb-current-state"' if is_cur else ""
        nodes.append(
            f'<g{cls} data-state="{state.value}"><rect x="{x}" y="{y}" width="{W}" height="{H}" rx="6" fill="{fill}" '
            f'stroke="{border}" stroke-width="{2 if is_cur else 1}"{dash}/>'
            f'<text x="{x + W / 2}" y="{y + H / 2 + 4}" text-anchor="middle" font-size="10.5" '
            f'font-weight="{700 if is_cur else 500}" fill="{color}" '
            f'font-family="var(--jp-ui-font-family)">{state.value}</text></g>'
        )
    defs = (
        "<defs>"
        '<marker id="agentnb-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="var(--jp-border-color1)"/></marker>'
        '<marker id="agentnb-arrow-hot" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="var(--jp-brand-color1)"/></marker>'
        "</defs>"
    )
    width = 6 + 6 * GAP + W + 6
    return (
        f'<svg class="agentnb-diagram-svg" viewBox="0 0 {width} 232" width="100%" preserveAspectRatio="xMidYMid meet" '
        f'role="img" aria-label="loop state machine">{defs}{"".join(edges)}{"".join(nodes)}</svg>'
    )
