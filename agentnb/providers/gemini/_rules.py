"""The lint rules of ``generateContent``: what the service refuses in ``contents``.

Each rule is a few lines over :class:`GeminiView`, which reduces the contents to calls and responses once
and merges consecutive contents of one role into one turn, as the service reads them (two model contents in
a row whose calls the next user content answers are accepted: recorded in ``tests/fixtures/conformance``).
A function call turn comes right after a user turn or a function response turn, and the next turn holds as
many responses as the call turn has calls, matched by id or by name
(https://ai.google.dev/gemini-api/docs/function-calling). Gemini 3 wants the first call of each step of
the current turn signed (https://ai.google.dev/gemini-api/docs/thought-signatures). Provider messages are
the service's own.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from ..._findings import INTERRUPTED, Change, Context, Finding, Rule, View, fix_arguments, not_object, short
from ..._pairing import Raw, Unit, merge_turns, pair

__all__ = ["GEMINI_PLACEHOLDER_SIGNATURES", "RULES", "GeminiView"]

GEMINI_PLACEHOLDER_SIGNATURES = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"})
"""The values Google documents for a client that has no real thought signature to send (histories from
another model, or edited by hand): the service then skips the validation
(https://ai.google.dev/gemini-api/docs/thought-signatures, "FAQs")."""


def _placeholder_forms() -> frozenset[str]:
    # ``thoughtSignature`` is bytes on the wire: the SDKs send ``thought_signature=b"skip_..."`` base64-encoded
    # (standard or URL-safe alphabet, padded or not), and the service accepts those as the placeholder too.
    forms = set(GEMINI_PLACEHOLDER_SIGNATURES)
    for p in GEMINI_PLACEHOLDER_SIGNATURES:
        for encoded in (base64.b64encode(p.encode()).decode(), base64.urlsafe_b64encode(p.encode()).decode()):
            forms.update((encoded, encoded.rstrip("=")))
    return frozenset(forms)


_PLACEHOLDERS = _placeholder_forms()

_COUNT = ("Please ensure that the number of function response parts is equal to the number of function call "
          "parts of the function call turn.")


def units_of(contents: list[Any]) -> list[Unit]:
    """Each content reduced to its calls and responses."""
    units = []
    for i, c in enumerate(contents):
        u = Unit(i, str(c.get("role") or "user"))
        for j, p in enumerate(c.get("parts") or ()):
            if "functionCall" in p:
                fc = p["functionCall"] or {}
                u.calls.append((fc.get("id") or "", fc.get("name") or "", j, i))
            elif "functionResponse" in p:
                fr = p["functionResponse"] or {}
                u.results.append((fr.get("id") or "", fr.get("name") or "", j, i))
            else:
                u.other = True
        units.append(u)
    return units


class GeminiView(View):
    """The contents as units, merged into turns; the role and turn findings (pairing reads where they are)."""

    list_key = "contents"

    @cached_property
    def units(self) -> list[Unit]:
        """Each content reduced to its calls and responses."""
        return units_of(self.items)

    @cached_property
    def turns(self) -> list[Unit]:
        """Consecutive contents of one role merged into one turn."""
        return merge_turns(self.units)

    @cached_property
    def raws(self) -> list[Raw]:
        """The pairing problems of the turns (id-less responses matched by name)."""
        return pair(self.turns, "next", by_name=True)

    @cached_property
    def role_findings(self) -> list[Finding]:
        """Contents whose role is not user or model."""
        return [Finding("system_not_first" if u.role == "system" else "bad_role", f"contents[{u.index}].role",
                        u.index, f"role {u.role!r} in contents (the system prompt goes in systemInstruction)",
                        "Please use a valid role: user, model.") for u in self.units if u.role not in ("user", "model")]

    @cached_property
    def turn_findings(self) -> list[Finding]:
        """Where call and response turns stand, and their counts."""
        out: list[Finding] = []
        for k, u in enumerate(self.turns):
            prev = self.turns[k - 1] if k else None
            nxt = self.turns[k + 1] if k + 1 < len(self.turns) else None
            out.extend(_misplaced(u, prev))
            out.extend(_stray_responses(self.turns, k, u, prev))
            out.extend(_unanswered(u, nxt))
        return out


def _misplaced(u: Unit, prev: Unit | None) -> Iterator[Finding]:
    if u.calls and prev is not None and prev.role != "user":
        yield Finding("call_misplaced", f"contents[{u.index}]", u.index,
                      "a function call turn must follow a user turn or a function response turn",
                      "Please ensure that function call turn comes immediately after a user turn or after a function "
                      "response turn.")


def _stray_responses(turns: list[Unit], k: int, u: Unit, prev: Unit | None) -> Iterator[Finding]:
    if u.results and (prev is None or not prev.calls):
        for rid, name, j, at in u.results:
            later = any((rid and c[0] == rid) or (not rid and c[1] == name) for x in turns[k + 1:] for c in x.calls)
            yield Finding("result_before_call" if later else "orphan_result", f"contents[{at}].parts[{j}]", at,
                          f"the function response for {name or rid!r} follows no function call turn",
                          "Please ensure that function response turn comes immediately after a function call turn.",
                          call_id=rid or None, part=j)
    elif u.results and prev is not None and len(u.results) != len(prev.calls):
        yield Finding("orphan_result" if len(u.results) > len(prev.calls) else "unanswered_call",
                      f"contents[{u.index}]", u.index,
                      f"{len(u.results)} function response(s) for {len(prev.calls)} call(s)", _COUNT)


def _unanswered(u: Unit, nxt: Unit | None) -> Iterator[Finding]:
    if u.calls and nxt is not None and not nxt.results:
        first = u.calls[0]
        yield Finding("unanswered_call", f"contents[{first[3]}]", first[3],
                      f"{len(u.calls)} call(s) with no function response turn after them", _COUNT,
                      call_id=first[0] or None, part=first[2])


def _roles(v: GeminiView) -> Iterator[Finding]:
    yield from v.role_findings


def _turns(v: GeminiView) -> Iterator[Finding]:
    yield from v.turn_findings


def _pairing(v: GeminiView) -> Iterator[Finding]:
    found = {f.index for f in (*v.role_findings, *v.turn_findings)}
    for r in v.raws:
        if r.code == "orphan_result" and r.unit not in found:
            found.add(r.unit)
            yield Finding(r.code, f"contents[{r.unit}].parts[{r.part}]", r.unit,
                          f"the function response {r.call_id or r.name!r} matches no call of the call turn",
                          f"Function response for `{r.name}` does not match any function call of the function call "
                          "turn.", call_id=r.call_id or None, part=r.part)
        elif r.code == "duplicate_call_id":
            found.add(r.unit)
            yield Finding(r.code, f"contents[{r.unit}].parts[{r.part}]", r.unit,
                          f"function call id {r.call_id!r} was already used",
                          f"Duplicate function call id {r.call_id}.",
                          "warning", r.call_id, part=r.part)


def _arguments(v: GeminiView) -> Iterator[Finding]:
    for i, c in enumerate(v.items):
        for j, p in enumerate(c.get("parts") or () if c.get("role") == "model" else ()):
            fc = p.get("functionCall")
            if isinstance(fc, dict) and "args" in fc and fc["args"] is not None and not isinstance(fc["args"], dict):
                yield not_object(i, j, f"contents[{i}].parts[{j}].functionCall.args", fc["args"],
                                 f"Invalid value at 'contents[{i}].parts[{j}].function_call.args' "
                                 f"(type.googleapis.com/google.protobuf.Struct), {short(fc['args'])}",
                                 fc.get("id") or None)


def _turn_start(contents: list[Any]) -> int:
    """The current turn starts after the last user content holding text."""
    start = 0
    for i, c in enumerate(contents):
        if (c.get("role") or "user") == "user" and any("text" in p for p in c.get("parts") or ()):
            start = i + 1
    return start


def _signatures(v: GeminiView) -> Iterator[Finding]:
    ctx = v.ctx
    required = ctx.require_thought_signatures if ctx is not None else None
    if required is None:
        required = str(v.body.get("model") or "").split("/")[-1].startswith("gemini-3")
    verify = ctx.verify if ctx is not None else None
    start = _turn_start(v.items)
    for i, c in enumerate(v.items):
        if c.get("role") != "model":
            continue
        calls = [j for j, p in enumerate(c.get("parts") or ()) if "functionCall" in p]
        for j, p in enumerate(c.get("parts") or ()):
            if calls and j == calls[0] and required and i >= start and not p.get("thoughtSignature"):
                yield _unsigned(i, j, (p["functionCall"] or {}).get("name"))
            sig = p.get("thoughtSignature")
            if sig and not (sig in _PLACEHOLDERS or verify is None or verify("thought", sig, "")):
                yield Finding("invalid_signature", f"contents[{i}].parts[{j}]", i,
                              "this thoughtSignature was not issued for this conversation",
                              "Corrupted thought signature.", part=j)


def _unsigned(i: int, j: int, name: Any) -> Finding:
    return Finding(
        "missing_signature", f"contents[{i}].parts[{j}]", i,
        f"the first function call of this step ({name}) needs the thoughtSignature it came with",
        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
        "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
        f"function call `default_api:{name}` , position {i + 1}. Please refer to "
        "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", part=j)


def _fix_pairing(contents: list[Any], findings: list[Finding]) -> list[Change]:
    """Drop response turns that follow no call turn; answer unanswered calls with "interrupted" error responses."""
    changes: list[Change] = []
    units = merge_turns(units_of(contents))
    for k in range(len(units) - 1, -1, -1):
        u = units[k]
        nxt = units[k + 1] if k + 1 < len(units) else None
        if u.results and (k == 0 or not units[k - 1].calls):
            changes.extend(_drop_responses(contents, u))
        if u.calls and (nxt is None or len(nxt.results) < len(u.calls)):
            changes.extend(_answer(contents, u, nxt))
    return changes


def _drop_responses(contents: list[Any], u: Unit) -> list[Change]:
    changes = []
    for _, name, j, at in reversed(u.results):
        changes.append(Change("dropped", f"contents[{at}].parts[{j}]", f"orphan function response {name!r}"))
        del contents[at]["parts"][j or 0]
        if not contents[at]["parts"]:
            del contents[at]
    return changes


def _answer(contents: list[Any], u: Unit, nxt: Unit | None) -> list[Change]:
    missing = list(u.calls)
    for _, name, _, _ in nxt.results if nxt else []:
        hit = next((c for c in missing if c[1] == name), None)
        if hit is not None:
            missing.remove(hit)
    parts = [{"functionResponse": {"name": name, "response": {"error": INTERRUPTED}, **({"id": cid} if cid else {})}}
             for cid, name, _, _ in missing]
    if nxt is not None and nxt.results:
        last = nxt.results[-1]
        contents[last[3]]["parts"][(last[2] or 0) + 1:(last[2] or 0) + 1] = parts
    else:
        contents.insert(u.last + 1, {"role": "user", "parts": parts})
    return [Change("added", f"contents[{u.last + 1}]",
                   f"an 'interrupted' function response for {p['functionResponse']['name']!r}") for p in parts]


# -- examples: a request each rule refuses, and the same request made right (the conformance suite runs them) --

_USER = {"role": "user", "parts": [{"text": "Add 1 and 2"}]}
_CALL = {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {"a": 1, "b": 2}},
                                     "thoughtSignature": "good"}]}
