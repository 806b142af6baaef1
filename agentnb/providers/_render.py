"""A conversation rendered once per message: what a wire adapter keeps between the requests of one run.

Theory of operation. Every turn sends the whole conversation. Rendered afresh, every message is rendered again
on every turn and a run's rendering grows with the square of its length (2 to 6 µs a message and turn, 15 to
35 ms a turn at 6,000 messages, by wire API: ``bench/render.py``). So each adapter renders through a
:class:`Renders`: the messages it rendered last, each one's rendering (its *unit*), where each unit starts in
the wire list, and that list.
The run's model port hands each request the same ``renders`` dict (``ModelRequest.renders``), in which each
adapter keeps its own :class:`Renders` under its name; the next request's conversation is compared with the
last one, by identity only (an equal message that is another object is rendered again):

- the same list, grown at its end: agentnb appends to a run's history and replaces it whole on compression,
  forks and resumes, never edits it in place (:class:`~agentnb._request.HistoryView`), so only the new messages
  are rendered, and the check costs the same at 10 messages and at 10,000;
- anything else (a compressed or forked history, a model wrapper's own list): the longest common prefix is
  kept and the rest is placed again; a message after it that was rendered before (the same object, in the same
  context) reuses its unit, and the others are rendered.

What a unit depends on besides its message is the adapter's *context* (Gemini: the wire ids of the calls a
result answers; Ollama: the order of the last assistant message's calls), read by :meth:`Plan.key`, and its
options (a :class:`Renders` is kept only for the same options: the Chat adapter's system role, ...). A unit
is reused only where both are the same. Wire items are never changed once made (two messages merged into one
item make a new item), so a body sent earlier stays as it was sent: the items of a body are shared with later
bodies, to be read and never changed (the SDKs copy what they send).

Secrets: the cache holds renderings of the run's own history, which is masked at the source
(:mod:`agentnb._redact`): it holds nothing the run's messages do not. It lives in the run's model port and is
dropped with the run, and when the run ends; what a message held before a masking rule existed is in the
run's history as much as in the cache, and a history masked again is made of new messages, rendered again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._messages import Message
from .._request import HistoryView

__all__ = ["Plan", "Renders", "conversation"]


class Plan:
    """How one wire API renders a conversation message by message (each adapter subclasses it).

    A unit is a list of wire items; for a plan that ``merges``, it is ``(role, blocks)`` or None (nothing to
    send), and consecutive units of one role become one item ``{"role": role, <content>: blocks}``.
    """

    provider = ""
    """How errors name the API (``Anthropic``)."""
    system_apart = False
    """Leading system messages go in a field of their own (their texts are returned apart)."""
    merges = False
    content = "content"
    """The key of a merged item's blocks."""

    def unit(self, m: Message, ctx: Any) -> Any:  # pragma: no cover - each plan has its own
        """The rendering of one message in the context ``ctx`` (what the messages before it left)."""
        raise NotImplementedError

    def key(self, m: Message, ctx: Any) -> Any:
        """What of ``ctx`` the unit of ``m`` reads (a unit is reused only where this is equal)."""
        return None

    def context(self) -> Any:
        """The context before the first message."""
        return None

    def advance(self, ctx: Any, m: Message) -> Any:
        """Update ``ctx`` (in place) past ``m``; returns what :meth:`undo` needs to take it back."""
        return None

    def undo(self, ctx: Any, token: Any) -> None:
        """Take back one :meth:`advance` (the last one not yet taken back)."""

    def join(self, role: str, before: list[Any], blocks: list[Any]) -> list[Any]:
        """The blocks of an item of ``role`` followed by one more message's (a new list)."""
        return before + blocks


