"""The data of a one-file HTML export, at a cost that grows with what a reader can use, not with the run.

:func:`export_bundle` gives the page (:mod:`.export`) what :func:`.viewdata.static_bundle` gives, in the same
shape, with two bounds that keep a long run's export quick to write, small and light in the browser:

- **Cards.** Rendering an event's card costs tens of microseconds and about a kilobyte of HTML, so a
  100,000-event run spent most of its export there, and the browser held a hundred megabytes of cards nobody
  opened. An export keeps :data:`CARD_BUDGET` cards: all of them for a run that size or shorter; past it,
  the run's first event and then the latest events, the streamed fragments (``TextMerged``,
  ``ArgumentsMerged``: half of a long streamed run) last. An event left out is ``None`` in ``detail``; the
  page shows its row's summary and the event as recorded, read from the transcript the page embeds anyway
  (:mod:`agentnb._embedded`, whose JSON writes every invisible character as an escape, so the page draws it
  without a rule of its own). Nothing is lost: each event is in the page, whole.
- **The wire view.** The latest requests are kept up to :data:`.viewdata.WIRE_BUDGET` characters, as before;
  a request is given up as soon as the providers rendered so far pass the budget, instead of rendering all
  five first, and not rendered at all when its message count alone says it cannot fit (on a long run the
  latest request alone is over the budget, and rendering it five times was the slowest part of the export).
  A request the wire view would cut (over :data:`.viewdata.WIRE_TEXT_CAP` characters) stops it the same way.

Rows, the tree, the conversation's messages, the meters and the state diagrams are those of
:func:`.viewdata.static_bundle`, from the same functions; a meter line is drawn once per distinct budget use
and time shown, not once per event.
"""

from __future__ import annotations

from typing import Any

from .._states import LoopState
from .._visible import visible
from ..events import ArgumentsMerged, BaseEvent, TextMerged
from .diagram import state_diagram
from .timeline import Timeline
from .viewdata import (
    RowEncoder,
    conversation_versions,
    detail_html,
    events_text,
    header,
    latest_wire,
    meters_html,
)

CARD_BUDGET = 10_000
"""Cards an export renders (every card of a run this long or shorter; see the module docs for the rest)."""

_FRAGMENTS = (TextMerged, ArgumentsMerged)


def carded(events: list[BaseEvent], budget: int | None = None) -> list[bool]:
    """Which events keep their card in an export: all, or the first and the latest, fragments last.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> events = run.start("Paris?").run().events
        >>> all(carded(events)), carded(events, budget=2)[:1] + carded(events, budget=2)[-1:]
        (True, [True, True])
    """
    n = len(events)
    budget = CARD_BUDGET if budget is None else budget
    if n <= budget:
        return [True] * n
    keep = [False] * n
    keep[0] = True  # how the run began is always shown
    left = budget - 1
    for wanted in (False, True):  # events that are not fragments first, then fragments, the latest first
        for seq in range(n - 1, 0, -1):
            if left <= 0:
                break
            if not keep[seq] and isinstance(events[seq], _FRAGMENTS) is wanted:
                keep[seq] = True
                left -= 1
    return keep


def _meters(tl: Timeline) -> tuple[list[str], list[int]]:
    """The distinct meter lines, and which one each event shows: drawn once per distinct budget use and time.

    A line reads the counters after the event and the time since the run began, to a tenth of a second (exact
    where a deadline's bar shows it), so consecutive events of a turn share it.
    """
    events = tl.events
    settings = getattr(events[0], "settings", {}) or {} if events else {}
    exact = bool((settings.get("budget") or {}).get("deadline_s")) if isinstance(settings, dict) else True
    t0 = events[0].ts if events else None
    lines: dict[str, int] = {}
    by_key: dict[tuple[object, object], int] = {}
    at = []
    for seq, ev in enumerate(events):
        elapsed = (ev.ts - t0).total_seconds() if t0 is not None else 0.0
        key = (tl.counters_at(seq), elapsed if exact else f"{elapsed:.1f}")
        i = by_key.get(key)
        if i is None:
            i = by_key[key] = lines.setdefault(meters_html(tl, seq), len(lines))
        at.append(i)
    return list(lines), at


def export_bundle(tl: Timeline, *, title: str, budget: int | None = None) -> dict[str, Any]:
    """What the exported page shows, for every event, with at most ``budget`` cards rendered (module docs).

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> tl = Timeline(run.start("Paris?").run().events)
        >>> data = export_bundle(tl, title="t", budget=3)
        >>> len(data["detail"]) == len(tl), sum(card is not None for card in data["detail"])
        (True, 3)
    """
    from .tree import TreeEncoder

    budget = CARD_BUDGET if budget is None else budget
    n = len(tl)
    events = tl.events
    message_html, version_lists, where = conversation_versions(tl)
    meter_lines, meter_at = _meters(tl)
    states = sorted({ev.state for ev in events} | {LoopState.NEW}, key=lambda s: s.value)
    keep = carded(events, budget)
    from . import wire

    return {
        "header": {**header(tl, live=False), "mode": f"exported · {events_text(n)}", "static": True,
                   "title": visible(title)[0]},
        "count": n,
        "rows": RowEncoder().encode(events, 0, n),
        "tree": TreeEncoder().encode(events, 0, n),
        "detail": [detail_html(tl, seq, light=True) if keep[seq] else None for seq in range(n)],
        "card_budget": budget,
        "messages": message_html,
        "versions": version_lists,
        "where": [list(w) for w in where],
        "meters": meter_lines,
        "meter_at": meter_at,
        "diagrams": {s.value: state_diagram(s) for s in states},
        "wire": latest_wire(tl),
        "wire_titles": [t for t, _ in wire.ADAPTERS],
        "requests": tl.turn_starts(),
    }
