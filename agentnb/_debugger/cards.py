"""Event cards as HTML: one card specification per event class (:data:`CARDS`), tested without a browser.

Every card has a one-line summary (:func:`summary`) and a body (:func:`card`). The timeline shows cards
collapsed to their summary inside a native ``<details>`` element, so expanding one costs no round trip to
the kernel. Colours come from JupyterLab's CSS variables, so cards follow the light and dark themes.

Cards read only the event and a :class:`CardContext` (the conversation index and the run's tools), never the
live run, so the same functions render a live run, a loaded transcript, or a moment in the past. The HTML
building blocks they use (escaping, tables, JSON trees, messages, diffs) live in :mod:`.render` and are
re-exported here.

What a person decides on is shown as it runs: summaries and cards write invisible and direction-changing
characters out (:mod:`agentnb._visible`), and the summary and card of every event that carries a call's
arguments (parsed, validated, waiting, edited, started, rejected, in the model's turn) say so when they held one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._visible import FLAG, hides, visible
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallParsed,
    CallRejected,
    CallValidated,
    CompressionApplied,
    GuardTripped,
    Interjected,
    ModelRequested,
    ModelRetried,
    OutputValidated,
    ResultsBound,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
)
from .render import (
    TRUNCATE,
    conversation_html,
    conversation_lines,
    counted,
    esc,
    flag_html,
    json_lines,
    json_tree,
    jsonable,
    kv,
    line_diff,
    message_html,
    pre,
    short,
)
from .timeline import Timeline


@dataclass(frozen=True)
class CardContext:
    """What cards may read besides the event: the run's timeline (for history and buffers)."""

    timeline: Timeline
    light: bool = False
    """Leave out the heavy parts (full histories, schemas, raw responses): for cards in the timeline, whose
    full version is one selection away."""


__all__ = ["CARDS", "TRUNCATE", "CardContext", "CardSpec", "body_html", "card", "conversation_html",
           "conversation_lines", "esc", "event_status", "flag_html", "json_lines", "json_tree", "jsonable",
           "kind_class", "kv", "line_diff", "message_html", "own_fields", "pre", "summary_html", "summary_text"]


# -- summaries ----------------------------------------------------------------------------------------

def _args_inline(args: dict[str, Any] | None, raw: str = "") -> str:
    if args is None:
        return short(visible(raw)[0], 50)
    return short(visible(json.dumps(args, ensure_ascii=False))[0], 50)  # cut after escaping: no half a ⟨U+…⟩


def _flagged(*values: Any) -> str:
    """The summary's warning when a value it speaks of holds invisible or direction-changing characters."""
    return f" · ⚠ {FLAG}" if any(hides(v) for v in values) else ""


def _s_turn_completed(ev: Any) -> str:
    r = ev.response
    calls = len(r.message.tool_calls)
    what = f"{calls} call{'s' if calls != 1 else ''}" if calls else short(r.message.text or "(no text)", 40)
    usage = f"{r.usage.input_tokens}+{r.usage.output_tokens} tok"
    finish = f"finish {r.finish_reason}"
    if r.finish_reason_raw and r.finish_reason_raw != r.finish_reason:
        finish += f" (provider: {r.finish_reason_raw})"
    return f"{what} · {finish} · {usage}" + _flagged(*_call_values(r.message.tool_calls))


def _call_values(calls: Any) -> list[Any]:
    """What a person reads of each call: its id, its tool and its arguments (their raw text when unparsed)."""
    return [v for c in calls for v in (c.call_id, c.name, c.arguments if c.arguments is not None else c.arguments_raw)]


def _s_approval_resolved(ev: Any) -> str:
    by = f" by {ev.by}" if ev.by else ""
    edited = " · edited" + _flagged(ev.arguments) if ev.arguments is not None else ""
    return f"{ev.decision}{by}{edited}" + (f" · {short(ev.note, 40)}" if ev.note else "")


def _choice_label(ev: Any) -> str:
    choice = getattr(ev, "tool_choice", None) or (ev.settings or {}).get("tool_choice")
    if choice is None or ev.finalize:
        return ""
    return f" · tool_choice {choice['name'] if isinstance(choice, dict) and 'name' in choice else choice}"


def summary_text(ev: Any) -> str:
    """The one-line description of an event (plain text); event kinds without a card list their fields.

    Invisible and direction-changing characters are written out here (the page escapes only HTML).
    """
    spec = CARDS.get(type(ev))
    return visible(spec.summary(ev) if spec is not None else _generic_summary(ev))[0]