class Renders:
    """One adapter's renderings of one conversation, kept from one request to the next (see the module docs).

    Example:
        >>> from agentnb.providers.openai_chat._adapter import render_request
        >>> from agentnb._request import HistoryView
        >>> history, renders = [Message.user("Hi")], {}
        >>> first = render_request(HistoryView(history), renders=renders)
        >>> history.append(Message.assistant("Hello!"))
        >>> second = render_request(HistoryView(history), renders=renders)
        >>> second["messages"][0] is first["messages"][0], second == render_request(history)
        (True, True)
    """

    __slots__ = ("ctx", "key", "marks", "msgs", "opened", "out", "plan", "source", "system", "undos", "unit_keys",
                 "units")

    def __init__(self, plan: Plan, key: Any = None) -> None:
        self.plan = plan
        self.key = key
        """The options the renderings were made with."""
        self._clear()

    def _clear(self) -> None:
        self.source: list[Message] | None = None  # the list the last HistoryView read
        self.msgs: list[Message] = []
        self.units: list[Any] = []
        self.unit_keys: list[Any] = []
        self.marks: list[int] = []  # len(out) before each message
        self.opened: list[bool] = []  # whether each message began a new item (a point to start again from)
        self.undos: list[Any] = []
        self.out: list[Any] = []
        self.ctx: Any = self.plan.context()
        self.system: list[str] = []

    def __len__(self) -> int:
        return len(self.msgs)

    def render(self, messages: Sequence[Message]) -> tuple[list[str], list[Any]]:
        """The texts of the leading system messages (for a plan that puts them apart) and the wire items.

        Both are new lists; the items in them may be shared with the lists of earlier and later calls.

        Raises:
            ValueError: for a plan that puts system messages apart, a system message after the conversation began.
        """
        try:
            return self._render(messages)
        except BaseException:
            self._clear()  # half-placed: start again next time
            raise

    def _render(self, messages: Sequence[Message]) -> tuple[list[str], list[Any]]:
        prev = self.msgs
        n = len(prev)
        view = messages.items if isinstance(messages, HistoryView) else None
        if view is not None and view is self.source and len(messages) >= n and (n == 0 or view[n - 1] is prev[-1]):
            start = k = n  # the same history, grown: everything rendered stays
        else:
            k = 0
            for a, b in zip(messages, prev, strict=False):
                if a is not b:
                    break
                k += 1
            start = self._cut(k) if k < n else k
        self.source = view
        kept = (self.units[start:k], self.unit_keys[start:k])
        reuse = self._reusable(start) if k < n else None
        self._truncate(start)
        todo = view[start:len(messages)] if view is not None else list(messages[start:])
        self._place(todo, k - start, kept, reuse)
        return list(self.system), list(self.out)

    def _cut(self, k: int) -> int:
        """Where to start placing again so that the messages before ``k`` are kept: an item's first message."""
        r = k
        while r > 0 and not self.opened[r]:
            r -= 1
        return r

    def _reusable(self, r: int) -> dict[int, tuple[Message, Any, Any]]:
        return {id(m): (m, self.units[i], self.unit_keys[i]) for i, m in enumerate(self.msgs[r:], r)}

    def _truncate(self, r: int) -> None:
        plan, ctx = self.plan, self.ctx
        for token in reversed(self.undos[r:]):
            plan.undo(ctx, token)
        if r < len(self.msgs):
            del self.out[self.marks[r]:]
            del self.system[r:]
            for column in (self.msgs, self.units, self.unit_keys, self.marks, self.opened, self.undos):
                del column[r:]

    def _place(self, todo: Sequence[Message], same: int, kept: tuple[list[Any], list[Any]],
               reuse: dict[int, tuple[Message, Any, Any]] | None) -> None:
        plan, ctx, out, system = self.plan, self.ctx, self.out, self.system
        apart, merges, content = plan.system_apart, plan.merges, plan.content
        msgs, units, unit_keys, marks, opened, undos = (self.msgs, self.units, self.unit_keys, self.marks,
                                                       self.opened, self.undos)
        for j, m in enumerate(todo):
            i = len(msgs)
            if apart and m.role == "system":
                if i > len(system):
                    raise ValueError(f"{plan.provider} takes the system prompt apart from the conversation: put "
                                     "system messages at the start of the conversation")
                system.append(m.text)
                unit: Any = None
                key: Any = None
            elif j < same:
                unit, key = kept[0][j], kept[1][j]
            else:
                key = plan.key(m, ctx)
                found = reuse.get(id(m)) if reuse else None
                unit = found[1] if found is not None and found[0] is m and found[2] == key else plan.unit(m, ctx)
            marks.append(len(out))
            if apart and m.role == "system":
                began = True
            elif not merges:
                out.extend(unit)
                began = True
            elif unit is None:
                began = False
            else:
                role, blocks = unit
                if out and out[-1]["role"] == role:
                    out[-1] = {"role": role, content: plan.join(role, out[-1][content], blocks)}
                    began = False
                else:
                    out.append({"role": role, content: blocks})
                    began = True
            msgs.append(m)
            units.append(unit)
            unit_keys.append(key)
            opened.append(began)
            undos.append(plan.advance(ctx, m))


def conversation(renders: dict[str, Any] | None, name: str, key: Any, plan: Callable[[], Plan],
                 messages: Sequence[Message]) -> tuple[list[str], list[Any]]:
    """``messages`` rendered by the plan ``plan()`` makes, through the run's cache ``renders`` when there is one.

    ``name`` is the adapter's place in ``renders``; ``key`` the options the plan renders with (a cache made with
    other options is replaced). Without a cache, every message is rendered.
    """
    if renders is None:
        return Renders(plan(), key).render(messages)
    cached = renders.get(name)
    if not isinstance(cached, Renders) or cached.key != key:
        cached = renders[name] = Renders(plan(), key)
    return cached.render(messages)
