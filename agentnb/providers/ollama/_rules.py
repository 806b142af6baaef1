"""Lint rules for Ollama ``/api/chat`` histories (the shape check that runs before them is :mod:`._shapes`).

Theory of operation. The Ollama server decodes the body into Go structs, so a value of the wrong JSON type
(a ``content`` that is a number, ``arguments`` that are a string) is refused with a 400 naming the Go field
(``json: cannot unmarshal string into Go struct field ...``): those are *errors*. It does not check how
calls and results pair -- there are no call ids to check -- and renders whatever it gets into the model's
chat template. A result that answers no call, a call left without a result, or a ``tool_name`` naming no
call still reach the model, which then reads a conversation that makes no sense: those are *warnings*
(the emulator accepts them as the server does; ``anb.lint`` reports them, and ``fix=True`` repairs them).

Pairing follows the wire's binding rule (see :mod:`._adapter`): the run of ``tool`` messages right after an
assistant message with ``tool_calls`` answers those calls in order. :class:`OllamaView` turns positions into
ids and leaves the pairing itself to :func:`agentnb._pairing.pair`, as for the other wire APIs. So:

========================== ======== ============================================================== ========
code                       severity what                                                           fix
========================== ======== ============================================================== ========
``malformed``              error    a value of the wrong JSON type (:func:`.shapes.normalize`)     dropped
``bad_role``               warning  a role other than system, user, assistant, tool                --
``arguments_not_object``   error    a call's ``arguments`` are not a JSON object                   ``{}``
``tool_name_mismatch``     warning  a ``tool_name`` that names no call of the assistant message    renamed
``orphan_result``          warning  a tool message with no assistant call before it                dropped
``extra_result``           warning  more tool messages than the assistant message has calls        dropped
``unanswered_call``        warning  fewer tool messages than calls before the conversation goes on added
========================== ======== ============================================================== ========

A history that ends with calls (or with some of their results) is a pending turn, not an unanswered one.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any

from ..._findings import INTERRUPTED, Change, Finding, Rule, View, fix_arguments, not_object
from ..._pairing import Raw, Unit, pair
from ._shapes import kind as _kind

__all__ = ["RULES", "OllamaView"]

ROLES = ("system", "user", "assistant", "tool")


# -- the view: positions as ids, paired once ----------------------------------------------------------


class OllamaView(View):
    """An ``/api/chat`` body as the rules read it: positions turned into ids, then paired by :mod:`agentnb._pairing`.

    Binding is positional on this wire, so the view gives the ids the wire lacks: call ``k`` of the assistant
    message at ``i`` is ``i.k``, and the ``n``-th tool message of the run right after it answers ``i.n``
    (a tool message with no such run answers nothing: ``""``). Pairing them under the ``run`` placement rule
    finds what Chat Completions' rule finds for real ids.
    """

    list_key = "messages"

    @cached_property
    def units(self) -> list[Unit]:
        """Each message reduced to its calls and results, with positional ids."""
        units: list[Unit] = []
        owner, n = -1, 0  # the assistant message whose calls the current run of tool messages answers
        for i, m in enumerate(self.items):
            role = m.get("role")
            u = Unit(i, str(role))
            if role == "tool":
                rid = f"{owner}.{n}" if owner >= 0 else ""
                u.results.append((rid, str(m.get("tool_name") or ""), None, i))
                n += 1
            else:
                owner, n = -1, 0
                if role == "assistant" and m.get("tool_calls"):
                    owner = i
                    u.calls = [(f"{i}.{k}", str(tc["function"].get("name") or ""), k, i)
                               for k, tc in enumerate(m["tool_calls"])]
            units.append(u)
        return units

    @cached_property
    def raws(self) -> list[Raw]:
        """The pairing problems; calls still waiting at the end of the history are a pending turn, not one."""
        pending: set[str] = set()
        for u in reversed(self.units):
            pending.update(c[0] for c in u.calls)
            if u.role != "tool":
                break
        return [r for r in pair(self.units, "run") if not (r.code == "unanswered_call" and r.call_id in pending)]

    @cached_property
    def names(self) -> dict[str, str]:
        """Call id (``i.k``) -> the function's name."""
        return {c[0]: c[1] for u in self.units for c in u.calls}