_ANSWER = {"role": "user", "parts": [{"functionResponse": {"name": "add", "response": {"output": 3}}}]}


def _contents(*contents: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"contents": list(contents), **body}


RULES = (
    Rule("bad_role", "roles are user and model (the system prompt goes in systemInstruction)", _roles,
         codes=("bad_role", "system_not_first"), refuses=_contents({"role": "system", "parts": [{"text": "x"}]}, _USER),
         accepts=_contents(_USER, systemInstruction={"parts": [{"text": "x"}]})),
    Rule("call_misplaced", "a call turn after a user or response turn; as many responses as calls", _turns,
         fix=_fix_pairing, moves=True,
         codes=("call_misplaced", "orphan_result", "result_before_call", "unanswered_call"),
         refuses=_contents(_USER, _CALL, _USER), accepts=_contents(_USER, _CALL, _ANSWER)),
    Rule("orphan_result", "each response matches a call of the call turn (by id, else by name)", _pairing,
         codes=("orphan_result", "duplicate_call_id"),
         refuses=_contents(_USER, _CALL, {"role": "user", "parts": [
             {"functionResponse": {"name": "mul", "response": {"output": 2}}}]}),
         accepts=_contents(_USER, _CALL, _ANSWER)),
    Rule("arguments_not_object", "functionCall.args must be an object", _arguments,
         fix=fix_arguments(lambda items, i, j: items[i]["parts"][j or 0]["functionCall"], "args", {}),
         refuses=_contents(_USER, {"role": "model", "parts": [{"functionCall": {"name": "add", "args": [1, 2]}}]},
                           _ANSWER),
         accepts=_contents(_USER, _CALL, _ANSWER)),
    Rule("missing_signature", "Gemini 3: the first call of each step of the current turn is signed; with the "
         "emulator's context, signatures it issued (placeholders accepted)", _signatures,
         codes=("missing_signature", "invalid_signature"),
         refuses=_contents(_USER, {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {}}}]},
                           _ANSWER, model="gemini-3-pro-preview"),
         accepts=_contents(_USER, _CALL, _ANSWER, model="gemini-3-pro-preview"),
         context=Context(verify=lambda kind, value, content: value == "good")),
)
