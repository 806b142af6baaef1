r"""Plots of runs (matplotlib): a run's timeline, tokens per turn, tool latency, result status per tool.

Each plot reads the frames (:mod:`agentnb.frames`), never the events, so it draws the same thing for one
transcript, a collection loaded from JSONL, or one loaded from Parquet. Every function takes an optional
matplotlib ``ax`` and returns the axes it drew on; with no ``ax`` it makes a new figure through pyplot (so a
notebook shows it). :func:`to_png` renders a figure to PNG bytes (for the debugger, or a report).

matplotlib is imported inside the functions, so ``import agentnb`` does not need it; install it with
``pip install 'agentnb[analysis]'``.

Example:
    >>> import agentnb as anb, matplotlib
    >>> matplotlib.use("Agg")
    >>> run = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
    >>> t = run.start("Weather?").run().transcript
    >>> to_png(t.plot.status())[:8]
    b'\x89PNG\r\n\x1a\n'
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .frames import Frames

_STATUS_COLORS = {"ok": "#4c9a2a", "error": "#c0392b", "denied": "#8e44ad", "skipped": "#95a5a6",
                  "timeout": "#e67e22", "unanswered": "#bdc3c7"}


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("agentnb plots need matplotlib: pip install 'agentnb[analysis]'") from exc
    return plt


def _axes(ax: Axes | None, size: tuple[float, float] = (8.0, 3.5)) -> Axes:
    if ax is not None:
        return ax
    _, new = _pyplot().subplots(figsize=size)
    result: Axes = new
    return result


def to_png(target: Axes | Figure, dpi: int = 100) -> bytes:
    """The figure of ``target`` (an axes or a figure) as PNG bytes."""
    fig = target.get_figure() if hasattr(target, "get_figure") and not hasattr(target, "savefig") else target
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)  # type: ignore[union-attr]
    return buf.getvalue()


def _one_run(frames: Frames, run_id: str | None) -> tuple[str, Any, Any, Any]:
    events = frames.events()
    ids = [str(r) for r in events["run_id"].cat.categories]
    if run_id is None:
        if not ids:
            raise ValueError("there is no run to draw")
        run_id = ids[0]
    elif run_id not in ids:
        raise KeyError(f"no run {run_id!r}; runs: {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}")
    turns, calls = frames.turns(), frames.calls()
    return (run_id, events[events["run_id"] == run_id], turns[turns["run_id"] == run_id],
            calls[calls["run_id"] == run_id])


def timeline(frames: Frames, run_id: str | None = None, *, ax: Axes | None = None) -> Axes:
    """One run over time: model calls on the top lane, tool executions below, approval waits hatched.

    A turn's calls are stacked, one lane per position in the turn, so parallel calls sit on top of each other.

    Args:
        frames: the frames of a transcript or a collection.
        run_id: the run to draw (default: the first).
        ax: where to draw.
    """
    run_id, events, turns, calls = _one_run(frames, run_id)
    ax = _axes(ax, (9.0, 3.0))
    t0 = events["ts"].min()
    end = events["ts"].max()

    def sec(ts: Any) -> float:
        return float((ts - t0).total_seconds())

    model_calls = turns[turns["ts_requested"].notna()]
    for _, row in model_calls.iterrows():
        stop = row["ts_completed"] if not _isna(row["ts_completed"]) else end
        ax.barh(0, max(sec(stop) - sec(row["ts_requested"]), 1e-9), left=sec(row["ts_requested"]), height=0.6,
                color="#2e86c1")
    live = calls[calls["origin"] == "model"]
    lanes = int(live["index"].max()) + 1 if len(live) else 0
    for _, row in live.iterrows():
        lane = 1 + int(row["index"])
        if not _isna(row["decided_at"]):
            ax.barh(lane, max(sec(row["decided_at"]) - sec(row["ts_called"]), 1e-9), left=sec(row["ts_called"]),
                    height=0.6, color="none", edgecolor="#8e44ad", hatch="//")
        if not _isna(row["ts_started"]):
            stop = row["ts_finished"] if not _isna(row["ts_finished"]) else end
            ax.barh(lane, max(sec(stop) - sec(row["ts_started"]), 1e-9), left=sec(row["ts_started"]), height=0.6,
                    color=_STATUS_COLORS.get(str(row["status"]), "#7f8c8d"))
    ax.set_yticks(range(lanes + 1), ["model", *[f"call {i + 1}" for i in range(lanes)]])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the run started")
    ax.set_title(f"timeline of {run_id}")
    return ax


def _isna(value: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def tokens(frames: Frames, *, ax: Axes | None = None) -> Axes:
    """Input and output tokens per turn number (summed over the runs), as stacked bars."""
    turns = frames.turns()
    ax = _axes(ax)
    by_turn = turns.groupby("turn")[["input_tokens", "output_tokens"]].sum()
    x = [int(t) for t in by_turn.index]
    ax.bar(x, by_turn["input_tokens"].astype(float), label="input", color="#2e86c1")
    ax.bar(x, by_turn["output_tokens"].astype(float), bottom=by_turn["input_tokens"].astype(float),
           label="output", color="#f5b041")
    runs = turns["run_id"].nunique()
    ax.set_xlabel("turn")
    ax.set_ylabel("tokens")
    ax.set_title(f"tokens per turn ({runs} run{'s' if runs != 1 else ''})")
    ax.legend()
    return ax


def latency(frames: Frames, *, ax: Axes | None = None) -> Axes:
    """How long each tool ran: one box (with its points) per tool, in milliseconds."""
    calls = frames.calls()
    done = calls[calls["duration_s"].notna()]
    ax = _axes(ax)
    tools = sorted(str(t) for t in done["tool"].dropna().unique())
    data = [done.loc[done["tool"] == t, "duration_s"].astype(float).mul(1000).tolist() for t in tools]
    if data:
        ax.boxplot(data, tick_labels=tools, orientation="horizontal")
    ax.set_xlabel("milliseconds")
    ax.set_title("tool latency")
    return ax


def status(frames: Frames, *, ax: Axes | None = None) -> Axes:
    """How calls of each tool ended (ok, error, denied, timeout, ...), as stacked horizontal bars."""
    calls = frames.calls()
    ax = _axes(ax)
    counts = calls.groupby(["tool", "status"], observed=True).size().unstack(fill_value=0)
    left = None
    for st in counts.columns:
        values = counts[st].astype(float)
        ax.barh([str(t) for t in counts.index], values, left=left, label=str(st),
                color=_STATUS_COLORS.get(str(st), "#7f8c8d"))
        left = values if left is None else left + values
    ax.set_xlabel("calls")
    ax.set_title("result status per tool")
    if len(counts.columns):
        ax.legend()
    return ax


class Plots:
    """The plots of a transcript or a collection: ``timeline``, ``tokens``, ``latency``, ``status``.

    Example:
        >>> import agentnb as anb, matplotlib
        >>> matplotlib.use("Agg")
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run.start("Paris?", run_id="r1").run().transcript.plot.timeline().get_title()
        'timeline of r1'
    """

    def __init__(self, frames: Frames) -> None:
        self.frames = frames

    def timeline(self, run_id: str | None = None, *, ax: Axes | None = None) -> Axes:
        """See :func:`timeline`."""
        return timeline(self.frames, run_id, ax=ax)

    def tokens(self, *, ax: Axes | None = None) -> Axes:
        """See :func:`tokens`."""
        return tokens(self.frames, ax=ax)

    def latency(self, *, ax: Axes | None = None) -> Axes:
        """See :func:`latency`."""
        return latency(self.frames, ax=ax)

    def status(self, *, ax: Axes | None = None) -> Axes:
        """See :func:`status`."""
        return status(self.frames, ax=ax)

    def __repr__(self) -> str:
        return "<agentnb.Plots timeline, tokens, latency, status>"


__all__ = ["Plots", "latency", "status", "timeline", "to_png", "tokens"]