def _bad_role(view: OllamaView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    if not m.get("malformed") and m.get("role") not in ROLES:
        yield Finding("bad_role", f"messages[{i}].role", i, f"role {m.get('role')!r} is not one of {', '.join(ROLES)}",
                      "", "warning")


def _arguments(view: OllamaView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    for j, tc in enumerate(m.get("tool_calls") or ()):
        args = tc["function"].get("arguments")
        if args is not None and not isinstance(args, dict):
            yield not_object(i, j, f"messages[{i}].tool_calls[{j}].function.arguments", args,
                             f"json: cannot unmarshal {_kind(args)} into Go struct field "
                             "ToolCallFunction.messages.tool_calls.function.arguments of type "
                             "api.ToolCallFunctionArguments", None)


def _mismatch(view: OllamaView) -> Iterator[Finding]:
    for u in view.units:
        for rid, given, _, i in u.results:
            owner = rid.partition(".")[0]
            names = {name for cid, name in view.names.items() if cid.partition(".")[0] == owner}
            if rid in view.names and given and given not in names:
                yield Finding("tool_name_mismatch", f"messages[{i}].tool_name", i,
                              f"tool_name {given!r} names no call of messages[{owner}] (at its place: "
                              f"{view.names[rid]!r})", "", "warning", call_id=rid)


def _pairing(view: OllamaView) -> Iterator[Finding]:
    for r in view.raws:
        if r.code == "unanswered_call":
            owner = r.call_id.partition(".")[0]
            yield Finding("unanswered_call", f"messages[{owner}].tool_calls[{r.part}]", r.unit,
                          f"call {r.part} ({r.name}) has no tool message before the conversation goes on", "",
                          "warning", part=r.part)
        elif r.code == "orphan_result" and r.call_id:
            owner = r.call_id.partition(".")[0]
            yield Finding("extra_result", f"messages[{r.unit}]", r.unit,
                          f"more tool messages than calls in messages[{owner}]: this one answers none", "", "warning")
        elif r.code == "orphan_result":
            yield Finding("orphan_result", f"messages[{r.unit}]", r.unit,
                          f"the tool message ({r.name or '?'}) follows no assistant message with tool_calls", "",
                          "warning")


# -- fixes (each acts on its own codes; in-place ones first, then the one that moves positions) ----------


def _fix_mismatch(items: list[Any], findings: list[Finding]) -> list[Change]:
    names = OllamaView({"messages": items}, None).names
    changes = []
    for f in findings:
        if f.code == "tool_name_mismatch" and f.call_id in names:
            items[f.index]["tool_name"] = names[f.call_id]
            changes.append(Change("replaced", f.position, f"tool_name by {names[f.call_id]!r}, the call at its place"))
    return changes


def _fix_pairing(items: list[Any], findings: list[Finding]) -> list[Change]:
    view = OllamaView({"messages": items}, None)
    drop = {r.unit for r in view.raws if r.code == "orphan_result"}
    add: dict[int, list[dict[str, Any]]] = {}  # insert before this index
    for r in view.raws:
        if r.code == "unanswered_call":
            end = int(r.call_id.partition(".")[0]) + 1
            while end < len(items) and items[end].get("role") == "tool":
                end += 1
            add.setdefault(end, []).append({"role": "tool", "content": INTERRUPTED, "tool_name": r.name})
    changes = [Change("dropped", f"messages[{i}]", "a tool message that answers no call") for i in sorted(drop)]
    out: list[Any] = []
    for i in range(len(items) + 1):
        for extra in add.get(i, ()):
            changes.append(Change("added", f"messages[{len(out)}]",
                                  f"an 'interrupted' tool message for {extra['tool_name']!r}"))
            out.append(extra)
        if i < len(items) and i not in drop:
            out.append(items[i])
    items[:] = out
    return changes


def _locate(items: list[Any], i: int, j: int | None) -> Any:
    return items[i]["tool_calls"][j or 0]["function"]


_USER = {"role": "user", "content": "What is 2 + 3?"}
_CALL = {"role": "assistant", "content": "",
         "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]}
_RESULT = {"role": "tool", "content": "5", "tool_name": "add"}

RULES: tuple[Rule, ...] = (
    Rule("bad_role", "a role Ollama's templates do not know (system, user, assistant, tool)", _bad_role, each=True,
         refuses={"model": "m", "messages": [{"role": "critic", "content": "x"}]},
         accepts={"model": "m", "messages": [_USER]}),
    Rule("arguments_not_object", "tool_calls[].function.arguments must be a JSON object (the server's Go struct "
         "refuses anything else)", _arguments, each=True, fix=fix_arguments(_locate, "arguments", {}),
         refuses={"model": "m", "messages": [_USER, {**_CALL, "tool_calls": [
             {"function": {"name": "add", "arguments": '{"a": 2}'}}]}, _RESULT]},
         accepts={"model": "m", "messages": [_USER, _CALL, _RESULT]}),
    Rule("tool_name_mismatch", "a tool message's tool_name names a call of the assistant message it answers",
         _mismatch, fix=_fix_mismatch,
         refuses={"model": "m", "messages": [_USER, _CALL, {**_RESULT, "tool_name": "sub"}]},
         accepts={"model": "m", "messages": [_USER, _CALL, _RESULT]}),
    # One pairing rule (agentnb._pairing, placement "run") and one fix for its family: it drops and adds tool
    # messages, which moves positions, so it runs after the in-place fixes.
    Rule("unanswered_call", "each call answered by one tool message in the run right after it, in order",
         _pairing, fix=_fix_pairing, moves=True, codes=("orphan_result", "extra_result", "unanswered_call"),
         refuses={"model": "m", "messages": [_USER, _CALL, _USER]},
         accepts={"model": "m", "messages": [_USER, _CALL, _RESULT, _USER]}),
)
"""The rules, in the order their findings are reported."""