_COMMON_FIELDS = frozenset({"type", "seq", "ts", "run_id", "turn", "state"})


def own_fields(ev: Any) -> dict[str, Any]:
    """An event's own fields (without the common ones), JSON-safe: how an unknown event kind is shown."""
    from dataclasses import fields, is_dataclass

    if is_dataclass(ev):
        names = [f.name for f in fields(ev)]
    else:
        names = [n for n in vars(ev) if not n.startswith("_")]
    return {n: jsonable(getattr(ev, n)) for n in names if n not in _COMMON_FIELDS}


def _generic_summary(ev: Any) -> str:
    parts = []
    for name, value in own_fields(ev).items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{name}={short(shown, 30)}")
    return short(" · ".join(parts), 90) or "(no fields)"


def kind_class(event_type: str) -> str:
    """The CSS class that colours an event kind (model, stream, call, ok, bad, warn, end)."""
    spec = _BY_NAME.get(event_type)
    return spec.css if spec is not None else ""


def event_status(ev: Any) -> str:
    """A status worth filtering on: a result's status, a decision, a rejection, a retry, the final state."""
    spec = CARDS.get(type(ev))
    return spec.status(ev) if spec is not None else _own_status(ev)


def summary_html(ev: Any) -> str:
    """The one-line summary, as HTML."""
    cls = kind_class(ev.type)
    return (
        f'<span class="agentnb-seq">{ev.seq}</span><span class="agentnb-kind {cls}">{esc(ev.type)}</span>'
        f"{esc(summary_text(ev))}"
        f'<span class="agentnb-state">→ {esc(ev.state.value)}</span>'
    )


# -- bodies -------------------------------------------------------------------------------------------


def _common(ev: Any) -> list[tuple[str, str]]:
    return [("time", esc(ev.ts.isoformat(timespec="milliseconds"))), ("turn", esc(ev.turn)),
            ("state after", f"<b>{esc(ev.state.value)}</b>")]


EFFECT_MARKS = {
    "happened": "the effect was done in this run",
    "inherited": "an earlier run of this operation did it, so it was answered from the effect ledger",
    "reused": "a fork's read, answered from its parent's result of the same read",
    "simulated": "a fork ran the tool's simulator (or refused the write for want of one): nothing happened",
    "rerun": "a fork told to repeat this tool's effects did it again",
}
"""What each ``ToolFinished.effect`` mark means, in words (the card's line)."""


def _lineage_html(ev: Any) -> str:
    fork = ev.settings.get("fork") if isinstance(ev.settings, dict) else None
    if not isinstance(fork, dict):
        return ""
    return kv([("fork of", f"run <code>{esc(fork.get('parent'))}</code> after event {esc(fork.get('at'))}"),
               ("effects", f"new writes: <b>{esc(fork.get('effects'))}</b> · reads: {esc(fork.get('reads'))}"
                + (f" · re-run: {esc(', '.join(fork.get('rerun') or []))}" if fork.get("rerun") else "")),
               *([("request edited", "<br>".join(esc(line) for line in fork.get("request_diff") or []))]
                 if fork.get("request") else [])])


def _b_run_started(ev: Any, ctx: CardContext) -> str:
    if ctx.light:
        names = ", ".join(t.name for t in ev.tools) or "(none)"
        return kv([("model", esc(ev.model)), ("tools", esc(names)), ("messages", esc(len(ev.messages)))])
    tools = "".join(
        f"<details><summary><b>{esc(t.name)}</b> — {esc(short(t.description, 80))} "
        f'<span class="agentnb-muted">risk {esc(t.risk)}, approval {esc(t.approval)}</span></summary>'
        f"{json_tree(t.parameters, open_depth=1)}</details>"
        for t in ev.tools
    )
    return _lineage_html(ev) + kv([("model", esc(ev.model)), ("settings", json_tree(ev.settings, open_depth=1))]) + (
        f"<div><b>tools offered</b>{tools or ' (none)'}</div><div><b>messages</b>{conversation_html(ev.messages)}</div>"
    )


