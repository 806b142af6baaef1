"""Which result answers which call: the one place agentnb pairs tool calls with their results.

Theory of operation. Every wire API links a result to its call (by id, or, on Gemini, by name and order),
and each places the results somewhere of its own: the run of ``tool`` messages right after the call (Chat
Completions), the very next message (Anthropic, Gemini), any later item (Responses). Canonical histories
(:mod:`agentnb._messages`) link by ``call_id``. Four parts of agentnb ask the same question of a history --
the lint rules, the importers' structural check, the compression guard (:func:`agentnb._engine.guards.prune` keeps
whole turns only) and the run's history completion (:func:`agentnb._driver.history.complete_history`) -- and all ask it
here:

- :func:`pair` works on :class:`Unit` records, a history of any wire shape reduced to the calls and results
  of each message, under a placement rule (``run``, ``next``, ``anywhere``); it returns the raw problems
  (:class:`Raw`) each API's rules turn into findings in that service's words;
- :func:`check` is the canonical form of the same rule for :class:`~agentnb._messages.Message` lists
  (``anywhere`` placement, ids only), with findings;
- :func:`answered_turns` and :func:`unanswered_calls` are the two questions the guards and the run ask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._findings import Finding
from ._messages import Message, ToolCallPart, ToolResultPart

__all__ = ["Raw", "Unit", "answered_turns", "check", "merge_turns", "pair", "unanswered_calls"]

Slot = Literal["run", "next", "anywhere"]

CallRef = tuple[str, str, "int | None", int]
"""A call or a result in a unit: (id, name, part index, message index)."""


@dataclass(slots=True)
class Unit:
    """One message of any wire shape, reduced to what pairing needs."""

    index: int
    role: str
    calls: list[tuple[str, str, int | None, int]] = field(default_factory=list)
    """(id, name, part index, message index)."""
    results: list[tuple[str, str, int | None, int]] = field(default_factory=list)
    first_result: int = 0
    """How many parts come before the first result (Anthropic wants 0)."""
    other: bool = False
    """Holds something besides results (text, images)."""
    n_other: int = 0
    """How many parts are not results."""
    last: int = -1
    """The index of the last message of a merged turn (see :func:`merge_turns`); -1: ``index``."""

    def __post_init__(self) -> None:
        if self.last < 0:
            self.last = self.index


def merge_turns(units: list[Unit]) -> list[Unit]:
    """Consecutive messages of one role as one turn, as Anthropic and Gemini read them.

    Both services join consecutive same-role messages before checking a history: two assistant messages in
    a row whose calls the next user message answers are accepted (recorded in the conformance corpus,
    ``tests/fixtures/conformance``), and Anthropic documents that "consecutive user or assistant turns in
    your request will be combined into a single turn" (https://docs.anthropic.com/en/api/messages).
    """
    out: list[Unit] = []
    for u in units:
        if out and out[-1].role == u.role:
            m = out[-1]
            if u.results and not m.results:
                m.first_result = m.n_other + u.first_result
            m.calls.extend(u.calls)
            m.results.extend(u.results)
            m.other = m.other or u.other
            m.n_other += u.n_other
            m.last = u.last
        else:
            out.append(Unit(u.index, u.role, list(u.calls), list(u.results), u.first_result, u.other, u.n_other,
                            u.last))
    return out


@dataclass(slots=True)
class Raw:
    """A pairing problem before an API words it: its code, where, and the call concerned."""

    code: str
    unit: int
    part: int | None
    call_id: str
    name: str = ""


class _Pairing:
    """The state of one :func:`pair` pass (kept in an object so each step is a small method)."""

    def __init__(self, units: list[Unit], slot: Slot, by_name: bool) -> None:
        self.slot = slot
        self.by_name = by_name
        self.out: list[Raw] = []
        self.issued_at: dict[str, int] = {}
        for u in units:
            for cid, _, _, at in u.calls:
                if cid:
                    self.issued_at.setdefault(cid, at)
        self.seen_calls: set[str] = set()
        self.answered: set[str] = set()
        self.waiting: list[tuple[tuple[str, str, int | None, int], str]] = []
        self.owner: int | None = None  # list position of the message whose calls are waiting

    def flush(self) -> None:
        for c, k in self.waiting:
            if k not in self.answered:
                self.out.append(Raw("unanswered_call", c[3], c[2], c[0], c[1]))
        self.waiting.clear()

    def in_slot(self, pos: int, u: Unit) -> bool:
        if self.slot == "next":
            return self.owner is not None and pos == self.owner + 1
        if self.slot == "run":
            return self.owner is not None and u.role == "tool"
        return True

    def results(self, u: Unit, in_slot: bool) -> None:
        open_keys = {k: c for c, k in self.waiting if k not in self.answered} if in_slot else {}
        by_names: dict[str, list[str]] = {}
        by_ids: dict[str, str] = {}  # a reused call id is waiting under its own key (see calls())
        for k, c in open_keys.items():
            by_names.setdefault(c[1], []).append(k)
            if c[0]:
                by_ids.setdefault(c[0], k)
        for rid, rname, j, at in u.results:
            key = by_ids.get(rid, rid) if rid else f"name:{rname}"
            if key not in open_keys and self.by_name and by_names.get(rname):
                key = by_names[rname].pop(0)
            if key in open_keys and key not in self.answered:
                self.answered.add(key)
            elif rid and rid in self.answered:
                self.out.append(Raw("duplicate_result", at, j, rid, rname))
            elif rid and self.issued_at.get(rid, -1) > at:
                self.out.append(Raw("result_before_call", at, j, rid, rname))
            else:
                self.out.append(Raw("orphan_result", at, j, rid, rname))

    def calls(self, pos: int, u: Unit) -> None:
        if self.slot != "anywhere":
            self.flush()
        for n, c in enumerate(u.calls):
            if c[0] and c[0] in self.seen_calls:
                # Reported once, as the reuse it is. An id reused from an earlier message (a replay from a
                # provider that numbers calls per turn) still waits for its own result, so the result right
                # after it is not also reported as a second answer to the first call; twice in one message,
                # no result can tell the two apart.
                self.out.append(Raw("duplicate_call_id", c[3], c[2], c[0], c[1]))
                if all(c[0] != other[0] for other in u.calls[:n]):
                    self.waiting.append((c, f"{c[0]}#{u.index}.{n}"))
                continue
            if c[0]:
                self.seen_calls.add(c[0])
            self.waiting.append((c, c[0] or f"name:{c[1]}#{u.index}.{n}"))
        self.owner = pos


def pair(units: list[Unit], slot: Slot, by_name: bool = False) -> list[Raw]:
    """Calls and results paired by the provider's placement rule; the problems found, in history order.

    ``run``: the results are the run of ``tool`` messages right after the call (Chat); ``next``: the results
    are in the very next message (Anthropic, Gemini); ``anywhere``: any later item (Responses). ``by_name``
    matches Gemini's id-less responses to calls by name.

    Example:
        >>> units = [Unit(0, "assistant", calls=[("c1", "f", 0, 0)]), Unit(1, "tool", results=[("c9", "", None, 1)])]
        >>> [(r.code, r.call_id) for r in pair(units, "run")]
        [('orphan_result', 'c9'), ('unanswered_call', 'c1')]
    """
    p = _Pairing(units, slot, by_name)
    for pos, u in enumerate(units):
        in_slot = p.in_slot(pos, u)
        if not in_slot and slot != "anywhere":
            p.flush()
            p.owner = None
        p.results(u, in_slot)
        if u.calls:
            p.calls(pos, u)
    p.flush()
    return p.out


# -- canonical histories ------------------------------------------------------------------------------------


def check(messages: Sequence[Message], sources: Sequence[Sequence[int]] | None = None, *,
          where: str = "") -> list[Finding]:
    """Pairing findings on a canonical conversation: ids unique, every result after its call, every call answered.

    A call in the last message with no answer yet is only a warning (the history ends with it). Positions
    are message indices, or the input positions in ``sources`` (one per part of each message, -1 for none).

    Example:
        >>> orphan = ToolResultPart(call_id="x", name="f", status="ok", content="")
        >>> [(f.code, f.index, f.position) for f in check([Message(role="tool", parts=(orphan,))])]
        [('orphan_result', 0, '[0]')]
    """
    if sources is None:
        sources = [[k] * len(m.parts) for k, m in enumerate(messages)]
    out: list[Finding] = []
    calls: dict[str, tuple[int, int]] = {}
    answered: set[str] = set()
    all_calls = {p.call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    for k, m in enumerate(messages):
        for j, p in enumerate(m.parts):
            pos = sources[k][j]
            at = f"{where}[{pos}]" if pos >= 0 else where
            if isinstance(p, ToolCallPart):
                if p.call_id in calls:
                    out.append(Finding("duplicate_call_id", at, pos, f"call id {p.call_id!r} is used twice"))
                    answered.discard(p.call_id)  # the next result with that id answers this call, not the first
                calls[p.call_id] = (k, pos)
            elif isinstance(p, ToolResultPart):
                found = _result_problem(p.call_id, answered, all_calls, calls)
                if found is not None:
                    out.append(Finding(found[0], at, pos, found[1], call_id=p.call_id))
                answered.add(p.call_id)
    for cid, (k, pos) in calls.items():
        if cid not in answered:
            pending = k == len(messages) - 1
            out.append(Finding("unanswered_call", f"{where}[{pos}]", pos,
                               f"call {cid!r} has no result" + (" yet (the history ends with it)" if pending else ""),
                               severity="warning" if pending else "error", call_id=cid))
    return out


def _result_problem(cid: str, answered: set[str], all_calls: set[str],
                    issued: dict[str, tuple[int, int]]) -> tuple[str, str] | None:
    if cid in answered:
        return "duplicate_result", f"call {cid!r} is answered twice"
    if cid not in all_calls:
        return "orphan_result", f"result for call {cid!r}, which no message asks for"
    if cid not in issued:
        return "result_before_call", f"result for call {cid!r} comes before the call"
    return None


def answered_turns(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """(call message, result message) index pairs: an assistant message whose calls the next message answers, all.

    Example:
        >>> call = Message(role="assistant", parts=(ToolCallPart(call_id="c", name="f", arguments_raw="{}"),))
        >>> result = Message(role="tool", parts=(ToolResultPart(call_id="c", name="f", status="ok", content=""),))
        >>> answered_turns([Message.user("hi"), call, result])
        [(1, 2)]
    """
    pairs: list[tuple[int, int]] = []
    for i in range(len(messages) - 1):
        a, b = messages[i], messages[i + 1]
        if a.role == "assistant" and a.tool_calls and b.role == "tool":
            if {c.call_id for c in a.tool_calls} == {r.call_id for r in b.tool_results}:
                pairs.append((i, i + 1))
    return pairs


def unanswered_calls(messages: Sequence[Message]) -> tuple[int, list[ToolCallPart]]:
    """The last assistant message with calls, and those of its calls no message answers ((-1, []) if none)."""
    answered = {r.call_id for m in messages for r in m.tool_results}
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "assistant" and m.tool_calls:
            return i, [c for c in m.tool_calls if c.call_id not in answered]
    return -1, []
