"""The conformance corpus (tests/fixtures/conformance, see its README.md): recorded requests and answers.

Each line of ``<api>.jsonl`` is one HTTP exchange with a real service, recorded by a public client's test
suite: the request body as sent, the status the service answered, and its answer (a JSON body, or the raw
text of a stream). This module reads the corpus and measures agentnb against it, so the test
(``tests/test_conformance.py``) and the report (``bench/conformance.py``) share one definition of
"agrees with the service":

- an accepted request (2xx) lints with no error and gets a 2xx from the emulator;
- a refused request whose cause is a history rule is flagged with the matching code (``REFUSED``
  says which are in scope and why the others are not);
- every recorded answer parses with the function calls its raw body holds.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "fixtures" / "conformance"
APIS = ("openai_chat", "openai_responses", "anthropic", "gemini")

REFUSED: dict[str, str | None] = {
    # id -> the finding code that must flag it, or None: the cause is outside a history linter's scope.
    "openai_chat-0005": None,  # audio parts in a tool message: a content-type rule, not a history rule
    "openai_chat-0012": None,
    "openai_chat-0015": None,
    "openai_chat-0018": None,
    "openai_chat-0022": None,
    "openai_chat-0025": None,
    "openai_chat-0059": None,  # o1-mini refuses system/developer roles: a per-model capability
    "openai_chat-0060": None,
    "openai_chat-0070": None,  # web_search_options on a model without it: a capability
    "openai_responses-0018": None,  # audio files: a content-type rule
    "openai_responses-0021": None,
    "openai_responses-0028": None,
    "openai_responses-0031": None,
    "openai_responses-0116": None,  # temperature -1: a parameter range
    "openai_responses-0168": "missing_reasoning",  # a reasoning item followed by an edited message
    "anthropic-0070": None,  # an effort level the model does not support: a capability
    "gemini-0131": None,  # a URL the service may not fetch (robots.txt)
    "gemini-0203": None,
    "gemini-0288": None,
}


@dataclass(slots=True)
class Item:
    """One recorded exchange."""

    id: str
    api: str
    source: dict[str, Any]
    status: int
    request: dict[str, Any]
    model: str | None = None
    stream: bool = False
    response: Any = None
    response_text: str | None = None

    @property
    def accepted(self) -> bool:
        """Whether the service answered 2xx."""
        return 200 <= self.status < 300

    def body(self) -> dict[str, Any]:
        """The request body as the linter sees it (Gemini's model comes from the URL)."""
        body = json.loads(json.dumps(self.request))
        if self.api == "gemini" and self.model:
            body.setdefault("model", self.model)
        return body


def load(api: str, corpus: Path = CORPUS) -> list[Item]:
    """Every recorded exchange of ``api``."""
    out = []
    for line in (corpus / f"{api}.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        out.append(Item(id=d["id"], api=api, source=d["source"], status=d["status"], request=d["request"],
                        model=d.get("model"), stream=bool(d.get("stream")), response=d.get("response"),
                        response_text=d.get("response_text")))
    return out


def lint_errors(item: Item) -> list[str]:
    """The codes of the errors ``anb.lint`` reports for the request (``crash:<type>`` if it raised)."""
    from agentnb._lint import lint

    try:
        findings = lint(item.body(), item.api)
    except Exception as exc:  # measured, not hidden: a crash counts as a disagreement
        return [f"crash:{type(exc).__name__}"]
    return [f.code for f in findings if f.severity == "error"]


def emulator_path(item: Item) -> str:
    """The emulator route for the item's API."""
    if item.api == "openai_chat":
        return "/openai/v1/chat/completions"
    if item.api == "openai_responses":
        return "/openai/v1/responses"
    if item.api == "anthropic":
        return "/anthropic/v1/messages"
    method = "streamGenerateContent?alt=sse" if item.stream else "generateContent"
    return f"/gemini/v1beta/models/{item.model}:{method}"


def emulator_status(emu: Any, item: Item) -> tuple[int, str]:
    """The status and body the emulator answers the recorded request with."""
    emu.play([{"text": "ok"}])
    data = json.dumps(item.request).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{emu.port}{emulator_path(item)}", data=data, method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


# -- the calls a raw answer holds, read without the adapters ---------------------------------------------


def _sse_data(text: str) -> Iterator[Any]:
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:"))
        if data and data.strip() != "[DONE]":
            try:
                yield json.loads(data)
            except ValueError:
                continue