def _b_model_requested(ev: Any, ctx: CardContext) -> str:
    sent = [] if ctx.light else ctx.timeline.messages_at(ev.seq)
    new = "".join(message_html(m) for m in ev.new_messages)
    return kv([
        ("messages sent", esc(ev.message_count)),
        ("tools offered", esc(", ".join(ev.tools)) or "(none: finalization turn)" if ev.finalize else
         esc(", ".join(ev.tools)) or "(none)"),
        ("settings", json_tree(ev.settings, open_depth=1)),
        ("finalize", esc(ev.finalize)),
    ]) + (f"<div><b>added by this request</b>{new}</div>" if new else "") + ("" if ctx.light else (
        f"<details><summary><b>the {len(sent)} messages sent</b></summary>{conversation_html(sent)}</details>"
    ))


def _b_text_merged(ev: Any, ctx: CardContext) -> str:
    buf = ctx.timeline.text_buffer(ev.seq)
    before = buf[: len(buf) - len(ev.fragment)]
    shown_before = before if len(before) <= TRUNCATE else "…" + before[-TRUNCATE:]
    return kv([("fragment", f"<code>{esc(repr(ev.fragment))}</code>"), ("text so far", esc(ev.length))]) + (
        f'<div class="agentnb-pre">{esc(shown_before)}<span class="agentnb-frag">{esc(ev.fragment)}</span></div>'
    )


def _b_arguments_merged(ev: Any, ctx: CardContext) -> str:
    buf = ctx.timeline.argument_buffer(ev.seq)
    before = buf[: len(buf) - len(ev.fragment)]
    try:
        parsed = json.loads(buf)
        parses = '<span class="agentnb-k-ok">yes — a complete JSON value</span>' if isinstance(parsed, dict) else (
            "JSON, but not an object")
    except ValueError:
        parses = '<span class="agentnb-muted">not yet</span>'
    shown_before = before if len(before) <= TRUNCATE else "…" + before[-TRUNCATE:]
    return kv([
        ("call index", esc(ev.index)),
        ("call id", f"<code>{esc(ev.call_id)}</code>" if ev.call_id else _muted("(sent with the first fragment)")),
        ("tool", esc(ev.name or "")),
        ("fragment", f"<code>{esc(repr(ev.fragment))}</code>"),
        ("bytes so far", esc(ev.length)),
        ("parses yet", parses),
    ]) + f'<div class="agentnb-pre">{esc(shown_before)}<span class="agentnb-frag">{esc(ev.fragment)}</span></div>'


def _muted(text: str) -> str:
    return f'<span class="agentnb-muted">{esc(text)}</span>'


def _b_model_retried(ev: Any, ctx: CardContext) -> str:
    rows = [("attempt", esc(ev.attempt)), ("status", esc(ev.status)), ("waits", f"{ev.delay_s:g} s")]
    return kv(rows + _wire_row(ev.wire)) + pre(ev.error)


def _wire_row(wire: Any) -> list[tuple[str, str]]:
    """A failed request's capture, named in its card: the exchange itself is on the Wire tab."""
    if not isinstance(wire, dict):
        return []
    what = f"{wire.get('method', '')} {wire.get('url', '')} → {wire.get('status') or 'no status'}"
    frames = f", {int(wire.get('frames_total') or 0)} frames before the break" if wire.get("stream") else ""
    return [("wire", f"{esc(what)}{esc(frames)} · the Wire tab shows the exchange")]


def _b_turn_completed(ev: Any, ctx: CardContext) -> str:
    r = ev.response
    raw = ""
    edits = ""
    if isinstance(r.raw, dict) and isinstance(r.raw.get("original_arguments"), dict):
        for call in r.message.tool_calls:
            before = r.raw["original_arguments"].get(call.call_id)
            if before is not None:
                edits += (f"<div>forked with edited arguments for <code>{esc(call.call_id)}</code>:</div>"
                          + line_diff(json_lines(before), json_lines(call.arguments), "original", "fork"))
    if r.raw is not None and not ctx.light:
        tree = json_tree(jsonable(r.raw), open_depth=1)
        raw = f"<details><summary><b>raw provider response</b></summary>{tree}</details>"
    return kv([
        ("provider · model", esc(f"{r.provider} · {r.model}")),
        ("response id", f"<code>{esc(r.response_id)}</code>"),
        ("finish reason", f"raw <code>{esc(r.finish_reason_raw)}</code> → normalized <b>{esc(r.finish_reason)}</b>"),
        ("usage", esc(f"{r.usage.input_tokens} in + {r.usage.output_tokens} out")),
        ("latency", esc(f"{ev.latency_s * 1000:.1f} ms")),
        ("complete", esc(r.complete)),
    ]) + edits + message_html(r.message) + raw


