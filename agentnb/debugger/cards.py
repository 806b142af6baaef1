"""Event cards as HTML: one pure function per event kind, tested without a browser.

Every card has a one-line summary (:func:`summary`) and a body (:func:`card`). The timeline shows cards
collapsed to their summary inside a native ``<details>`` element, so expanding one costs no round trip to
the kernel. Colours come from JupyterLab's CSS variables, so cards follow the light and dark themes.

Cards read only the event and a :class:`CardContext` (the conversation index and the run's tools), never the
live run, so the same functions render a live run, a loaded transcript, or a moment in the past.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import BaseEvent
from ..messages import Message, ReasoningPart, RefusalPart, TextPart, ToolCallPart, ToolResultPart
from .timeline import Timeline

CSS = """
<style>
.agentnb-root { font-family: var(--jp-ui-font-family); font-size: var(--jp-ui-font-size1);
  color: var(--jp-ui-font-color1); max-width: 100%; overflow-x: hidden; }
.agentnb-root code, .agentnb-mono { font-family: var(--jp-code-font-family); font-size: var(--jp-code-font-size); }
.agentnb-card { border: 1px solid var(--jp-border-color2); border-radius: 4px; margin: 2px 0;
  background: var(--jp-layout-color1); }
.agentnb-card > summary { cursor: pointer; padding: 3px 6px; list-style: none; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
.agentnb-card > summary::-webkit-details-marker { display: none; }
.agentnb-card.agentnb-selected { border-color: var(--jp-brand-color1); box-shadow: 0 0 0 1px var(--jp-brand-color1); }
.agentnb-card .agentnb-body { padding: 4px 10px 8px 10px; border-top: 1px solid var(--jp-border-color2);
  overflow-x: auto; }
.agentnb-seq { color: var(--jp-ui-font-color2); display: inline-block; min-width: 3.2em; text-align: right;
  margin-right: 6px; font-family: var(--jp-code-font-family); }
.agentnb-kind { font-weight: 600; margin-right: 6px; }
.agentnb-state { color: var(--jp-ui-font-color2); font-size: 90%; margin-left: 6px; }
.agentnb-k-model { color: var(--jp-brand-color1); }
.agentnb-k-stream { color: var(--jp-ui-font-color2); }
.agentnb-k-call { color: var(--jp-accent-color1, #7b61ff); }
.agentnb-k-ok { color: var(--jp-success-color1); }
.agentnb-k-bad { color: var(--jp-error-color1); }
.agentnb-k-warn { color: var(--jp-warn-color1); }
.agentnb-k-end { color: var(--jp-ui-font-color0); }
.agentnb-kv { border-collapse: collapse; margin: 4px 0; }
.agentnb-kv td { padding: 1px 8px 1px 0; vertical-align: top; }
.agentnb-kv td:first-child { color: var(--jp-ui-font-color2); white-space: nowrap; }
.agentnb-pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; padding: 4px 6px;
  background: var(--jp-layout-color2); border-radius: 3px; font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size); max-height: 24em; overflow-y: auto; }
.agentnb-frag { background: var(--jp-warn-color3, #ffe9a8); color: var(--jp-ui-font-color0);
  border-bottom: 2px solid var(--jp-warn-color1); }
.agentnb-err { color: var(--jp-error-color1); font-weight: 600; }
.agentnb-json details { margin-left: 1em; }
.agentnb-json summary { cursor: pointer; }
.agentnb-json .agentnb-badfield { background: var(--jp-error-color3, #fdd); outline: 1px solid var(--jp-error-color1); }
.agentnb-jstr { color: var(--jp-mirror-editor-string-color, #a31515); }
.agentnb-jnum { color: var(--jp-mirror-editor-number-color, #098658); }
.agentnb-jkey { color: var(--jp-mirror-editor-property-color, #001080); }
.agentnb-msg { border-left: 3px solid var(--jp-border-color1); padding: 2px 8px; margin: 4px 0; }
.agentnb-msg-user { border-left-color: var(--jp-brand-color1); }
.agentnb-msg-assistant { border-left-color: var(--jp-success-color1); }
.agentnb-msg-tool { border-left-color: var(--jp-warn-color1); }
.agentnb-msg-system { border-left-color: var(--jp-ui-font-color2); }
.agentnb-role { font-weight: 600; color: var(--jp-ui-font-color2); font-size: 90%; text-transform: uppercase; }
.agentnb-badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600;
  background: var(--jp-layout-color3); color: var(--jp-ui-font-color0); }
.agentnb-badge-live { background: var(--jp-brand-color1); color: var(--jp-ui-inverse-font-color0, white); }
.agentnb-badge-done { background: var(--jp-success-color1); color: var(--jp-ui-inverse-font-color0, white); }
.agentnb-badge-bad { background: var(--jp-error-color1); color: var(--jp-ui-inverse-font-color0, white); }
.agentnb-badge-wait { background: var(--jp-warn-color1); color: var(--jp-ui-inverse-font-color0, white); }
.agentnb-muted { color: var(--jp-ui-font-color2); }
.agentnb-diagram svg { max-width: 100%; height: auto; }
</style>
"""
"""The stylesheet, included once per debugger."""

TRUNCATE = 2000
"""Characters of a value shown before "show all"."""


@dataclass(frozen=True)
class CardContext:
    """What cards may read besides the event: the run's timeline (for history and buffers)."""

    timeline: Timeline
    light: bool = False
    """Leave out the heavy parts (full histories, schemas, raw responses): for cards in the timeline, whose
    full version is one selection away."""


def esc(value: object) -> str:
    """HTML-escape anything."""
    return html.escape(str(value), quote=True)


def kv(rows: Sequence[tuple[str, str]]) -> str:
    """A two-column table; values are HTML already."""
    body = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="agentnb-kv">{body}</table>'


def pre(text: str, limit: int = TRUNCATE) -> str:
    """Preformatted text, truncated with a "show all" disclosure when long."""
    if len(text) <= limit:
        return f'<div class="agentnb-pre">{esc(text)}</div>'
    return (
        f'<div class="agentnb-pre">{esc(text[:limit])}<span class="agentnb-muted"> … '
        f"({len(text) - limit:,} more characters)</span></div>"
        f'<details><summary class="agentnb-muted">show all {len(text):,} characters</summary>'
        f'<div class="agentnb-pre">{esc(text)}</div></details>'
    )


def json_tree(value: Any, bad: frozenset[str] = frozenset(), path: str = "", open_depth: int = 2) -> str:
    """A collapsible JSON tree; fields whose dotted path is in ``bad`` are marked."""
    return f'<div class="agentnb-json agentnb-mono">{_tree(value, bad, path, 0, open_depth)}</div>'


def _leaf(value: Any) -> str:
    if isinstance(value, str):
        shown = value if len(value) <= 300 else value[:300] + "…"
        return f'<span class="agentnb-jstr">{esc(json.dumps(shown, ensure_ascii=False))}</span>'
    if isinstance(value, bool) or value is None:
        return f"<b>{esc(json.dumps(value))}</b>"
    if isinstance(value, int | float):
        return f'<span class="agentnb-jnum">{esc(value)}</span>'
    return esc(repr(value))


def _tree(value: Any, bad: frozenset[str], path: str, depth: int, open_depth: int) -> str:
    if isinstance(value, dict):
        items = list(value.items())
        opener, closer = "{", "}"
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
        opener, closer = "[", "]"
    else:
        return _leaf(value)
    if not items:
        return esc(opener + closer)
    rows = []
    for key, item in items:
        sub = f"{path}.{key}" if path else str(key)
        label = f'<span class="agentnb-jkey">{esc(json.dumps(key) if isinstance(key, str) else key)}</span>: '
        cls = ' class="agentnb-badfield"' if sub in bad else ""
        rows.append(f"<div{cls}>{label}{_tree(item, bad, sub, depth + 1, open_depth)}</div>")
    is_open = " open" if depth < open_depth else ""
    return f"<details{is_open}><summary>{esc(opener)} {len(items)} …</summary>{''.join(rows)}{esc(closer)}</details>"


def message_html(m: Message) -> str:
    """One canonical message as a chat bubble."""
    out = []
    for p in m.parts:
        if isinstance(p, TextPart):
            out.append(pre(p.text))
        elif isinstance(p, ToolCallPart):
            args = json_tree(p.arguments) if p.arguments is not None else pre(p.arguments_raw)
            out.append(f"<div>call <code>{esc(p.call_id)}</code> <b>{esc(p.name)}</b>{args}</div>")
        elif isinstance(p, ToolResultPart):
            cls = "agentnb-k-ok" if p.status == "ok" else "agentnb-k-bad"
            out.append(
                f'<div>result for <code>{esc(p.call_id)}</code> <b>{esc(p.name)}</b> '
                f'<span class="{cls}">[{esc(p.status)}]</span>{pre(p.content)}</div>'
            )
        elif isinstance(p, RefusalPart):
            out.append(f'<div class="agentnb-err">refusal</div>{pre(p.text)}')
        elif isinstance(p, ReasoningPart):
            text = p.text or "(opaque)"
            out.append(
                f'<details><summary class="agentnb-muted">reasoning ({esc(p.provider)})</summary>{pre(text)}</details>'
            )
    return (
        f'<div class="agentnb-msg agentnb-msg-{esc(m.role)}"><span class="agentnb-role">{esc(m.role)}</span>'
        f'{"".join(out)}</div>'
    )


def conversation_html(messages: Sequence[Message], limit: int = 60) -> str:
    """A conversation; only the last ``limit`` messages are drawn (the rest are counted)."""
    skipped = max(0, len(messages) - limit)
    head = f'<div class="agentnb-muted">… {skipped} earlier messages</div>' if skipped else ""
    return head + "".join(message_html(m) for m in messages[skipped:])


# -- summaries ----------------------------------------------------------------------------------------

_KIND_CLASS = {
    "RunStarted": "agentnb-k-model", "ModelRequested": "agentnb-k-model", "TurnCompleted": "agentnb-k-model",
    "TextMerged": "agentnb-k-stream", "ArgumentsMerged": "agentnb-k-stream", "ModelRetried": "agentnb-k-warn",
    "CallParsed": "agentnb-k-call", "CallValidated": "agentnb-k-ok", "CallRejected": "agentnb-k-bad",
    "ApprovalRequested": "agentnb-k-warn", "ApprovalResolved": "agentnb-k-warn", "ToolStarted": "agentnb-k-call",
    "ToolFinished": "agentnb-k-ok", "ResultsBound": "agentnb-k-ok", "GuardTripped": "agentnb-k-warn",
    "CompressionApplied": "agentnb-k-warn", "RunFinished": "agentnb-k-end",
}


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _args_inline(args: dict[str, Any] | None, raw: str = "") -> str:
    if args is None:
        return _short(raw, 50)
    return _short(json.dumps(args, ensure_ascii=False), 50)


def _s_turn_completed(ev: Any) -> str:
    r = ev.response
    calls = len(r.message.tool_calls)
    what = f"{calls} call{'s' if calls != 1 else ''}" if calls else _short(r.message.text or "(no text)", 40)
    usage = f"{r.usage.input_tokens}+{r.usage.output_tokens} tok"
    return f"{r.finish_reason_raw} → {r.finish_reason} · {what} · {usage}"


def _s_approval_resolved(ev: Any) -> str:
    by = f" by {ev.by}" if ev.by else ""
    edited = " · edited" if ev.arguments is not None else ""
    return f"{ev.decision}{by}{edited}" + (f" · {_short(ev.note, 40)}" if ev.note else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


_SUMMARIES: dict[str, Callable[[Any], str]] = {
    "RunStarted": lambda ev: f"{ev.model} · {len(ev.tools)} tools · {len(ev.messages)} messages",
    "ModelRequested": lambda ev: f"turn {ev.turn} · {ev.message_count} messages"
    + (" · finalize (no tools)" if ev.finalize else f" · {len(ev.tools)} tools")
    + _choice_label(ev),
    "TextMerged": lambda ev: f"+{ev.fragment!r} ({ev.length} chars)",
    "ArgumentsMerged": lambda ev: f"call #{ev.index}{' ' + ev.name if ev.name else ''} +{ev.fragment!r} "
    f"({ev.length} bytes)",
    "ModelRetried": lambda ev: f"attempt {ev.attempt} · HTTP {ev.status} · wait {ev.delay_s:g}s · "
    + _short(ev.error, 40),
    "TurnCompleted": _s_turn_completed,
    "CallParsed": lambda ev: f"{ev.name}({_args_inline(ev.arguments)})" + (" · invalid JSON" if ev.error else ""),
    "CallValidated": lambda ev: f"{ev.name}({_args_inline(ev.arguments)})"
    + (" · needs approval" if ev.needs_approval else ""),
    "CallRejected": lambda ev: f"{ev.name} · {ev.reason} · {_short(ev.message.splitlines()[0], 50)}",
    "ApprovalRequested": lambda ev: f"{ev.name}({_args_inline(ev.arguments)}) · risk {ev.risk}"
    + ("" if ev.kind == "approval" else f" · {ev.kind.replace('_', ' ')}"),
    "ApprovalResolved": _s_approval_resolved,
    "ToolStarted": lambda ev: f"{ev.name} ({ev.call_id})",
    "ToolFinished": lambda ev: f"{ev.name} · {ev.status}" + (
        f" · not repeated: done by {ev.duplicate_of}" if getattr(ev, "duplicate_of", None) else
        " · reused from the ledger" if ev.reused else f" · {ev.duration_s * 1000:.1f} ms")
    + f" · {_short(ev.content, 40)}",
    "ResultsBound": lambda ev: f"{_plural(len(ev.call_ids), 'result')} → model",
    "GuardTripped": lambda ev: f"{ev.guard}: {ev.value:g}/{ev.limit:g} → {ev.action}",
    "CompressionApplied": lambda ev: f"tier {ev.tier} · {ev.tokens_before} → {ev.tokens_after} tokens",
    "OutputValidated": lambda ev: (f"output fits (attempt {ev.attempt})" if ev.ok else
                                   f"output does not fit (attempt {ev.attempt}): {len(ev.errors)} error(s)"),
    "RunFinished": lambda ev: f"{ev.final.value} · {_short(ev.reason, 60)}",
}
"""One summary per event kind (a test checks every kind has one)."""


def _choice_label(ev: Any) -> str:
    choice = getattr(ev, "tool_choice", None) or (ev.settings or {}).get("tool_choice")
    if choice is None or ev.finalize:
        return ""
    return f" · tool_choice {choice['name'] if isinstance(choice, dict) and 'name' in choice else choice}"


def summary_text(ev: Any) -> str:
    """The one-line description of an event (plain text)."""
    return _SUMMARIES[ev.type](ev)


def summary_html(ev: Any) -> str:
    """The one-line summary, as HTML."""
    cls = _KIND_CLASS.get(ev.type, "")
    return (
        f'<span class="agentnb-seq">{ev.seq}</span><span class="agentnb-kind {cls}">{esc(ev.type)}</span>'
        f"{esc(summary_text(ev))}"
        f'<span class="agentnb-state">→ {esc(ev.state.value)}</span>'
    )


# -- bodies -------------------------------------------------------------------------------------------


def _common(ev: Any) -> list[tuple[str, str]]:
    return [("time", esc(ev.ts.isoformat(timespec="milliseconds"))), ("turn", esc(ev.turn)),
            ("state after", f"<b>{esc(ev.state.value)}</b>")]


def _b_run_started(ev: Any, ctx: CardContext) -> str:
    if ctx.light:
        names = ", ".join(t.name for t in ev.tools) or "(none)"
        return kv([("model", esc(ev.model)), ("tools", esc(names)), ("messages", esc(len(ev.messages)))])
    tools = "".join(
        f"<details><summary><b>{esc(t.name)}</b> — {esc(_short(t.description, 80))} "
        f'<span class="agentnb-muted">risk {esc(t.risk)}, approval {esc(t.approval)}</span></summary>'
        f"{json_tree(t.parameters, open_depth=1)}</details>"
        for t in ev.tools
    )
    return kv([("model", esc(ev.model)), ("settings", json_tree(ev.settings, open_depth=1))]) + (
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
    return kv([("fragment", f"<code>{esc(repr(ev.fragment))}</code>"), ("text so far", esc(ev.length))]) + (
        f'<div class="agentnb-pre">{esc(before)}<span class="agentnb-frag">{esc(ev.fragment)}</span></div>'
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
    return kv(rows) + pre(ev.error)


def _b_turn_completed(ev: Any, ctx: CardContext) -> str:
    r = ev.response
    raw = ""
    if r.raw is not None and not ctx.light:
        tree = json_tree(_jsonable(r.raw), open_depth=1)
        raw = f"<details><summary><b>raw provider response</b></summary>{tree}</details>"
    return kv([
        ("provider · model", esc(f"{r.provider} · {r.model}")),
        ("response id", f"<code>{esc(r.response_id)}</code>"),
        ("finish reason", f"raw <code>{esc(r.finish_reason_raw)}</code> → normalized <b>{esc(r.finish_reason)}</b>"),
        ("usage", esc(f"{r.usage.input_tokens} in + {r.usage.output_tokens} out")),
        ("latency", esc(f"{ev.latency_s * 1000:.1f} ms")),
        ("complete", esc(r.complete)),
    ]) + message_html(r.message) + raw


def _b_call_parsed(ev: Any, ctx: CardContext) -> str:
    raw = ctx.timeline.call_raw(ev.seq, ev.call_id)
    rows = [("call id", f"<code>{esc(ev.call_id)}</code>" + (" (generated)" if ev.generated_id else "")),
            ("tool", f"<b>{esc(ev.name)}</b>"), ("index", esc(ev.index))]
    if ev.error:
        rows.append(("parse error", f'<span class="agentnb-err">{esc(ev.error)}</span>'))
        return kv(rows) + "<div>raw arguments (never repaired):</div>" + pre(raw or "")
    return kv(rows) + json_tree(ev.arguments)


def _b_call_validated(ev: Any, ctx: CardContext) -> str:
    return kv([("call id", f"<code>{esc(ev.call_id)}</code>"), ("tool", f"<b>{esc(ev.name)}</b>"),
               ("needs approval", esc(ev.needs_approval))]) + json_tree(ev.arguments)


def _b_call_rejected(ev: Any, ctx: CardContext) -> str:
    bad = frozenset(str(e.get("loc", "")) for e in ev.errors)
    args = ctx.timeline.call_arguments(ev.seq, ev.call_id)
    errors = "".join(f"<li><code>{esc(e.get('loc'))}</code>: {esc(e.get('msg'))}</li>" for e in ev.errors)
    body = kv([("call id", f"<code>{esc(ev.call_id)}</code>"), ("tool", f"<b>{esc(ev.name)}</b>"),
               ("reason", f'<span class="agentnb-err">{esc(ev.reason)}</span>')])
    if errors:
        body += f"<ul>{errors}</ul>"
    if args is not None:
        body += json_tree(args, bad=bad)
    return body + "<div>sent back to the model:</div>" + pre(ev.message)


def _b_approval_requested(ev: Any, ctx: CardContext) -> str:
    decision = ctx.timeline.approval_decision(ev.call_id)
    status = decision or '<span class="agentnb-badge agentnb-badge-wait">waiting</span>'
    expires = ev.expires_at.isoformat(timespec="seconds") if ev.expires_at else "never"
    return kv([
        ("tool", f"<b>{esc(ev.name)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>"),
        ("asks for", esc(ev.kind.replace("_", " "))), ("risk", esc(ev.risk)),
        ("approval id", f"<code>{esc(ev.approval_id)}</code>"),
        ("argument digest", f"<code>{esc(ev.arguments_digest[:16])}…</code>"), ("expires", esc(expires)),
        ("idempotency key", f"<code>{esc(ev.idempotency_key or '—')}</code>"), ("status", status),
    ]) + json_tree(ev.arguments)


def _b_approval_resolved(ev: Any, ctx: CardContext) -> str:
    rows = [("decision", f"<b>{esc(ev.decision)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>"),
            ("by", esc(ev.by or "—")), ("note", esc(ev.note or "—"))]
    body = kv(rows)
    if ev.arguments is not None:
        body += "<div>edited arguments:</div>" + json_tree(ev.arguments)
    if ev.decision == "submitted":
        body += "<div>submitted result (what the model sees):</div>" + pre(ev.content or "")
    return body


def _b_tool_started(ev: Any, ctx: CardContext) -> str:
    return kv([("tool", f"<b>{esc(ev.name)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>")])


def _b_tool_finished(ev: Any, ctx: CardContext) -> str:
    cls = "agentnb-k-ok" if ev.status == "ok" else "agentnb-k-bad"
    rows = [("tool", f"<b>{esc(ev.name)}</b>"), ("call id", f"<code>{esc(ev.call_id)}</code>"),
            ("status", f'<span class="{cls}">{esc(ev.status)}</span>'), ("duration", f"{ev.duration_s * 1000:.2f} ms")]
    if ev.reused:
        rows.append(("effect", "already done by this call (before a restart): the ledger's result was reused"))
    if getattr(ev, "duplicate_of", None):
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
    msgs = ctx.timeline.messages_at(ev.seq)
    last = msgs[-1] if msgs else None
    body = kv([("calls, in the model's order", esc(", ".join(ev.call_ids)))])
    return body + (message_html(last) if last is not None else "")


def _b_guard_tripped(ev: Any, ctx: CardContext) -> str:
    return kv([("guard", f"<b>{esc(ev.guard)}</b>"), ("limit", esc(f"{ev.limit:g}")), ("value", esc(f"{ev.value:g}")),
               ("action", esc(ev.action))]) + pre(ev.message)


def _b_output_validated(ev: Any, ctx: CardContext) -> str:
    rows = [("verdict", '<span class="agentnb-k-ok">fits the output type</span>' if ev.ok else
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
        '<div style="display:flex;gap:8px"><div style="flex:1;min-width:0"><b>before</b>'
        f"{conversation_html(before)}</div><div style=\"flex:1;min-width:0\"><b>after</b>"
        f"{conversation_html(ev.messages)}</div></div>"
    )


def _b_run_finished(ev: Any, ctx: CardContext) -> str:
    cls = "agentnb-badge-done" if ev.final.value == "COMPLETED" else "agentnb-badge-bad"
    out = pre(ev.output) if ev.output else '<span class="agentnb-muted">(no output)</span>'
    return kv([("final state", f'<span class="agentnb-badge {cls}">{esc(ev.final.value)}</span>'),
               ("why", esc(ev.reason))]) + out


_BODIES: dict[str, Callable[[Any, CardContext], str]] = {
    "RunStarted": _b_run_started, "ModelRequested": _b_model_requested, "TextMerged": _b_text_merged,
    "ArgumentsMerged": _b_arguments_merged, "ModelRetried": _b_model_retried, "TurnCompleted": _b_turn_completed,
    "CallParsed": _b_call_parsed, "CallValidated": _b_call_validated, "CallRejected": _b_call_rejected,
    "ApprovalRequested": _b_approval_requested, "ApprovalResolved": _b_approval_resolved,
    "ToolStarted": _b_tool_started, "ToolFinished": _b_tool_finished, "ResultsBound": _b_results_bound,
    "GuardTripped": _b_guard_tripped, "CompressionApplied": _b_compression_applied, "RunFinished": _b_run_finished,
    "OutputValidated": _b_output_validated,
}
"""One body renderer per event kind (a test checks every kind has one)."""


def body_html(ev: BaseEvent, ctx: CardContext) -> str:
    """The expanded card body of an event."""
    return kv(_common(ev)) + _BODIES[ev.type](ev, ctx)


def card(ev: BaseEvent, ctx: CardContext, *, selected: bool = False, open_: bool = False) -> str:
    """A whole card: a ``<details>`` with the one-line summary and the body."""
    cls = "agentnb-card agentnb-selected" if selected else "agentnb-card"
    is_open = " open" if open_ else ""
    return (
        f'<details class="{cls} agentnb-ev-{esc(ev.type)}" data-seq="{ev.seq}"{is_open}>'
        f"<summary>{summary_html(ev)}</summary>"
        f'<div class="agentnb-body">{body_html(ev, ctx)}</div></details>'
    )


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value, fallback=repr)
