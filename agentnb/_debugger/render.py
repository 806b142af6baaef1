"""HTML building blocks of the debugger: escaping, tables, text, JSON trees, messages and diffs.

Pure functions from values to HTML strings. The cards (:mod:`.cards`), the view data (:mod:`.viewdata`) and
the HTML export share them; colours come from JupyterLab's CSS variables through the ``agentnb-*`` classes.

Every text reaches the page through :func:`esc`, which writes invisible and direction-changing characters out
(:func:`agentnb._visible.visible`: ``⟨U+202E⟩``), so no text is drawn other than as it runs; :func:`flag_html`
is the warning next to a value that held one.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from .._messages import Message, ReasoningPart, RefusalPart, TextPart, ToolCallPart, ToolResultPart
from .._visible import FLAG, hides, visible

TRUNCATE = 2000
"""Characters of a value shown before "show all"."""


def counted(n: int, what: str) -> str:
    """``n`` of ``what``, counted in words ("1 message", "2,000 tools")."""
    return f"{n:,} {what}" if n == 1 else f"{n:,} {what}s"


def esc(value: object) -> str:
    """HTML-escape anything, with its invisible and direction-changing characters written out (``⟨U+202E⟩``)."""
    return html.escape(visible(str(value))[0], quote=True)


def flag_html(*values: Any) -> str:
    """The warning badge for values that hold invisible or direction-changing characters ("" when none does)."""
    if not any(hides(v) for v in values):
        return ""
    return (f'<div class="agentnb-hidden-flag"><span class="agentnb-badge agentnb-badge-bad">⚠</span> '
            f"{FLAG}: each is shown as its code point (⟨U+…⟩)</div>")


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
            flag = flag_html(p.call_id, p.name, p.arguments if p.arguments is not None else p.arguments_raw)
            out.append(f"<div>call <code>{esc(p.call_id)}</code> <b>{esc(p.name)}</b>{flag}{args}</div>")
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


def short(text: str, n: int = 60) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def json_lines(value: Any) -> list[str]:
    """A JSON value as indented lines (keys sorted), the unit of an argument diff."""
    return json.dumps(jsonable(value), indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def conversation_lines(messages: Sequence[Message]) -> list[str]:
    """A conversation as one line per message part (``role: text``), the unit of a compression diff."""
    out = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart | RefusalPart):
                text = p.text
            elif isinstance(p, ToolCallPart):
                text = f"call {p.call_id} {p.name}({p.arguments_raw})"
            elif isinstance(p, ToolResultPart):
                text = f"result {p.call_id} [{p.status}] {p.content}"
            else:
                text = f"({type(p).__name__})"
            out.append(f"{m.role}: {short(text, 200)}")
    return out


def line_diff(before: Sequence[str], after: Sequence[str], old: str = "before", new: str = "after") -> str:
    """A unified line diff as HTML: removed lines red, added lines green, context muted."""
    import difflib

    lines = list(difflib.unified_diff(list(before), list(after), old, new, n=2, lineterm=""))
    if not lines:
        return '<div class="agentnb-muted">(no difference)</div>'
    rows = []
    for line in lines[2:]:  # the ---/+++ header is said by the caption
        cls = {"+": "agentnb-add", "-": "agentnb-del", "@": "agentnb-hunk"}.get(line[:1], "agentnb-ctx")
        rows.append(f'<div class="{cls}">{esc(line) or "&nbsp;"}</div>')
    return (f'<div class="agentnb-diff agentnb-mono"><div class="agentnb-muted">− {esc(old)} · + {esc(new)}</div>'
            f'{"".join(rows)}</div>')


def jsonable(value: Any) -> Any:
    """``value`` as JSON-safe data (what cannot be said in JSON becomes its ``repr``)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value, fallback=repr)