def _b_call_parsed(ev: Any, ctx: CardContext) -> str:
    raw = ctx.timeline.call_raw(ev.seq, ev.call_id)
    rows = [("call id", f"<code>{esc(ev.call_id)}</code>" + (" (generated)" if ev.generated_id else "")),
            ("tool", f"<b>{esc(ev.name)}</b>"), ("index", esc(ev.index))]
    if ev.error:
        rows.append(("parse error", f'<span class="agentnb-err">{esc(ev.error)}</span>'))
        return (kv(rows) + flag_html(ev.call_id, ev.name, raw or "") + "<div>raw arguments (never repaired):</div>"
                + pre(raw or ""))
    return kv(rows) + flag_html(ev.call_id, ev.name, ev.arguments) + json_tree(ev.arguments)


def _b_call_validated(ev: Any, ctx: CardContext) -> str:
    rows = kv([("call id", f"<code>{esc(ev.call_id)}</code>"), ("tool", f"<b>{esc(ev.name)}</b>"),
               ("needs approval", esc(ev.needs_approval))])
    return rows + flag_html(ev.call_id, ev.name, ev.arguments) + json_tree(ev.arguments)


def _b_call_rejected(ev: Any, ctx: CardContext) -> str:
    bad = frozenset(str(e.get("loc", "")) for e in ev.errors)
    args = ctx.timeline.call_arguments(ev.seq, ev.call_id)
    errors = "".join(f"<li><code>{esc(e.get('loc'))}</code>: {esc(e.get('msg'))}</li>" for e in ev.errors)
    body = kv([("call id", f"<code>{esc(ev.call_id)}</code>"), ("tool", f"<b>{esc(ev.name)}</b>"),
               ("reason", f'<span class="agentnb-err">{esc(ev.reason)}</span>')]
              + ([("cancelled by", f"<b>{esc(ev.by)}</b> at {esc(f'{ev.ts:%H:%M:%S}')}")] if ev.by else []))
    if errors:
        body += f"<ul>{errors}</ul>"
    if args is not None:
        body += flag_html(ev.call_id, ev.name, args) + json_tree(args, bad=bad)
    return body + "<div>sent back to the model:</div>" + pre(ev.message)


def _b_approval_requested(ev: Any, ctx: CardContext) -> str:
    decision = ctx.timeline.approval_decision(ev.call_id, ev.seq)
    call = ctx.timeline.call_at(ev.seq, ev.call_id)
    answered = call.result.status if call is not None and call.result is not None else None  # cancelled: skipped
    status = decision or (f"never decided: the call was {esc(answered)}" if answered else
                          '<span class="agentnb-badge agentnb-badge-wait">waiting</span>')
    expires = ev.expires_at.isoformat(timespec="seconds") if ev.expires_at else "never"
    return kv([
        ("tool", f"<b>{esc(ev.name)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>"),
        ("asks for", esc(ev.kind.replace("_", " "))), ("risk", esc(ev.risk)),
        ("approval id", f"<code>{esc(ev.approval_id)}</code>"),
        ("argument digest", f"<code>{esc(ev.arguments_digest[:16])}…</code>"), ("expires", esc(expires)),
        ("idempotency key", f"<code>{esc(ev.idempotency_key or '—')}</code>"), ("status", status),
    ]) + flag_html(ev.call_id, ev.name, ev.arguments) + json_tree(ev.arguments)


def _b_approval_resolved(ev: Any, ctx: CardContext) -> str:
    rows = [("decision", f"<b>{esc(ev.decision)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>"),
            ("by", esc(ev.by or "—")), ("note", esc(ev.note or "—"))]
    body = kv(rows)
    if ev.arguments is not None:
        body += "<div>edited arguments:</div>" + flag_html(ev.arguments) + json_tree(ev.arguments)
        original = ctx.timeline.call_arguments(ev.seq, ev.call_id)
        if original is not None:
            body += "<div>the edit, as a diff of the model's arguments:</div>" + line_diff(
                json_lines(original), json_lines(ev.arguments), "model", "approved")
    if ev.decision == "submitted":
        body += "<div>submitted result (what the model sees):</div>" + pre(ev.content or "")
    return body


