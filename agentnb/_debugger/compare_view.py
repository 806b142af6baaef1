"""Two runs side by side in the debugger's style: the aligned steps, the first divergence lit, the conversations' diff.

Theory of operation. :func:`agentnb.compare` aligns two runs (:mod:`agentnb._compare`); this module draws the
result, and reads it through the small ``_Aligned`` protocol so that the comparison need not be imported
here (the comparison imports this view when it is shown, never the other way round). The view is static HTML
that carries its stylesheet: a notebook saves it as the cell's output, so a reopened notebook, GitHub,
nbviewer and nbconvert show it as it was; :func:`write_comparison` makes it a page of its own. Both runs are in
it whole -- each run's events, the conversation it ended with and its end, under the side-by-side steps -- so
the one file is enough to see why they parted. Every text goes through :func:`.render.esc` (invisible and
direction-changing characters written out).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..events import BaseEvent
from . import assets
from .render import conversation_lines, esc, line_diff
from .timeline import Timeline
from .viewdata import fallback_html


class _Step(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def seq(self) -> int: ...


class _Parting(Protocol):
    @property
    def step(self) -> int: ...
    @property
    def why(self) -> str: ...


class _Aligned(Protocol):
    """What the view reads of a comparison (:class:`agentnb.Comparison` has it)."""

    @property
    def a_run(self) -> str: ...
    @property
    def b_run(self) -> str: ...
    @property
    def a_steps(self) -> Sequence[_Step]: ...
    @property
    def b_steps(self) -> Sequence[_Step]: ...
    @property
    def parting(self) -> _Parting | None: ...
    @property
    def a_events(self) -> list[BaseEvent]: ...
    @property
    def b_events(self) -> list[BaseEvent]: ...


def _cell(step: _Step | None, hit: bool) -> str:
    if step is None:
        return '<td class="anb-cmp-none agentnb-muted">— (no such step)</td>'
    mark = " anb-cmp-hit" if hit else ""
    return (f'<td class="anb-cmp-cell{mark}"><span class="agentnb-muted">#{step.seq}</span> '
            f"{esc(step.label)}</td>")


def _end(events: list[BaseEvent]) -> str:
    tl = Timeline(events)
    state = tl.state.state
    tone = "done" if state.value == "COMPLETED" else "bad" if tl.state.reason else "live"
    return f'<span class="agentnb-badge agentnb-badge-{tone}">{esc(state.value)}</span>'


def comparison_html(c: _Aligned, *, style: bool = True) -> str:
    """The side-by-side view (``style=False``: without the stylesheet, for a page that has it)."""
    n = max(len(c.a_steps), len(c.b_steps))
    parted = c.parting.step if c.parting is not None else None
    rows = []
    for i in range(n):
        sa = c.a_steps[i] if i < len(c.a_steps) else None
        sb = c.b_steps[i] if i < len(c.b_steps) else None
        first = sa or sb
        assert first is not None
        if parted is None or i < parted:
            cls, note = "anb-cmp-same", ""
        elif i == parted:
            cls, note = "anb-cmp-parted", '<span class="agentnb-badge agentnb-badge-wait">first divergence</span> '
        else:
            cls, note = "anb-cmp-after", ""
        hit = i == parted
        rows.append(f'<tr class="anb-cmp-row {cls}" data-step="{i}"><td class="agentnb-seq">{i}</td>'
                    f"<td>{note}{esc(first.kind)}</td><td>{first.turn}</td>{_cell(sa, hit)}{_cell(sb, hit)}</tr>")
    if c.parting is None:
        verdict = '<span class="agentnb-badge agentnb-badge-done">the same trajectory</span>'
    else:
        verdict = (f'<span class="agentnb-badge agentnb-badge-wait">part at step {c.parting.step}</span> '
                   f'<span class="anb-cmp-why">{esc(c.parting.why)}</span>')
    head = (f'<div class="agentnb-header"><b>compare</b> · a <code>{esc(c.a_run)}</code> {_end(c.a_events)} · '
            f'b <code>{esc(c.b_run)}</code> {_end(c.b_events)}</div><div class="anb-cmp-verdict">{verdict}</div>')
    table = ('<table class="anb-cmp-table"><thead><tr><th>#</th><th>step</th><th>turn</th>'
             f'<th>a · {esc(c.a_run)}</th><th>b · {esc(c.b_run)}</th></tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>')
    la, lb = Timeline(c.a_events), Timeline(c.b_events)
    conv_a = conversation_lines(la.messages_at(len(la) - 1))
    conv_b = conversation_lines(lb.messages_at(len(lb) - 1))
    diff = line_diff(conv_a, conv_b, old=f"a {c.a_run}", new=f"b {c.b_run}")
    runs = "".join(
        f'<details class="anb-cmp-run"><summary><b>run {which}</b> <code>{esc(run_id)}</code> · '
        f"{len(events):,} events</summary>{fallback_html(Timeline(events), live=False, style=False, rows=200)}"
        "</details>"
        for which, run_id, events in (("a", c.a_run, c.a_events), ("b", c.b_run, c.b_events)))
    return (f'{assets.stylesheet() if style else ""}<div class="agentnb-root agentnb-compare anb-cmp">{head}'
            f'<div class="anb-cmp-scroll">{table}</div>'
            f'<details open class="anb-cmp-diff"><summary><b>the conversations</b> (how a ended against how b ended)'
            f"</summary>{diff}</details>{runs}</div>")


def write_comparison(c: _Aligned, path: str | Path, *, title: str | None = None) -> Path:
    """One self-contained HTML page of the comparison (both runs in it), no script, no network."""
    title = title or f"agentnb · {c.a_run} vs {c.b_run}"
    page = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"generator\" content=\"agentnb\"><title>{esc(title)}</title>{assets.stylesheet()}</head>\n"
            f"<body class=\"agentnb-standalone\">{comparison_html(c, style=False)}</body></html>\n")
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out
