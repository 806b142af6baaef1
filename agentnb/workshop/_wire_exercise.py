"""The check of notebook 05: read one streamed Chat Completions turn from its raw chunks.

The student writes ``read_stream(chunks) -> (calls, may_run)``: from the chunks of one streamed turn (each
the JSON of one ``data:`` line, as a dict), the calls the model asked for -- ``{"id", "name", "arguments"}``
in the model's order, the arguments being the whole JSON text with its fragments joined -- and whether the
loop may run them. It is what every tool loop does under the hood, and what agentnb's
:func:`agentnb.providers.openai_chat.parse_stream` does:

- a call's ``id``, ``type`` and ``function.name`` come once, in the first delta for its
  ``tool_calls[].index``; later deltas for that index carry only argument fragments, which are joined in the
  order they arrive, by index (never "to the last call");
- the turn ends with the choice's ``finish_reason``; with ``stream_options.include_usage`` a last chunk has
  ``choices: []`` and the usage;
- the calls may run only when the stream finished (a ``finish_reason`` came), the turn was not cut by the
  output token limit (``length``) nor stopped by a content filter, the model did not refuse, and there is at
  least one call. Some OpenAI-compatible servers end a turn that calls tools with ``stop``: those calls run.

Theory of operation. Every check generates fresh streams from random specs (random ids in OpenAI's style,
tool names, argument objects whose strings hold braces, quotes, escapes and non-ASCII text, fragment sizes
from one character to the whole text), so neither a table of answers nor a parser that counts braces gets
through. The expected answer comes from the spec that made the stream, not from parsing it; a test checks
that agentnb's own parser reads every generated stream the same way. Streams come in two forms: the raw
wire JSON (absent fields are absent) and the ``openai`` SDK's ``chunk.model_dump()`` (absent fields are
``None``). Each group of streams is one property; the first wrong stream of a group is a FIX line whose kind
names the mistake (``by-id``, ``one-call``, ``first-fragment``, ``cut``, ``no-finish``, ``empty-choices``,
...), with graduated hints.

Example:
    >>> from agentnb import workshop
    >>> def read_stream(chunks):
    ...     calls, finish, refused = {}, None, False
    ...     for chunk in chunks:
    ...         for choice in chunk["choices"]:
    ...             delta = choice.get("delta") or {}
    ...             refused = refused or bool(delta.get("refusal"))
    ...             for d in delta.get("tool_calls") or []:
    ...                 call = calls.setdefault(d["index"], {"id": None, "name": None, "arguments": ""})
    ...                 fn = d.get("function") or {}
    ...                 call["id"] = d.get("id") or call["id"]
    ...                 call["name"] = fn.get("name") or call["name"]
    ...                 call["arguments"] += fn.get("arguments") or ""
    ...             finish = choice.get("finish_reason") or finish
    ...     ok = finish in ("tool_calls", "stop") and not refused and bool(calls)
    ...     return [calls[i] for i in sorted(calls)], ok
    >>> workshop.check("wire", read_stream).passed
    True
"""

from __future__ import annotations

import copy
import json
import random
import string
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import CheckTimeout
from ._common import TIMEOUT_HINTS, WORDS, Hints, is_placeholder, short, shown
from ._guard import Leash
from ._policy_budget import takes
from ._report import Report, describe_exception

__all__ = ["Stream", "check_wire", "make_streams"]

TOOL_NAMES = ("get_weather", "lookup_order", "create_refund", "search_docs", "send_email", "convert_currency")
"""Tool names the generated calls use."""

_TRICKY = ('{"a": 1}', "}", "{", '"quoted"', "back\\slash", "line\nbreak", "tab\there", "naïve café", "日本",
           "x}]}", "", " ")