def _b_tool_started(ev: Any, ctx: CardContext) -> str:
    body = kv([("tool", f"<b>{esc(ev.name)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>")])
    call = ctx.timeline.call_at(ev.seq, ev.call_id)
    if call is None or call.arguments is None:
        return body + flag_html(ev.call_id, ev.name)
    return (body + flag_html(ev.call_id, ev.name, call.arguments) + "<div>runs with (after any edit):</div>"
            + json_tree(call.arguments))


def _b_tool_finished(ev: Any, ctx: CardContext) -> str:
    cls = "agentnb-k-ok" if ev.status == "ok" else "agentnb-k-bad"
    rows = [("tool", f"<b>{esc(ev.name)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>"),
            ("status", f'<span class="{cls}">{esc(ev.status)}</span>'), ("duration", f"{ev.duration_s * 1000:.2f} ms")]
    mark = getattr(ev, "effect", None)
    if mark is not None:
        rows.append(("effect mark", f"<b>{esc(mark)}</b> — {esc(EFFECT_MARKS.get(mark, ''))}"))
    if ev.reused:
        rows.append(("effect", "already done by this call (before a restart): the ledger's result was reused"))
    if mark in ("inherited", "reused"):
        rows.append(("done by", f"run <code>{esc(ev.effect_run)}</code>, call <code>{esc(ev.effect_call)}</code>; "
                                "not run again here"))
    elif getattr(ev, "duplicate_of", None):
        rows.append(("effect", f"a duplicate: the same effect was already done by call "
                               f"<code>{esc(ev.duplicate_of)}</code>; it was not repeated"))
    if ev.error_type:
        rows.append(("error", f'<span class="agentnb-err">{esc(ev.error_type)}: {esc(ev.error_message)}</span>'))
    for name in ("idempotency_key", "request_sha256", "result_sha256", "call_binding_sha256"):
        value = getattr(ev, name, None)
        if value:
            rows.append((name.replace("_", " "), f"<code>{esc(value)}</code>"))
    audit = ""
    if ev.value is not None and not isinstance(ev.value, str):
        audit = f"<details><summary>audit value</summary>{json_tree(ev.value)}</details>"
    return kv(rows) + "<div>the model sees:</div>" + pre(ev.content) + audit


def _b_results_bound(ev: Any, ctx: CardContext) -> str:
    last = ctx.timeline.last_message_at(ev.seq)  # not the whole conversation: a long run has many cards of these
    body = kv([("calls, in the model's order", esc(", ".join(ev.call_ids)))])
    return body + (message_html(last) if last is not None else "")


def _b_guard_tripped(ev: Any, ctx: CardContext) -> str:
    return kv([("guard", f"<b>{esc(ev.guard)}</b>"), ("limit", esc(f"{ev.limit:g}")), ("value", esc(f"{ev.value:g}")),
               ("action", esc(ev.action))]) + pre(ev.message)


def _b_output_validated(ev: Any, ctx: CardContext) -> str:
    rows = [("verdict", '<span class="agentnb-k-ok">fits the output type</span>' if ev.ok else
             '<span class="agentnb-k-bad">does not fit: no retries left, the run fails</span>' if ev.final else
             '<span class="agentnb-k-bad">does not fit: a correction goes back to the model</span>'),
            ("from", f"call <code>{esc(ev.call_id)}</code>" if ev.call_id else "the answer's text"),
            ("attempt", esc(ev.attempt))]
    errors = "".join(f"<li><code>{esc(e.get('loc') or '(answer)')}</code>: {esc(e.get('msg'))}</li>"
                     for e in ev.errors)
    detail = f"<ul>{errors}</ul>" if errors else pre(json.dumps(ev.output, indent=2, ensure_ascii=False))
    return kv(rows) + detail


def _b_compression_applied(ev: Any, ctx: CardContext) -> str:
    before = ctx.timeline.messages_at(ev.seq - 1) if ev.seq else []
    if ctx.light:
        return kv([("tier", esc(ev.tier)), ("tokens", esc(f"{ev.tokens_before} → {ev.tokens_after}"))])
    return kv([("tier", esc(ev.tier)), ("tokens", esc(f"{ev.tokens_before} → {ev.tokens_after}")),
               ("removed or replaced", esc(", ".join(map(str, ev.removed)) or "—"))]) + (
        "<div><b>what changed</b> (one line per message part)</div>"
        + line_diff(conversation_lines(before), conversation_lines(ev.messages), "before", "after")
    ) + (
        '<div style="display:flex;gap:8px"><div style="flex:1;min-width:0"><b>before</b>'
        f"{conversation_html(before)}</div><div style=\"flex:1;min-width:0\"><b>after</b>"
        f"{conversation_html(ev.messages)}</div></div>"
    )


