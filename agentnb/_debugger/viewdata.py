"""What the front end shows, computed from a :class:`~.timeline.Timeline`: rows, detail, meters, header, wire.

Theory of operation. The front end (``widgets/debugger.js``) draws; it does not interpret events. Everything
it shows comes from here, in one of three shapes:

- **Rows** -- one per event, for the virtualized timeline, its filters and its search: the event's type,
  state, turn, tool, status, one-line summary and time (ms since the run began). :class:`.rows.RowEncoder`
  (re-exported here) sends every row's codes as binary columns and the texts of the rows in sight on the
  page's request (see :mod:`.rows`). Rows go to the browser in custom messages, never in the widget's saved
  state; a live run sends only the rows that are new since the last update. The tree the timeline opens on
  (:mod:`.tree`) travels the same way, beside the rows.
- **The selected moment** -- the card of one event, the conversation as it stood after it, the meters and
  the state diagram at that point: small HTML strings the widget syncs as traits.
- **The wire view** -- one provider's rendering of the request in force at the selected event, and the raw
  response where the run kept one (only the provider tab that is open is rendered).

The same functions feed the kernel-less views: :func:`fallback_html` (the static ``text/html`` of the
display bundle) and :func:`static_bundle` (every event's data for the self-contained HTML export).

Every text in these shapes has its invisible and direction-changing characters written out
(:mod:`agentnb._visible`): HTML and summaries as ``⟨U+202E⟩``, JSON text (the wire view) as JSON escapes, so the
front end draws nothing other than as it runs and needs no rule of its own.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any

from .._engine.prices import cost
from .._states import TERMINAL, LoopState
from .._visible import visible
from ..events import BaseEvent, ModelRetried, RunFinished, TurnCompleted
from ..providers._prices import recorded_table
from . import cards
from .diagram import state_diagram
from .render import counted
from .rows import RowEncoder as RowEncoder  # re-exported: the kernel-less views' rows
from .rows import event_tool
from .timeline import Timeline

if TYPE_CHECKING:
    from .tree import TreeEncoder

CHUNK = 20_000
"""Rows per message: the first screen shows before a long transcript has arrived whole."""


def tool_at(events: list[BaseEvent], seq: int) -> str:
    """The tool event ``seq`` is about, also for events that name only the call (as the rows show it)."""
    ev = events[seq]
    tool = event_tool(ev)
    call_id = getattr(ev, "call_id", None)
    if tool or not isinstance(call_id, str):
        return tool
    return next((event_tool(e) for e in reversed(events[:seq]) if getattr(e, "call_id", None) == call_id
                 and event_tool(e)), "")


def event_status(ev: BaseEvent) -> str:
    """A status worth filtering on (the event class's card says which: :attr:`.cards.CardSpec.status`)."""
    return cards.event_status(ev)


# -- the selected moment ------------------------------------------------------------------------------


def detail_html(tl: Timeline, seq: int, *, light: bool = False) -> str:
    """The selected event's card, expanded (``data-seq`` says which event it shows)."""
    if not len(tl):
        return '<div class="agentnb-muted">no events yet: Step or Continue</div>'
    ev = tl.events[seq]
    if not tl.has_moment(seq):  # a loaded log's index is still being built (Timeline.after): the event itself
        return (f'<div class="agentnb-detail-card" data-seq="{ev.seq}" data-provisional="true">'
                f'<div class="agentnb-detail-summary">{cards.summary_html(ev)}</div>'
                f"{cards.recorded_html(ev, PROVISIONAL)}</div>")
    ctx = cards.CardContext(tl, light=light)
    return (f'<div class="agentnb-detail-card" data-seq="{ev.seq}"><div class="agentnb-detail-summary">'
            f"{cards.summary_html(ev)}</div>{cards.body_html(ev, ctx)}</div>")


CARDS_AT_ONCE = 64
"""The most cards one ``cards?`` request is answered with (the rows in sight, and a few more)."""
CARD_SENT_CHARS = 40_000
"""A card longer than this is not sent ahead (a long tool result): a click on its row asks for it."""


def cards_answer(tl: Timeline, content: dict[str, Any]) -> dict[str, Any]:
    """The cards of the events a page asked for (``cards?``: the rows in sight), so a click on one shows at once.

    The same cards :func:`detail_html` gives, of the moments that are indexed (:meth:`Timeline.has_moment`),
    at most :data:`CARDS_AT_ONCE`, none longer than :data:`CARD_SENT_CHARS`; ``n`` is the length of the log
    they were drawn from, and the page drops them when the log grows (an approval's card changes with the
    events after it). Anything that is not a list of seqs of this log is left out.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("?")
        >>> tl = Timeline(run.run().events)
        >>> got = cards_answer(tl, {"kind": "cards?", "seqs": [1, 1, -1, "2", True, 10**9]})
        >>> got["seqs"], got["n"] == len(tl), got["html"] == [detail_html(tl, 1)]
        ([1], True, True)
    """
    n, asked = len(tl), content.get("seqs")
    wanted = [s for s in asked if type(s) is int and 0 <= s < n] if isinstance(asked, list) else []
    drawn = [(s, detail_html(tl, s)) for s in dict.fromkeys(wanted[:CARDS_AT_ONCE]) if tl.has_moment(s)]
    kept = [(s, card) for s, card in drawn if len(card) <= CARD_SENT_CHARS]
    return {"kind": "cards", "n": n, "seqs": [s for s, _ in kept], "html": [card for _, card in kept]}


PROVISIONAL = ("the event as recorded: the run at this moment (its conversation, its calls, the budget) is being "
               "indexed, and its full card follows in a moment")
"""What a card says while a loaded log's index is built (a long one's first seconds)."""


def conversation_html(tl: Timeline, seq: int) -> str:
    """The conversation as it stood right after event ``seq`` (time travel)."""
    if not len(tl):
        return ""
    if not tl.has_moment(seq):
        return f'<div class="agentnb-muted" data-provisional="true">{cards.esc(PROVISIONAL)}</div>'
    msgs = tl.messages_at(seq)
    ev = tl.events[seq]
    return (f'<div class="agentnb-time-travel" data-seq="{seq}"><div class="agentnb-muted">the conversation after '
            f"event {seq} ({cards.esc(ev.type)}): {len(msgs)} messages</div>{cards.conversation_html(msgs)}</div>")


def _budget(tl: Timeline) -> dict[str, Any]:
    first = tl.events[0] if len(tl) else None
    settings = getattr(first, "settings", {}) or {}
    budget = settings.get("budget") or {"max_turns": settings.get("max_turns")}
    return dict(budget)


def meters(tl: Timeline, seq: int) -> list[tuple[str, float | None, float | None, str]]:
    """``(label, value, limit, shown)`` for turns, tool calls, tokens, cost and time after event ``seq``."""
    c = tl.counters_at(seq)
    budget = _budget(tl)
    tokens = c.input_tokens + c.output_tokens
    elapsed = (tl.events[seq].ts - tl.events[0].ts).total_seconds() if len(tl) else 0.0
    # the recorded prices, then the maintained table, by the rule the run's cost limit applied
    table = recorded_table(budget.get("price_table", ""))  # a log older than the record: the maintained table
    spent = cost(c.tokens_by_model, budget.get("prices") or {}, table) if c.tokens_by_model else None
    return [
        ("turns", c.turns, budget.get("max_turns"), f"{c.turns}"),
        ("tool calls", c.tool_calls, budget.get("max_tool_calls"), f"{c.tool_calls}"),
        ("tokens", tokens, budget.get("max_total_tokens"), f"{tokens:,}"),
        ("cost", spent, budget.get("max_cost"), "—" if spent is None else f"${spent:.4f}"),
        ("time", elapsed, budget.get("deadline_s"), f"{elapsed:.1f} s"),
    ]


def meters_html(tl: Timeline, seq: int) -> str:
    """The budget meters after event ``seq``: a bar for each limit that is set, a line for everything."""
    rows = meters(tl, seq)
    bars = []
    for label, value, limit, _ in rows:
        if not limit:
            continue
        share = min(1.0, float(value or 0) / float(limit))
        over = " agentnb-meter-over" if value is not None and value >= limit else ""
        slug = label.replace(" ", "-")
        bars.append(
            f'<span class="agentnb-meter agentnb-meter-{slug}{over}" role="meter" aria-label="{label}" '
            f'aria-valuenow="{float(value or 0):g}" aria-valuemax="{float(limit):g}">'
            f'<span class="agentnb-meter-name">{label}</span><span class="agentnb-meter-track">'
            f'<span class="agentnb-meter-fill" style="width:{share * 100:.1f}%"></span></span></span>'
        )
    c = tl.counters_at(seq)
    parts = [f"{label} {shown}" + (f" / {limit:g}" if limit else "") for label, value, limit, shown in rows
             if label != "cost" or value is not None]
    # spaces between the items: a flex row drops them, a page without the stylesheet (GitHub) needs them
    return (f'<div class="agentnb-meters">{" ".join(bars)} <span class="agentnb-meter-label">{" · ".join(parts)} '
            f'<span class="agentnb-muted">({c.input_tokens:,} in, {c.output_tokens:,} out)</span></span></div>')


def events_text(n: int) -> str:
    """``n`` events, counted in words ("1 event", "2,000 events").

    Example:
        >>> events_text(1), events_text(2000)
        ('1 event', '2,000 events')
    """
    return counted(n, "event")


def header(tl: Timeline, *, live: bool, total: int | None = None, run_id: str = "",
           model: str = "") -> dict[str, Any]:
    """Run id, model, mode, state and why it ended, for the header line.

    Before the first event the timeline knows neither the run nor its model: ``run_id`` and ``model`` (the
    run's own, from the debugger) say them, and the mode says that nothing has happened yet.
    """
    rs = tl.state
    first = tl.events[0] if len(tl) else None
    n = len(tl)
    fork = (getattr(first, "settings", None) or {}).get("fork")
    lineage = ""
    if isinstance(fork, dict):
        edits = (("results replaced", "results"), ("arguments edited", "arguments"), ("request edited", "request"))
        replaced = [w for w, k in edits if fork.get(k)]
        said = f"fork of {fork.get('parent')} at event {fork.get('at')}" + "".join(f" · {w}" for w in replaced)
        lineage = visible(said + f" · new writes: {fork.get('effects')}")[0]
    if live:
        mode = "live" if n else "live · not started: Step or Continue"
    else:
        mode = f"replay · {n:,}/{events_text(total if total is not None else n)}"
    return {
        "run_id": visible(rs.run_id or run_id or "-")[0],
        "model": visible(str(getattr(first, "model", None) or model or "model not known yet"))[0],
        "mode": mode,
        "state": rs.state.value,
        "tone": _tone(rs.state),
        "reason": visible(rs.reason or "")[0],
        "live": live,
        "lineage": lineage,
    }


def _tone(state: LoopState) -> str:
    if state is LoopState.COMPLETED:
        return "done"
    if state in TERMINAL:
        return "bad"
    if state is LoopState.WAITING_APPROVAL:
        return "wait"
    return "live"


def diagram_html(tl: Timeline, seq: int) -> str:
    """The state machine with the state after event ``seq`` lit."""
    state = tl.events[seq].state if len(tl) else LoopState.NEW
    return _diagram(state)


@cache
def _diagram(state: LoopState) -> str:
    return state_diagram(state)  # a dozen states, drawn once each


# -- the wire view ------------------------------------------------------------------------------------


def wire_view(tl: Timeline, seq: int, provider: str) -> dict[str, Any]:
    """The request in force at ``seq`` for one provider (by title), and the raw response when it is that API's.

    Returns ``{"seq", "turn", "provider", "providers", "where", "request", "response", "response_from", "note",
    "sent"}``; ``seq`` is -1 before the first request. ``sent`` is what went over HTTP (:func:`.wire.sent`), on
    the tab of the API that sent it (elsewhere only its ``note``, naming that tab).
    """
    from . import wire

    titles = [t for t, _ in wire.ADAPTERS]
    provider = provider if provider in titles else titles[0]
    out: dict[str, Any] = {"seq": -1, "turn": 0, "provider": provider, "providers": titles, "request": "",
                           "response": "", "response_from": "", "note": "no model request yet at this event",
                           "where": [], "sent": {}}
    if not len(tl):
        return out
    req, messages, tools, settings = wire.request_at(tl, seq)
    if req is None:
        return out
    column = titles.index(provider) + 1
    out["where"] = wire.where_rows(column, messages, tools)
    body = wire.render_request_for(provider, messages, tools, settings)
    request = _pretty(body)
    out.update(seq=req.seq, turn=req.turn, request=request,
               note=f"the request of turn {req.turn} (event {req.seq}): {counted(len(messages), 'message')}, "
                    f"{counted(len(tools), 'tool')}")
    adapter = dict(wire.ADAPTERS)[provider]
    turn = next((e for e in tl.events[req.seq:] if isinstance(e, TurnCompleted) and e.turn == req.turn), None)
    response = turn.response if turn is not None else None
    if response is not None and response.raw is not None:
        out["response_from"] = response.provider
        if response.provider == getattr(adapter, "PROVIDER", None):
            out["response"] = _pretty(cards.jsonable(response.raw))
    failed = _failed_at(tl, seq, req, answered=turn is not None)
    sent = (wire.sent_failed(failed) if failed is not None
            else wire.sent(response, in_flight=turn is None and tl.events[-1].state not in TERMINAL))
    if sent["api"] and sent["api"] != adapter.PROVIDER:
        sent = {**dict.fromkeys(sent, ""), "note": f"{sent['title'].split(':')[0]} (see its tab)"}
    out["sent"] = sent
    return out


def _failed_at(tl: Timeline, seq: int, asked: BaseEvent, *, answered: bool) -> ModelRetried | RunFinished | None:
    """The failed request to show at ``seq``: the one selected, else the last one of a turn that got no answer."""
    events = tl.events
    selected = events[seq] if 0 <= seq < len(events) else None
    if isinstance(selected, ModelRetried | RunFinished) and selected.wire is not None:
        return selected
    if answered:
        return None
    return next((e for e in reversed(events[asked.seq:]) if isinstance(e, ModelRetried | RunFinished)
                 and e.wire is not None and e.turn == asked.turn), None)


WIRE_TEXT_CAP = 200_000
"""Characters of a rendered request or response the wire view shows: a long run's last request holds its whole
conversation (megabytes at a few thousand turns), which would ride in a synced trait on every click."""


CUT = "characters left out here"
"""What the wire view writes where it cut a long text."""


def _pretty(value: Any, cap: int = WIRE_TEXT_CAP) -> str:
    """The same JSON, every character seen; past ``cap`` characters its start and its end, and what was left out."""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > cap:
        head, tail = cap // 4, cap - cap // 4
        cut = text.rfind("\n", 0, head) + 1 or head  # whole lines on both sides of the gap
        end = text.find("\n", len(text) - tail) + 1 or len(text) - tail
        text = (f"{text[:cut]}\n… {end - cut:,} {CUT} (the first {cut:,} and the last "
                f"{len(text) - end:,} of {len(text):,} are shown; the transcript holds all of it) …\n\n{text[end:]}")
    return visible(text, json=True)[0]


# -- kernel-less views --------------------------------------------------------------------------------

SAVED = "saved snapshot"
"""What the static views call themselves: the run as it stood when it was saved, not a live debugger."""

FALLBACK_ROWS = 400
"""Events listed in the static fallback (the first and last halves; the middle is counted)."""


def fallback_html(tl: Timeline, *, live: bool, title: str = "agentnb debugger", rows: int = FALLBACK_ROWS,
                  style: bool = True, run_id: str = "", model: str = "", built: TreeEncoder | None = None) -> str:
    """The static ``text/html`` shown where no widget runs (GitHub, nbviewer, nbconvert, no kernel).

    The header (run, model, final state and why), the meters, the event table with summaries, and the
    conversation after the last event. Styles are inline; without them (GitHub strips ``<style>``) it is
    still a readable table. ``rows`` caps the events listed; ``style=False`` leaves the stylesheet out (the
    widget's saved snapshot, whose page has it already). ``run_id`` and ``model`` name a run that has no
    event yet (see :func:`header`). ``built``: the debugger's :class:`~.tree.TreeEncoder` of ``tl``, used when
    it holds every event (else the tree is built here, of at most :data:`STATIC_TREE_EVENTS` events).
    """
    from .assets import stylesheet
    from .static_tree import static_tree

    h = header(tl, live=live, run_id=run_id, model=model)
    n = len(tl)
    last = n - 1
    reason = f" — {cards.esc(h['reason'])}" if h["reason"] else ""
    head = (f'<div class="agentnb-header"><b>{cards.esc(title)}</b> · run <code>{cards.esc(h["run_id"])}</code> · '
            f'{cards.esc(h["model"])} · {events_text(n)} · <span class="agentnb-mode">{SAVED}</span> · '
            f'<span class="agentnb-badge agentnb-badge-{h["tone"]}">{cards.esc(h["state"])}</span>{reason}</div>')
    if n > rows:
        half = rows // 2
        shown = [*range(half), -1, *range(n - half, n)]
    else:
        shown = list(range(n))
    body = []
    for i in shown:
        if i < 0:
            body.append(f'<tr><td colspan="5" class="agentnb-muted">… {n - 2 * half:,} more events …</td></tr>')
            continue
        ev = tl.events[i]
        body.append(f"<tr><td>{ev.seq}</td><td>{cards.esc(ev.type)}</td><td>{ev.turn}</td>"
                    f"<td>{cards.esc(cards.summary_text(ev))}</td><td>{cards.esc(ev.state.value)}</td></tr>")
    table = ('<table class="agentnb-fallback-events"><thead><tr><th>#</th><th>event</th><th>turn</th>'
             f'<th>summary</th><th>state after</th></tr></thead><tbody>{"".join(body)}</tbody></table>')
    meter = meters_html(tl, last) if n else ""
    conv = conversation_html(tl, last) if n else ""
    # the page's own output (style=True) is marked: the live widget in the next output replaces it (debugger.css)
    cls = "agentnb-root agentnb-fallback" + (" agentnb-static-view" if style else "")
    # the tree the live debugger opens on, then the events; the widget's snapshot (style=False) keeps fewer nodes
    tree = static_tree(tl, rows if style else rows // 2, built) if n else ""
    return (f'{stylesheet() if style else ""}<div class="{cls}" data-events="{n}">{head}{meter}{tree}'
            f"<details open><summary><b>events</b></summary>{table}</details>"
            f"<details open><summary><b>conversation</b></summary>{conv}</details></div>")


WIRE_BUDGET = 3_000_000
"""Characters of wire-view JSON an export keeps (the latest requests first; older ones say so)."""


_MESSAGE_CHARS = 10
"""Fewer characters than any provider's indented JSON spends on a message of a request (its braces, a role, a
field name), so a request whose message count times this, per provider, is over the budget is not rendered."""


def latest_wire(tl: Timeline) -> dict[str, dict[str, Any]]:
    """The wire views of the latest requests, every provider's, newest first, while they fit the budget.

    At most :data:`WIRE_BUDGET` characters, and no request that the view cuts (:data:`WIRE_TEXT_CAP`): the ones
    before such a request stay out too. The export and the static bundle keep the same ones.
    """
    from . import wire

    titles = [t for t, _ in wire.ADAPTERS]
    kept: dict[str, dict[str, Any]] = {}
    spent = 0
    for seq in reversed(tl.turn_starts()):
        held = getattr(tl.events[seq], "message_count", 0)
        if spent + held * len(titles) * _MESSAGE_CHARS > WIRE_BUDGET:
            return kept  # its providers' bodies cannot fit: known without rendering them
        views: dict[str, Any] = {}
        for title in titles:
            v = views[title] = wire_view(tl, seq, title)
            spent += len(v["request"]) + len(v["response"]) + sum(map(len, v["sent"].values()))
            if spent > WIRE_BUDGET or CUT in v["request"]:
                return kept  # a request the view cuts is too long to keep whole, like one over the budget
        kept[str(seq)] = views
    return kept


def conversation_versions(tl: Timeline) -> tuple[list[str], list[list[int]], list[tuple[int, int]]]:
    """Each message's card once, and the conversation's versions as indices into them.

    Also per event ``(version, length)`` (:meth:`Timeline.history_versions`): what a static page needs to show
    the conversation at any moment.
    """
    versions, where = tl.history_versions()
    message_ids: dict[int, int] = {}
    message_html: list[str] = []
    version_lists: list[list[int]] = []
    for version in versions:
        ids = []
        for m in version:
            i = message_ids.get(id(m))
            if i is None:
                i = message_ids[id(m)] = len(message_html)
                message_html.append(cards.message_html(m))
            ids.append(i)
        version_lists.append(ids)
    return message_html, version_lists, where


def static_bundle(tl: Timeline, *, title: str) -> dict[str, Any]:
    """Everything the read-only front end needs without a kernel, for every event, in one JSON value.

    Per event: its row, its card (light: no full histories, which the conversation pane shows), a pointer
    into the shared conversation (message ``i`` of history version ``v`` is drawn once, however many events
    show it), its meters (distinct lines stored once) and its state. The wire view keeps the latest requests
    up to :data:`WIRE_BUDGET`, and none the view would cut (:data:`WIRE_TEXT_CAP`).
    """
    from . import wire

    n = len(tl)
    rows = RowEncoder().encode(tl.events, 0, n)
    from .tree import TreeEncoder

    tree = TreeEncoder().encode(tl.events, 0, n)
    message_html, version_lists, where = conversation_versions(tl)
    meter_lines: dict[str, int] = {}
    meter_at = []
    for seq in range(n):
        line = meters_html(tl, seq)
        meter_at.append(meter_lines.setdefault(line, len(meter_lines)))
    states = sorted({ev.state for ev in tl.events} | {LoopState.NEW}, key=lambda s: s.value)
    wire_data = latest_wire(tl)
    titles = [t for t, _ in wire.ADAPTERS]
    requests = tl.turn_starts()
    return {
        "header": {**header(tl, live=False), "mode": f"exported · {events_text(n)}", "static": True,
                   "title": visible(title)[0]},
        "count": n,
        "rows": rows,
        "tree": tree,
        "detail": [detail_html(tl, seq, light=True) for seq in range(n)],
        "messages": message_html,
        "versions": version_lists,
        "where": [list(w) for w in where],
        "meters": list(meter_lines),
        "meter_at": meter_at,
        "diagrams": {s.value: state_diagram(s) for s in states},
        "wire": wire_data,
        "wire_titles": titles,
        "requests": requests,
    }
