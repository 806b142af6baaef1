"""The wire APIs' histories into transcripts: ``from_<api>`` and :func:`read` (see :mod:`agentnb.importers`).

The package docstring shows one in use (an orphan result found, the transcript's calls as a frame).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from .. import _pairing as pairing
from .._findings import Finding
from .._lint import validate_view
from .._messages import Message
from .._states import LoopState
from .._transcript import Transcript
from .._values import MAX_DEPTH, fits
from ..events import RunStarted
from ..providers._registry import WIRE_APIS
from ..providers._wireapi import History, WireAPI


@dataclass(slots=True)
class Imported:
    """What an importer gives back: the transcript, the conversation and the findings."""

    transcript: Transcript
    messages: list[Message]
    findings: list[Finding] = field(default_factory=list)
    format: str = ""

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    def __repr__(self) -> str:
        return f"<Imported {self.format}: {len(self.messages)} messages, {len(self.findings)} findings>"


def lint(messages: Sequence[Message]) -> list[Finding]:
    """Structural findings on a canonical conversation (positions are message indices).

    Checks that every call id is unique, every result answers a call made before it, and every call is
    answered exactly once (a call in the last assistant message with no answer yet is only a warning).

    Example:
        >>> from agentnb._messages import Message, ToolResultPart
        >>> orphan = ToolResultPart(call_id="x", name="f", status="ok", content="")
        >>> [(f.code, f.index, f.position) for f in lint([Message(role="tool", parts=(orphan,))])]
        [('orphan_result', 0, '[0]')]
    """
    return pairing.check(messages)


def transcript_of(messages: list[Message], findings: list[Finding], fmt: str, model: str | None,
                  run_id: str | None, ts: datetime | None) -> Imported:
    """The imported history as a transcript of one ``RunStarted`` holding the messages."""
    event = RunStarted(
        seq=0, ts=ts or datetime.now(UTC), run_id=run_id or f"imported_{fmt}", turn=0, state=LoopState.READY,
        messages=messages, model=f"{fmt}:{model or 'unknown'}", tools=[],
        settings={"imported_from": fmt, "findings": len(findings)},
    )
    return Imported(Transcript([event]), list(messages), findings, fmt)


def _plain(item: Any) -> Any:
    """An SDK object as the dict it dumps to; anything else as it is (the shape check reports it)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        data = dump(exclude_none=True)
        if isinstance(data, Mapping):
            return dict(data)
    return item


def _pending(f: Finding, history: History) -> Finding:
    """An unanswered call in the last message of a log may be pending: a warning there, not an error."""
    last = set(history.sources[-1]) if history.sources else set()
    if f.code == "unanswered_call" and f.index in last:
        return replace(f, severity="warning", message=f"{f.message} (the history ends with it: it may be pending)")
    return f


def read(api: WireAPI, history: Any, system: Any = None, *, model: str | None = None, run_id: str | None = None,
         ts: datetime | None = None) -> Imported:
    """Import a history of wire API ``api``: its ``parse_history`` and its lint rules, findings sorted by index.

    Example:
        >>> from agentnb.providers import WIRE_APIS
        >>> read(WIRE_APIS["gemini"], [{"role": "user", "parts": [{"text": "Hi"}]}]).messages[0].text
        'Hi'
    """
    items = [_plain(it) for it in history] if isinstance(history, list | tuple) else history
    deep = _too_deep(api, items)
    body: dict[str, Any] = {api.list_key: items}
    if system and api.system_key:
        body[api.system_key] = system if fits(system) else None
    found, clean = validate_view(api.name, body, None)
    parsed = api.parse_history(clean)
    findings = [*deep, *parsed.findings, *(_pending(f, parsed) for f in found)]
    findings.sort(key=lambda f: (f.index, f.part if f.part is not None else -1))
    return transcript_of(parsed.messages, findings, api.name, model, run_id, ts)


def _too_deep(api: WireAPI, items: Any) -> list[Finding]:
    """Items nested deeper than the value boundary allows (or that contain themselves), replaced by None.

    JSON text cannot nest that deep, but Python values can, and every reader of a history walks it: such an
    item is left out (its place stays, so positions keep their meaning) with a finding that says so.
    """
    found = []
    if isinstance(items, list):
        for i, item in enumerate(items):
            if isinstance(item, Mapping | list | tuple) and not fits(item):
                items[i] = None
                found.append(Finding("malformed", f"{api.list_key}[{i}]", i,
                                     f"item {i} nests deeper than {MAX_DEPTH} levels or contains itself: left out"))
    return found


def from_openai_chat(messages: Sequence[Any], *, model: str | None = None, run_id: str | None = None,
                     ts: datetime | None = None) -> Imported:
    """Import a Chat Completions ``messages`` list (dicts or SDK objects; see its ``parse_history``).

    Example:
        >>> from_openai_chat([{"role": "user", "content": "Hi"}]).messages[0].text
        'Hi'
    """
    return read(WIRE_APIS["openai_chat"], messages, model=model, run_id=run_id, ts=ts)


def from_openai_responses(items: Sequence[Any], *, instructions: str | None = None, model: str | None = None,
                          run_id: str | None = None, ts: datetime | None = None) -> Imported:
    """Import a Responses ``input`` list, or ``input`` + ``output`` items joined (dicts or SDK objects).

    Example:
        >>> from_openai_responses([{"role": "user", "content": "Hi"}], instructions="Be brief.").messages[0].role
        'system'
    """
    return read(WIRE_APIS["openai_responses"], items, instructions, model=model, run_id=run_id, ts=ts)


def from_anthropic(messages: Sequence[Any], *, system: str | Sequence[Any] | None = None,
                   model: str | None = None, run_id: str | None = None, ts: datetime | None = None) -> Imported:
    """Import an Anthropic Messages ``messages`` list (with the separate ``system`` parameter if any).

    Example:
        >>> from_anthropic([{"role": "user", "content": "Hi"}], system="Be brief.").messages[1].text
        'Hi'
    """
    return read(WIRE_APIS["anthropic"], messages, system, model=model, run_id=run_id, ts=ts)


def from_gemini(contents: Sequence[Any], *, system_instruction: Any = None, model: str | None = None,
                run_id: str | None = None, ts: datetime | None = None) -> Imported:
    """Import a Gemini ``contents`` list (dicts or SDK objects; camelCase or snake_case keys).

    Example:
        >>> out = from_gemini([{"role": "user", "parts": [{"text": "Hi"}]}])
        >>> out.messages[0].role, out.ok
        ('user', True)
    """
    return read(WIRE_APIS["gemini"], contents, system_instruction, model=model, run_id=run_id, ts=ts)


__all__ = ["Imported", "from_anthropic", "from_gemini", "from_openai_chat", "from_openai_responses", "lint", "read",
           "transcript_of"]