def _b_run_finished(ev: Any, ctx: CardContext) -> str:
    cls = "agentnb-badge-done" if ev.final.value == "COMPLETED" else "agentnb-badge-bad"
    out = pre(ev.output) if ev.output else '<span class="agentnb-muted">(no output)</span>'
    return kv([("final state", f'<span class="agentnb-badge {cls}">{esc(ev.final.value)}</span>'),
               ("why", esc(ev.reason)), *_wire_row(ev.wire)]) + out


def _b_generic(ev: Any, ctx: CardContext) -> str:
    """An event kind this version does not know: every field, as a table of JSON trees."""
    return recorded_html(ev, "an event kind without its own card: its fields")


def recorded_html(ev: BaseEvent, note: str) -> str:
    """An event's own fields as recorded, as a table of JSON trees under a note saying why no more is shown."""
    return f'<div class="agentnb-muted">{esc(note)}</div>' + kv(
        [(name, json_tree(value, open_depth=1)) for name, value in own_fields(ev).items()]
    )


def body_html(ev: BaseEvent, ctx: CardContext) -> str:
    """The expanded card body of an event (unknown kinds fall back to their fields)."""
    spec = CARDS.get(type(ev))
    return kv(_common(ev)) + (spec.body if spec is not None else _b_generic)(ev, ctx)


def card(ev: BaseEvent, ctx: CardContext, *, selected: bool = False, open_: bool = False) -> str:
    """A whole card: a ``<details>`` with the one-line summary and the body."""
    cls = "agentnb-card agentnb-selected" if selected else "agentnb-card"
    is_open = " open" if open_ else ""
    return (
        f'<details class="{cls} agentnb-ev-{esc(ev.type)}" data-seq="{ev.seq}"{is_open}>'
        f"<summary>{summary_html(ev)}</summary>"
        f'<div class="agentnb-body">{body_html(ev, ctx)}</div></details>'
    )


# -- one card specification per event class ------------------------------------------------------------


def _own_status(ev: Any) -> str:
    status = getattr(ev, "status", None)
    return status if isinstance(status, str) else ""


@dataclass(frozen=True, slots=True)
class CardSpec:
    """How the debugger shows one event class: its colour, its one-line summary, its card, its row status."""

    css: str
    """The CSS class that colours the kind (``agentnb-k-model``, ``-stream``, ``-call``, ``-ok``, ``-bad``, ...)."""
    summary: Callable[[Any], str]
    """The one-line summary (plain text)."""
    body: Callable[[Any, CardContext], str]
    """The expanded card (HTML)."""
    status: Callable[[Any], str] = _own_status
    """The status the timeline filters on (default: the event's own ``status`` field, if it has one)."""


def _tool_finished_summary(ev: ToolFinished) -> str:
    if ev.effect == "inherited":
        how = f" · inherited: done in {ev.effect_run} by {ev.effect_call}"
    elif ev.effect in ("reused", "simulated", "rerun"):
        how = f" · {ev.effect}"
    elif ev.duplicate_of:
        how = f" · not repeated: done by {ev.duplicate_of}"
    else:
        how = " · reused from the ledger" if ev.reused else f" · {ev.duration_s * 1000:.1f} ms"
    return f"{ev.name} · {ev.status}{how} · {short(ev.content, 40)}"


def _b_interjected(ev: Any, ctx: CardContext) -> str:
    who = f" ({esc(ev.by)})" if ev.by else ""
    return kv([("a person told the model" + who, f"<pre>{esc(ev.text)}</pre>"),
               ("when", "with the next request, after this turn's results")])