def raw_calls(item: Item) -> list[tuple[str, str, Any]] | None:  # noqa: C901 -- one reader per wire API
    """(call id, name, arguments) of the function calls in the recorded answer; None if there is none."""
    if item.response is None and item.response_text is None:
        return None
    out: list[tuple[str, str, Any]] = []
    if item.response_text is None:
        r = item.response
        if not isinstance(r, dict) or "error" in r:
            return None
        if item.api == "openai_chat":
            for ch in r.get("choices") or ()[:1]:
                for tc in (ch.get("message") or {}).get("tool_calls") or ():
                    fn = tc.get("function") or {}
                    out.append((tc.get("id") or "", fn.get("name") or "", json.loads(fn.get("arguments") or "{}")))
                break
        elif item.api == "openai_responses":
            for it in r.get("output") or ():
                if it.get("type") == "function_call":
                    out.append((it.get("call_id") or "", it.get("name") or "", json.loads(it.get("arguments") or "{}")))
        elif item.api == "anthropic":
            for b in r.get("content") or ():
                if b.get("type") == "tool_use":
                    out.append((b.get("id") or "", b.get("name") or "", b.get("input")))
        else:
            for cand in (r.get("candidates") or ())[:1]:
                for p in (cand.get("content") or {}).get("parts") or ():
                    fc = p.get("functionCall") or p.get("function_call")
                    if fc:
                        out.append((fc.get("id") or "", fc.get("name") or "", fc.get("args") or {}))
        return out
    events = list(_sse_data(item.response_text))
    if item.api == "openai_chat":
        calls: dict[int, list[Any]] = {}
        for ev in events:
            for ch in ev.get("choices") or ():
                for tc in (ch.get("delta") or {}).get("tool_calls") or ():
                    c = calls.setdefault(tc.get("index", 0), ["", "", ""])
                    c[0] = c[0] or tc.get("id") or ""
                    c[1] = c[1] or (tc.get("function") or {}).get("name") or ""
                    c[2] += (tc.get("function") or {}).get("arguments") or ""
        return [(c[0], c[1], json.loads(c[2] or "{}")) for _, c in sorted(calls.items())]
    if item.api == "openai_responses":
        done = [ev for ev in events if ev.get("type") == "response.completed"]
        if not done:
            return None
        return [(it["call_id"], it["name"], json.loads(it.get("arguments") or "{}"))
                for it in done[-1]["response"].get("output") or () if it.get("type") == "function_call"]
    if item.api == "anthropic":
        blocks: dict[int, list[Any]] = {}
        for ev in events:
            if ev.get("type") == "content_block_start" and ev["content_block"].get("type") == "tool_use":
                blocks[ev["index"]] = [ev["content_block"]["id"], ev["content_block"]["name"], ""]
            elif ev.get("type") == "content_block_delta" and ev["index"] in blocks:
                blocks[ev["index"]][2] += ev["delta"].get("partial_json") or ""
        return [(c[0], c[1], json.loads(c[2] or "{}")) for _, c in sorted(blocks.items())]
    for ev in events:
        for cand in (ev.get("candidates") or ())[:1]:
            for p in (cand.get("content") or {}).get("parts") or ():
                fc = p.get("functionCall")
                if fc:
                    out.append((fc.get("id") or "", fc.get("name") or "", fc.get("args") or {}))
    return out


def parsed_calls(item: Item) -> list[tuple[str, str, Any]]:
    """(call id, name, arguments) of the calls agentnb's adapter reads from the recorded answer."""
    from agentnb._messages import ModelTurn
    from agentnb.providers import anthropic, gemini, openai_chat, openai_responses
    from agentnb.providers._sse import iter_sse_json

    adapter: Any = {"openai_chat": openai_chat, "openai_responses": openai_responses, "anthropic": anthropic,
                    "gemini": gemini}[item.api]
    if item.response_text is None:
        turn = adapter.parse_response(item.response)
    else:
        *_, turn = adapter.parse_stream(iter_sse_json([item.response_text.encode()]))
    assert isinstance(turn, ModelTurn)
    return [(c.call_id, c.name, c.arguments) for c in turn.message.tool_calls]


@dataclass(slots=True)
class Tally:
    """The figures of one wire API."""

    accepted: int = 0
    accepted_clean: int = 0
    refused: int = 0
    in_scope: int = 0
    flagged: int = 0
    emulator_agrees: int = 0
    emulator_total: int = 0
    emulator_5xx: int = 0
    responses: int = 0
    responses_agree: int = 0
    disagreements: list[str] = field(default_factory=list)


def measure(api: str, emu: Any, corpus: Path = CORPUS) -> Tally:
    """Lint, emulate and parse every item of ``api``; the disagreements name the item and what differed."""
    t = Tally()
    for item in load(api, corpus):
        errors = lint_errors(item)
        if item.accepted:
            t.accepted += 1
            if errors:
                t.disagreements.append(f"{item.id} accepted by the service, lint errors {errors}")
            else:
                t.accepted_clean += 1
        else:
            t.refused += 1
            code = REFUSED.get(item.id)
            if code is not None:
                t.in_scope += 1
                if code in errors:
                    t.flagged += 1
                else:
                    t.disagreements.append(f"{item.id} refused by the service ({code}), lint errors {errors}")
        if emu is not None and (item.accepted or REFUSED.get(item.id)):
            t.emulator_total += 1
            status, text = emulator_status(emu, item)
            t.emulator_5xx += status >= 500
            if (200 <= status < 300) == item.accepted:
                t.emulator_agrees += 1
            else:
                t.disagreements.append(f"{item.id} service {item.status}, emulator {status}: {text[:200]}")
        if item.accepted:
            want = raw_calls(item)
            if want is not None:
                t.responses += 1
                try:
                    got = parsed_calls(item)
                except Exception as exc:
                    got = [("crash", type(exc).__name__, str(exc)[:100])]
                if got == want or [(n, a) for _, n, a in got] == [(n, a) for _, n, a in want] and item.api == "gemini":
                    t.responses_agree += 1
                else:
                    t.disagreements.append(f"{item.id} response calls {got} != raw {want}")
    return t
