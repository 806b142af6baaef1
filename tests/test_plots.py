"""Plots render to PNG for one transcript, a collection, a Parquet-loaded collection and an imported history."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import agentnb as anb  # noqa: E402
from agentnb._plots import Plots, to_png  # noqa: E402
from agentnb.importers import from_anthropic  # noqa: E402
from tests.test_frames import approved, denied, story  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield  # type: ignore[misc]
    plt.close("all")


@pytest.fixture(scope="module")
def runs() -> anb.TranscriptCollection:
    return anb.TranscriptCollection([approved().transcript, denied().transcript,
                                     story("parallel", "parallel", stream=True).transcript,
                                     story("malformed", "malformed").transcript])


@pytest.mark.parametrize("kind", ["timeline", "tokens", "latency", "status"])
def test_every_plot_renders(runs: anb.TranscriptCollection, kind: str, tmp_path: Path) -> None:
    for plots in (runs.plot, runs["parallel"].plot):
        ax = getattr(plots, kind)()
        png = to_png(ax)
        assert png.startswith(PNG) and len(png) > 2000
    runs.save_parquet(tmp_path)
    ax = getattr(anb.load_transcripts(tmp_path).plot, kind)()
    assert to_png(ax.figure).startswith(PNG)


def test_plots_draw_what_the_frames_say(runs: anb.TranscriptCollection) -> None:
    ax = runs.plot.timeline("parallel")
    assert ax.get_title() == "timeline of parallel"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["model", "call 1", "call 2", "call 3"]
    assert len(ax.patches) == 2 + 3  # two model calls, three tool runs stacked in three lanes
    status = runs.plot.status()
    labels = [t.get_text() for t in status.get_yticklabels()]
    assert labels == ["add", "create_refund", "get_order", "get_weather"]
    assert sorted(status.get_legend_handles_labels()[1]) == ["denied", "error", "ok"]
    tokens = runs.plot.tokens()
    assert tokens.get_title() == "tokens per turn (4 runs)"
    fig, ax = plt.subplots()
    assert runs.plot.latency(ax=ax) is ax


def test_timeline_names_missing_runs_and_hatches_approval_waits(runs: anb.TranscriptCollection) -> None:
    with pytest.raises(KeyError, match="no run 'nope'"):
        runs.plot.timeline("nope")
    ax = runs.plot.timeline("approved")
    assert any(p.get_hatch() == "//" for p in ax.patches)
    with pytest.raises(ValueError, match="no run"):
        anb.TranscriptCollection().plot.timeline()


def test_imported_histories_plot_without_timings() -> None:
    imported = from_anthropic([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x", "is_error": True}]},
    ])
    plots = Plots(imported.transcript.frames)
    assert to_png(plots.status()).startswith(PNG) and to_png(plots.latency()).startswith(PNG)
    assert to_png(plots.timeline()).startswith(PNG)
