"""The debugger's Plots tab: the run's timeline, tokens per turn, tool latency and status per tool, as images."""

from __future__ import annotations

from .._transcript import Transcript
from ..events import BaseEvent
from . import cards


def plots_html(events: list[BaseEvent]) -> str:
    """The run's timeline, tokens per turn, tool latency and status per tool, as inline PNG images."""
    try:
        from matplotlib.figure import Figure  # a figure outside pyplot: nothing shows up in the cell
    except ImportError:
        return '<span class="agentnb-muted">plots need matplotlib: pip install "agentnb[analysis]"</span>'
    import base64

    from .. import _plots as plots

    frames = Transcript(list(events)).frames
    images = []
    for name, size in (("timeline", (7.0, 2.8)), ("tokens", (7.0, 2.4)), ("latency", (7.0, 2.4)),
                       ("status", (7.0, 2.4))):
        fig = Figure(figsize=size, layout="constrained")
        try:
            getattr(plots, name)(frames, ax=fig.subplots())
            data = base64.b64encode(plots.to_png(fig, dpi=80)).decode()
            images.append(f'<img alt="{name}" src="data:image/png;base64,{data}" style="max-width:100%">')
        except Exception as exc:  # a plot that has nothing to show must not break the debugger
            images.append(f'<div class="agentnb-muted">{name}: {cards.esc(exc)}</div>')
    return "".join(images)

