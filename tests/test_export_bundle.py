"""The one-file export past its card budget (agentnb/_debugger/bundle.py): which events keep their card, and a
page that still holds every event, whole, read back losslessly and shown with no hidden character."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb import _embedded as embedded
from agentnb._debugger import bundle
from agentnb._debugger.bundle import carded, export_bundle
from agentnb._debugger.timeline import Timeline
from agentnb._visible import visible
from agentnb.events import ArgumentsMerged, TextMerged, event_to_json

HOSTILE = "\u202e0987654321\u202c tag\U000e0041 line\u2028sep"
"""An override, a tag character (beyond the BMP) and a line separator."""


def streamed_run(turns: int = 6) -> anb.Run:
    @anb.tool
    def echo(text: str) -> str:
        """Echo a text."""
        return text

    script: list[dict[str, Any]] = [{"text": f"step {i} {HOSTILE} half \ud83d", "tool_calls": [
        {"name": "echo", "arguments": {"text": f"{HOSTILE} {i}"}}]} for i in range(turns)]
    model = anb.ScriptedModel([*script, {"text": "done"}], stream=True, chunk_size=4)
    return anb.Loop(model=model, tools=[echo], max_turns=turns + 2).start("go").run()


TRANSCRIPT = re.compile(r'id="agentnb-transcript" data-transcript="jsonl\+gzip\+base64"'
                        r' data-page-lines="(\d+)">([A-Za-z0-9+/=\n]+)</script>')


def embedded_pages_of(page: str) -> list[bytes]:
    """The pages of an export's embedded transcript, each inflated (one base64 gzip member per line)."""
    found = TRANSCRIPT.search(page)
    assert found is not None
    return [gzip.decompress(base64.b64decode(p, validate=True)) for p in found.group(2).split("\n")]


def test_under_the_budget_every_event_keeps_its_card() -> None:
    events = streamed_run(2).events
    assert carded(events, budget=len(events)) == [True] * len(events)
    data = export_bundle(Timeline(events), title="t", budget=len(events))
    assert all(isinstance(card, str) and f'data-seq="{i}"' in card for i, card in enumerate(data["detail"]))


def test_past_the_budget_the_first_event_then_the_latest_keep_cards_fragments_last() -> None:
    events = streamed_run().events
    fragments = [isinstance(ev, TextMerged | ArgumentsMerged) for ev in events]
    others = [i for i in range(1, len(events)) if not fragments[i]]
    budget = 1 + len(others) // 2
    keep = carded(events, budget=budget)
    assert sum(keep) == budget and keep[0]
    assert [i for i in range(1, len(events)) if keep[i]] == others[-(budget - 1):]  # the latest, no fragment
    roomy = carded(events, budget=1 + len(others) + 3)  # room for every other event and three fragments
    assert all(roomy[i] for i in others)
    assert [i for i in range(len(events)) if roomy[i] and fragments[i]] == \
        [i for i in range(len(events)) if fragments[i]][-3:]


def test_a_page_past_its_budget_reads_back_the_same_events_and_holds_no_hidden_character(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = streamed_run()
    monkeypatch.setattr(bundle, "CARD_BUDGET", 10)
    page = run.transcript.to_html(tmp_path / "run.html").read_text(encoding="utf-8")
    later = re.search(r'id="agentnb-data-later" data-encoding="gzip\+base64">([^<]+)</script>', page)
    assert later is not None
    detail = json.loads(gzip.decompress(base64.b64decode(later.group(1))))["detail"]
    assert len(detail) == len(run.events) and sum(card is not None for card in detail) == 10
    back = anb.Transcript.load(tmp_path / "run.html")
    assert [event_to_json(e) for e in back.events] == [event_to_json(e) for e in run.events]
    assert any(isinstance(e, TextMerged) and "\ud83d" in e.fragment for e in back.events)  # a lone surrogate too
    lines = b"".join(embedded_pages_of(page)).decode("utf-8").splitlines()
    assert len(lines) == len(run.events)
    assert all(visible(line)[1] is False for line in lines)  # the page may show a line as it is
    assert any("\\u202e" in line for line in lines) and any("\\udb40\\udc41" in line for line in lines)


def test_the_export_shows_the_same_rows_meters_and_conversations_as_the_static_bundle() -> None:
    from agentnb._debugger.viewdata import static_bundle

    for run in (streamed_run(3), anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"),
                                          budget=anb.Budget(deadline_s=60, max_turns=9)).start("go").run()):
        tl = Timeline(run.events)
        new, old = export_bundle(tl, title="t"), static_bundle(tl, title="t")
        assert [new["meters"][i] for i in new["meter_at"]] == [old["meters"][i] for i in old["meter_at"]]
        assert new["detail"] == old["detail"] and new["wire"] == old["wire"]
        for key in ("rows", "tree", "messages", "versions", "where", "diagrams", "header", "requests"):
            assert new[key] == old[key], key