@dataclass
class Stream:
    """One generated turn: its chunks, and what a right reader returns for them."""

    what: str
    """The property this stream belongs to (one report line per property)."""
    chunks: list[dict[str, Any]]
    calls: list[dict[str, str]]
    """The expected calls: ``{"id", "name", "arguments"}`` in the model's order."""
    may_run: bool
    how: str = ""
    """How it was drawn, for the FIX line (``3 calls, fragments of 1-5 characters, SDK form``)."""
    kind: str = ""
    """What this stream tests, for the diagnosis: ``cut``, ``no-finish``, ``answer``, ``stop-calls``, ..."""
    joined_all: str = field(default="")
    """Every argument fragment of the turn joined, as a reader that ignores the index would build it."""


# -- generating streams -----------------------------------------------------------------------------------


def _call_id(rng: random.Random) -> str:
    return "call_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(24))


def _value(rng: random.Random) -> Any:
    kind = rng.random()
    if kind < 0.45:
        return rng.choice(_TRICKY) + (" " + rng.choice(WORDS) if rng.random() < 0.5 else "")
    if kind < 0.65:
        return rng.randint(-10**6, 10**9)
    if kind < 0.75:
        return rng.choice((True, False, None))
    if kind < 0.9:
        return [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
    return {rng.choice(("city", "note", "tags")): rng.choice(_TRICKY)}


def _arguments(rng: random.Random) -> str:
    keys = rng.sample(("city", "order_id", "amount_cents", "query", "to", "body", "unit", "limit"), rng.randint(1, 4))
    text = json.dumps({k: _value(rng) for k in keys}, ensure_ascii=rng.random() < 0.3)
    return text if rng.random() < 0.5 else text.replace(", ", ",").replace(": ", ":")


def _pieces(rng: random.Random, text: str, lo: int, hi: int) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(lo, hi)
        out.append(text[i : i + n])
        i += n
    return out


def _packed(rng: random.Random, deltas: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The deltas in order, grouped 1 to 3 at a time, never two of one call in a group (at least one group of 2)."""
    groups: list[list[dict[str, Any]]] = []
    for d in deltas:
        index = d["tool_calls"][0]["index"]
        last = groups[-1] if groups else None
        if last is not None and len(last) < rng.choice((2, 2, 3)) and \
                all(e["tool_calls"][0]["index"] != index for e in last):
            last.append(d)
        else:
            groups.append([d])
    return groups


def _sdk_form(chunk: dict[str, Any]) -> dict[str, Any]:
    """A raw chunk as ``openai``'s ``ChatCompletionChunk.model_dump()`` gives it: every absent field is None."""
    out = {"id": None, "choices": [], "created": None, "model": None, "object": None, "service_tier": None,
           "system_fingerprint": None, "usage": None, **chunk}
    choices = []
    for c in chunk.get("choices", []):
        delta = {"content": None, "function_call": None, "refusal": None, "role": None, "tool_calls": None,
                 **c.get("delta", {})}
        if delta["tool_calls"] is not None:
            delta["tool_calls"] = [{"index": d["index"], "id": d.get("id"), "type": d.get("type"),
                                    "function": {"arguments": (d.get("function") or {}).get("arguments"),
                                                 "name": (d.get("function") or {}).get("name")}}
                                   for d in delta["tool_calls"]]
        choices.append({"delta": delta, "finish_reason": c.get("finish_reason"), "index": c.get("index", 0),
                        "logprobs": c.get("logprobs")})
    out["choices"] = choices
    return out


def _build(rng: random.Random, what: str, *, n_calls: int, text: str = "", refusal: str = "",
           finish: str | None = "tool_calls", usage: bool = False, interleave: bool = False, sdk: bool = False,
           cut: bool = False, lo: int = 1, hi: int = 12, kind: str = "", pack: bool = False) -> Stream:
    """One stream from a spec; ``cut`` truncates the last call's arguments (a max-tokens cut or a drop).

    ``pack``: consecutive deltas of different calls share one chunk, as several entries of its ``tool_calls``
    list (a server may send the opening deltas of parallel calls together, or fragments of several calls).
    """
    rid, created, model = "chatcmpl-" + "".join(rng.choice(string.ascii_letters) for _ in range(20)), \
        rng.randint(1_700_000_000, 1_900_000_000), rng.choice(("gpt-4.1", "gpt-4o-mini", "gpt-5-mini"))
    specs = [{"id": _call_id(rng), "name": rng.choice(TOOL_NAMES), "arguments": _arguments(rng)}
             for _ in range(n_calls)]
    if cut and specs:
        whole = specs[-1]["arguments"]
        specs[-1]["arguments"] = whole[: rng.randint(1, max(1, len(whole) - 2))]

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

    chunks = [chunk({"role": "assistant", "content": "" if text else None, "refusal": None})]
    chunks += [chunk({"content": p}) for p in _pieces(rng, text, 3, 15)]
    chunks += [chunk({"refusal": p}) for p in _pieces(rng, refusal, 3, 15)]
    # the deltas of each call: the first names it (and may carry the first fragment), the rest are fragments
    per_call: list[list[dict[str, Any]]] = []
    for i, s in enumerate(specs):
        frags = _pieces(rng, s["arguments"], lo, hi)
        first_frag = frags.pop(0) if frags and rng.random() < 0.4 else ""
        deltas = [{"tool_calls": [{"index": i, "id": s["id"], "type": "function",
                                   "function": {"name": s["name"], "arguments": first_frag}}]}]
        deltas += [{"tool_calls": [{"index": i, "function": {"arguments": f}}]} for f in frags]
        per_call.append(deltas)
    ordered: list[dict[str, Any]] = []
    if interleave:  # round robin over the calls after each first delta
        queues = [list(d) for d in per_call]
        while any(queues):
            for q in queues:
                if q:
                    ordered.append(q.pop(0))
    else:
        ordered = [d for deltas in per_call for d in deltas]
    if pack:
        chunks += [chunk({"tool_calls": [e for d in group for e in d["tool_calls"]]})
                   for group in _packed(rng, ordered)]
    else:
        chunks += [chunk(d) for d in ordered]
    if finish is not None:
        chunks.append(chunk({}, finish))
        if usage:
            p, c = rng.randint(20, 5000), rng.randint(5, 500)
            chunks.append({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [], "usage": {"prompt_tokens": p, "completion_tokens": c,
                                                    "total_tokens": p + c}})
    if sdk:
        chunks = [_sdk_form(c) for c in chunks]
    may_run = finish in ("tool_calls", "stop") and not refusal and bool(specs)
    joined = "".join(f for d in ordered for f in [d["tool_calls"][0]["function"]["arguments"]])
    how = [f"{n_calls} call{'s' if n_calls != 1 else ''}" if n_calls else "no call",
           f"finish_reason {finish!r}" if finish else "no finish_reason", f"fragments of {lo}-{hi} characters"]
    if text:
        how.append("text first")
    if usage:
        how.append("a usage chunk last")
    how.append("as chunk.model_dump() gives them" if sdk else "raw JSON")
    return Stream(what, chunks, specs, may_run, ", ".join(how), kind, joined)


def make_streams(rng: random.Random) -> list[Stream]:
    """The check's streams, one group per property (boundaries: 1 character per fragment, whole texts, no call)."""
    b = _build
    out = [b(rng, "one call, its arguments in fragments", n_calls=1, lo=lo, hi=hi)
           for lo, hi in ((1, 1), (2, 9), (50, 200))]
    out += [b(rng, "parallel calls: each its own id, name and arguments, in the model's order", n_calls=n, lo=1, hi=8,
              kind="parallel") for n in (2, rng.randint(3, 5))]
    out += [b(rng, "text before the calls", n_calls=rng.randint(1, 2), text=" ".join(rng.choices(WORDS, k=6)),
              kind="text")]
    out += [b(rng, "the SDK's form (chunk.model_dump(): fields not sent are None)", n_calls=rng.randint(2, 3), sdk=True,
              usage=rng.random() < 0.5, text=rng.choice(("", "Let me look.")), kind="sdk")]
    out += [b(rng, "a usage chunk last (choices: [])", n_calls=rng.randint(1, 3), usage=True, kind="usage")]
    out += [b(rng, "fragments of several calls interleaved: each joins the call of its index",
              n_calls=rng.randint(2, 4), interleave=True, lo=1, hi=6, kind="interleave")]
    out += [b(rng, "a max-tokens cut inside the arguments: nothing may run", n_calls=k, finish="length", cut=True,
              usage=rng.random() < 0.5, sdk=rng.random() < 0.5, kind="cut") for k in (1, rng.randint(2, 3))]
    out += [b(rng, "a stream that stopped before its finish_reason: nothing may run", n_calls=rng.randint(1, 3),
              finish=None, cut=rng.random() < 0.7, sdk=rng.random() < 0.5, kind="no-finish")]
    out += [b(rng, "an answer or a refusal: no call, nothing to run", n_calls=0, finish="stop",
              text=" ".join(rng.choices(WORDS, k=rng.randint(1, 9))), kind="answer"),
            b(rng, "an answer or a refusal: no call, nothing to run", n_calls=0, finish="stop",
              refusal="I can't help with that.", kind="answer")]
    out += [b(rng, "a compatible server that ends a call turn with 'stop': the calls run", n_calls=rng.randint(1, 2),
              finish="stop", kind="stop-calls")]
    out += [b(rng, "several calls' deltas in one chunk (tool_calls lists many entries): each joins its call",
              n_calls=n, interleave=True, pack=True, lo=1, hi=6, sdk=sdk, kind="packed")
            for n, sdk in ((2, False), (rng.randint(3, 5), rng.random() < 0.5))]
    out += [b(rng, "a turn stopped by the content filter: nothing may run", n_calls=rng.randint(1, 2),
              finish="content_filter", sdk=rng.random() < 0.5, kind="content-filter")]
    out += [b(rng, "a turn that refuses and calls too: nothing may run", n_calls=rng.randint(1, 2),
              refusal=rng.choice(("I can't help with that.", "I won't do that.")), sdk=rng.random() < 0.5,
              kind="refused-calls")]
    return out


# -- judging ----------------------------------------------------------------------------------------------

_FORM_HINTS: Hints = (
    "return two things: the list of calls and True/False, e.g. `return calls, may_run`",
    "calls is a list with one dict per call: {'id': ..., 'name': ..., 'arguments': '<the JSON text>'}, in the "
    "order of their index; may_run is a bool",
)


def _crash(exc: BaseException, stream: Stream) -> tuple[str, Hints, str]:
    text = describe_exception(exc)
    if isinstance(exc, IndexError) and stream.kind in ("usage", "sdk", "cut"):
        return (f"it raised {text} on a chunk with `choices: []`",
                ("the last chunk of a stream with usage has no choices: what does chunk['choices'][0] do then?",
                 "loop over chunk['choices'] (it may be empty) instead of taking its first element"), "empty-choices")
    if isinstance(exc, KeyError) and str(exc).strip("'") in ("id", "name", "type", "function"):
        return (f"it raised {text}",
                ("the id and the name come once, in the first delta of a call: later deltas do not repeat them",
                 "a delta without an id continues the call of its index: read d.get('id') and keep the one you "
                 "already have when it is missing"), "by-id")
    if isinstance(exc, KeyError) and str(exc).strip("'") in ("tool_calls", "content", "delta", "refusal"):
        return (f"it raised {text}",
                ("not every delta has every field: a text delta has no tool_calls, the last one is empty",
                 "read optional fields with delta.get('tool_calls') or []"), "missing-field")
    if isinstance(exc, TypeError) and "NoneType" in str(exc):
        return (f"it raised {text}",
                ("in the SDK's form a field that was not sent is there, with the value None",
                 "`(fn.get('arguments') or '')` and `(delta.get('tool_calls') or [])` treat None and absent "
                 "alike"), "none-fields")
    if isinstance(exc, json.JSONDecodeError | ValueError):
        return (f"it raised {text}",
                ("the arguments of a cut turn are not valid JSON: what should happen to a call that was cut?",
                 "return the text as it arrived; a cut turn is not run, so it never needs to be parsed"), "parse")
    return (f"it raised {text}", ("this came from your code; read the message above",
                                  "try your function on this stream: the check's report names how it was drawn"),
            "crash")


def _shape(out: Any) -> tuple[list[Any], Any] | None:
    if not isinstance(out, tuple | list) or len(out) != 2:
        return None
    calls, may_run = out
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        return None
    return calls, may_run


def _as_call(c: dict[str, Any]) -> dict[str, Any]:
    return {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}


def _compare_calls(got: list[dict[str, Any]], s: Stream) -> tuple[str, Hints, str] | None:
    want = s.calls
    mine = [_as_call(c) for c in got]
    if mine == want:
        return None
    if len(want) > 1 and len(mine) == 1:
        return (f"{len(want)} calls came back as 1 ({short(mine[0], 70)})",
                ("each call has its own index in tool_calls[]: how does your code tell the calls apart?",
                 "keep one entry per index; a fragment is added to the call of its own index"), "one-call")
    if len(mine) > len(want):
        return (f"{len(want)} call{'s' if len(want) != 1 else ''} came back as {len(mine)}",
                ("a new call starts only with a delta that carries an id and a name: what do the other deltas do?",
                 "a delta without an id is a fragment of the call of its index, not a new call"), "split")
    if len(mine) < len(want):
        asked = f"{len(want)} call{'s' if len(want) != 1 else ''}"
        return (f"the model asked for {asked}, your function returned {len(mine) or 'none'}",
                ("some calls went missing: do you read every entry of delta['tool_calls'], in every chunk?",
                 "a chunk's tool_calls is a list, and calls keep coming until the finish_reason"), "lost")
    for i, (g, w) in enumerate(zip(mine, want, strict=True)):
        if g["id"] != w["id"] or g["name"] != w["name"]:
            if g["id"] is None or g["name"] is None:
                return (f"call {i} has id {g['id']!r} and name {g['name']!r}; expected {w['id']!r}, {w['name']!r}",
                        ("the id and name came in the first delta: did a later delta overwrite them?",
                         "later deltas have no id and no name (or None in the SDK's form): keep the first ones"),
                        "id-lost")
            ids = [c["id"] for c in want]
            if g["id"] in ids:
                return (f"call {i} is {g['id']!r}; the model's call {i} is {w['id']!r}",
                        ("calls go back in the model's order: the order of their index",
                         "sort the calls by index (or keep a dict keyed by index and read it in index order)"),
                        "order")
            return (f"call {i}: got id {g['id']!r}, name {g['name']!r}; expected {w['id']!r}, {w['name']!r}",
                    ("read the id and the name from the first delta of each call",
                     "tool_calls[].id and tool_calls[].function.name, in the delta that opens the call"), "ids")
        if g["arguments"] != w["arguments"]:
            a, b = g["arguments"], w["arguments"]
            if not isinstance(a, str):
                return (f"call {i}'s arguments are {shown(a)}",
                        ("return the arguments as the text the model wrote, not parsed",
                         "join the fragments into one string; a cut call's text does not parse"), "type")
            if s.kind == "interleave" or (len(want) > 1 and a == s.joined_all):
                return (f"call {i}'s arguments are {short(a, 60)}; expected {short(b, 60)}",
                        ("each fragment belongs to the call of its index, even when calls take turns",
                         "add a fragment to the call whose index it carries, not to the last call opened"), "by-index")
            if b.endswith(a) and a != b:
                return (f"call {i}'s arguments lack their start: got {short(a, 50)}, expected {short(b, 50)}",
                        ("the delta that opens a call may already carry the first fragment",
                         "read function.arguments in every delta of the call, the first one too"), "first-fragment")
            return (f"call {i}'s arguments are {short(a, 60)}; expected {short(b, 60)}",
                    ("join the argument fragments in the order they arrive, without adding or dropping anything",
                     "fragments split the JSON anywhere, even inside a string: only join them"), "arguments")
    return None


_MAY_RUN_HINTS: dict[str, tuple[Hints, str]] = {
    "cut": (("the finish_reason says why the turn ended: what does 'length' mean for a call?",
             "'length' is the output token limit: the last call's arguments may be cut, so nothing in the turn "
             "runs (agentnb ends the run INCOMPLETE)"), "cut"),
    "no-finish": (("how do you know the turn is over? Look at the last chunk",
                   "a stream that ends before its finish_reason was cut off (a dropped connection): nothing runs"),
                  "no-finish"),
    "answer": (("there is nothing to run in this turn: look at what it holds",
                "with no call (an answer, or a refusal), may_run is False"), "no-calls"),
    "content-filter": (("this turn has calls, but how did it end? Look at its finish_reason",
                        "'content_filter' means the provider's filter stopped the turn: what it holds is not what the "
                        "model would have sent, so nothing in it runs"), "content-filter"),
    "refused-calls": (("this turn has calls, and something else too: read every field of its deltas",
                       "a delta's refusal field says the model refused: a turn that refuses runs none of its calls, "
                       "whatever else it holds"), "refused-calls"),
    "stop-calls": (("this turn has calls and finished: may they run?",
                    "some compatible servers end a turn with calls with 'stop' instead of 'tool_calls'; the calls "
                    "run all the same (only 'length', 'content_filter', a refusal or no finish_reason stop them)"),
                   "stop-calls"),
}


def _judge(s: Stream, out: Any) -> tuple[str, Hints, str] | None:
    shape = _shape(out)
    if shape is None:
        return f"returned {shown(out, 60)}", _FORM_HINTS, "shape"
    calls, may_run = shape
    wrong = _compare_calls(calls, s)
    if wrong is not None and s.kind == "packed" and wrong[2] not in ("type", "order"):
        return (wrong[0], ("a chunk here carries the deltas of several calls: how many entries does its tool_calls "
                           "list have, and how many do you read?", "delta['tool_calls'] is a list: loop over every "
                           "entry, each with its own index, not only tool_calls[0]"), "every-entry")
    if wrong is not None:
        return wrong
    if not isinstance(may_run, bool):
        return (f"may_run is {shown(may_run)}",
                ("may_run answers a yes/no question: what type is it?",
                 "return True or False (a comparison), not the finish_reason or the calls"), "type")
    if may_run == s.may_run:
        return None
    hints, kind = _MAY_RUN_HINTS.get(s.kind, (("these calls may run: the turn finished with calls",
                                                 "only 'length', 'content_filter', a refusal or no finish_reason "
                                                 "stop the calls of a turn"), "may-run"))
    return f"may_run is {may_run}, expected {s.may_run}", hints, kind


def check_wire(report: Report, read_stream: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 05: ``read_stream(chunks) -> (calls, may_run)`` for one streamed Chat Completions turn."""
    if is_placeholder(read_stream) or not callable(read_stream):
        got = "not written yet" if is_placeholder(read_stream) else f"got {shown(read_stream)}"
        report.fix("a function", got, "write `def read_stream(chunks): ...` returning (calls, may_run)",
                   kind="missing")
        return
    if not takes(read_stream, 1, report, "a function", "def read_stream(chunks)", "the list of chunks"):
        return
    streams = make_streams(rng)
    groups = list(dict.fromkeys(s.what for s in streams))
    for group in groups:
        mine = [s for s in streams if s.what == group]
        problem = None
        for s in mine:
            try:
                out = leash.call(read_stream, (copy.deepcopy(s.chunks),))
            except CheckTimeout as exc:
                report.fix(group, f"your function {exc} ({s.how})", TIMEOUT_HINTS, kind="timeout")
                return
            except Exception as exc:
                detail, hints, kind = _crash(exc, s)
                problem = (f"{detail} ({s.how})", hints, kind)
                break
            wrong = _judge(s, out)
            if wrong is not None:
                problem = (f"{wrong[0]} ({s.how})", wrong[1], wrong[2])
                break
        if problem is None:
            n = len(mine)
            report.ok(group, f"{n} random stream{'s' if n > 1 else ''}")
        else:
            report.fix(group, *problem[:2], kind=problem[2])