CARDS: dict[type[BaseEvent], CardSpec] = {
    Interjected: CardSpec("agentnb-k-warn", lambda ev: f"a person said: {short(ev.text, 60)}", _b_interjected),
    RunStarted: CardSpec(
        "agentnb-k-model",
        lambda ev: f"{ev.model} · {counted(len(ev.tools), 'tool')} · {counted(len(ev.messages), 'message')}"
        + (f" · fork of {ev.settings['fork'].get('parent')}" if isinstance(ev.settings.get("fork"), dict) else ""),
        _b_run_started),
    ModelRequested: CardSpec(
        "agentnb-k-model", lambda ev: f"turn {ev.turn} · {counted(ev.message_count, 'message')}"
        + (" · finalize (no tools)" if ev.finalize else f" · {counted(len(ev.tools), 'tool')}") + _choice_label(ev),
        _b_model_requested),
    TextMerged: CardSpec("agentnb-k-stream", lambda ev: f"+{ev.fragment!r} ({ev.length} chars)", _b_text_merged),
    ArgumentsMerged: CardSpec(
        "agentnb-k-stream", lambda ev: f"call #{ev.index}{' ' + ev.name if ev.name else ''} +{ev.fragment!r} "
        f"({ev.length} bytes)", _b_arguments_merged),
    ModelRetried: CardSpec(
        "agentnb-k-warn", lambda ev: f"attempt {ev.attempt} · HTTP {ev.status} · wait {ev.delay_s:g}s · "
        + short(ev.error, 40), _b_model_retried, status=lambda ev: "retry"),
    TurnCompleted: CardSpec("agentnb-k-model", _s_turn_completed, _b_turn_completed),
    CallParsed: CardSpec(
        "agentnb-k-call",
        lambda ev: f"{ev.name}({_args_inline(ev.arguments)})" + (" · invalid JSON" if ev.error else "")
        + _flagged(ev.call_id, ev.name, ev.arguments),
        _b_call_parsed, status=lambda ev: "invalid" if ev.error else ""),
    CallValidated: CardSpec(
        "agentnb-k-ok", lambda ev: f"{ev.name}({_args_inline(ev.arguments)})"
        + (" · needs approval" if ev.needs_approval else "") + _flagged(ev.call_id, ev.name, ev.arguments),
        _b_call_validated),
    CallRejected: CardSpec(
        "agentnb-k-bad", lambda ev: f"{ev.name} · {ev.reason} · {short(ev.message.splitlines()[0], 50)}",
        _b_call_rejected, status=lambda ev: "rejected"),
    ApprovalRequested: CardSpec(
        "agentnb-k-warn", lambda ev: f"{ev.name}({_args_inline(ev.arguments)}) · risk {ev.risk}"
        + ("" if ev.kind == "approval" else f" · {ev.kind.replace('_', ' ')}")
        + _flagged(ev.call_id, ev.name, ev.arguments),
        _b_approval_requested, status=lambda ev: "waiting"),
    ApprovalResolved: CardSpec("agentnb-k-warn", _s_approval_resolved, _b_approval_resolved,
                               status=lambda ev: str(ev.decision)),
    ToolStarted: CardSpec("agentnb-k-call", lambda ev: f"{ev.name} ({ev.call_id})" + _flagged(ev.call_id, ev.name),
                          _b_tool_started),
    ToolFinished: CardSpec("agentnb-k-ok", _tool_finished_summary, _b_tool_finished),
    ResultsBound: CardSpec("agentnb-k-ok", lambda ev: f"{counted(len(ev.call_ids), 'result')} → model",
                           _b_results_bound),
    GuardTripped: CardSpec("agentnb-k-warn", lambda ev: f"{ev.guard}: {ev.value:g}/{ev.limit:g} → {ev.action}",
                           _b_guard_tripped, status=lambda ev: "guard"),
    CompressionApplied: CardSpec(
        "agentnb-k-warn", lambda ev: f"tier {ev.tier} · {ev.tokens_before} → {ev.tokens_after} tokens",
        _b_compression_applied),
    OutputValidated: CardSpec(
        "", lambda ev: (f"output fits (attempt {ev.attempt})" if ev.ok else
                        f"output does not fit (attempt {ev.attempt}): {len(ev.errors)} error(s)"
                        + (" · no retries left" if ev.final else "")),
        _b_output_validated),
    RunFinished: CardSpec("agentnb-k-end", lambda ev: f"{ev.final.value} · {short(ev.reason, 60)}", _b_run_finished,
                          status=lambda ev: ev.final.value.lower()),
}
"""The card of every event class (a test checks every class of the :data:`~agentnb.events.Event` union has one)."""

_BY_NAME: dict[str, CardSpec] = {cls.__name__: spec for cls, spec in CARDS.items()}
"""The same cards by event type name: the page's rows name kinds by their type."""