@pytest.mark.parametrize("budget", [0, 6_000, 20_000, 40_000, 60_000])
def test_under_a_small_wire_budget_the_latest_requests_that_fit_are_kept_whole(
        budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentnb._debugger import viewdata

    tl = Timeline(streamed_run(5).events)
    every = viewdata.latest_wire(tl)
    monkeypatch.setattr(viewdata, "WIRE_BUDGET", budget)
    new, old = export_bundle(tl, title="t")["wire"], viewdata.static_bundle(tl, title="t")["wire"]
    assert new == old
    # the newest requests, as many as fit, each with every provider's view, as the unlimited views draw them
    starts = [str(s) for s in reversed(tl.turn_starts())]
    assert list(new) == starts[:len(new)] and all(new[s] == every[s] for s in new)
    size = sum(len(v["request"]) + len(v["response"]) + sum(map(len, v["sent"].values()))
               for views in new.values() for v in views.values())
    assert size <= budget
    if len(new) < len(starts):  # the next one would not have fit
        nxt = every[starts[len(new)]]
        assert size + sum(len(v["request"]) + len(v["response"]) + sum(map(len, v["sent"].values()))
                          for v in nxt.values()) > budget


def test_the_embedded_transcript_is_paged_so_the_page_inflates_only_the_page_of_an_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = streamed_run()
    monkeypatch.setattr(embedded, "PAGE_LINES", 7)
    page = run.transcript.to_html(tmp_path / "run.html").read_text(encoding="utf-8")
    found = TRANSCRIPT.search(page)
    assert found is not None and found.group(1) == "7"
    pages = embedded_pages_of(page)
    assert len(pages) == -(-len(run.events) // 7) > 2
    for k, text in enumerate(pages):  # page k: events 7k to 7k + 6, whole lines
        lines = text.decode("utf-8").splitlines()
        assert text.endswith(b"\n") and len(lines) == min(7, len(run.events) - 7 * k)
        assert [json.loads(line)["seq"] for line in lines] == list(range(7 * k, 7 * k + len(lines)))
    back = anb.Transcript.load(tmp_path / "run.html")
    assert [event_to_json(e) for e in back.events] == [event_to_json(e) for e in run.events]


def test_an_export_made_before_the_pages_still_loads(tmp_path: Path) -> None:
    run = streamed_run(2)
    page = run.transcript.to_html(tmp_path / "run.html").read_text(encoding="utf-8")
    whole = base64.b64encode(gzip.compress(b"".join(embedded_pages_of(page)))).decode("ascii")
    element = f'id="agentnb-transcript" data-transcript="jsonl+gzip+base64">{whole}</script>'
    old = TRANSCRIPT.sub(lambda _: element, page)
    assert old != page and TRANSCRIPT.search(old) is None
    (tmp_path / "old.html").write_text(old, encoding="utf-8")
    back = anb.Transcript.load(tmp_path / "old.html")
    assert [event_to_json(e) for e in back.events] == [event_to_json(e) for e in run.events]


@pytest.mark.parametrize("damage", ["a page cut short", "a page that is not base64", "an empty page"])
def test_a_damaged_page_is_refused_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    damage: str) -> None:
    run = streamed_run(3)
    monkeypatch.setattr(embedded, "PAGE_LINES", 5)
    page = run.transcript.to_html(tmp_path / "run.html").read_text(encoding="utf-8")
    found = TRANSCRIPT.search(page)
    assert found is not None
    pages = found.group(2).split("\n")
    second = base64.b64decode(pages[1])
    pages[1] = {"a page cut short": base64.b64encode(second[: len(second) // 2]).decode("ascii"),
                "a page that is not base64": pages[1][:-5] + "*" + pages[1][-4:],
                "an empty page": ""}[damage]
    broken = page[:found.start(2)] + "\n".join(pages) + page[found.end(2):]
    (tmp_path / "broken.html").write_text(broken, encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match=r"broken\.html: (the transcript embedded in this HTML file is "
                                                  r"damaged|an HTML file with no transcript embedded)"):
        anb.Transcript.load(tmp_path / "broken.html")
