"""The rows of a batch, checked before anything runs: prompts, operation ids, and the store's runs of those ids.

Theory of operation. A batch's run id *is* its row's operation id, so an id decides which stored transcript a
row gets back. Every row is therefore checked first, and one :class:`~agentnb.AgentnbError` names each bad row
(its position, and its index label in a DataFrame) before any run starts or anything is written:

- a prompt is a non-blank string, a :class:`~agentnb.Message`, or a non-empty list of messages (a ``Message``
  or a ``{"role": ..., "content": ...}`` dict); anything else (None, NaN, a number, a dict) is refused;
- an ``operation_id`` is a string that is not blank, has no leading or trailing whitespace and no control,
  invisible or direction-changing character (``a`` and a zero-width space look like ``a``); an empty cell
  (None, NaN, ``pd.NA``) is refused, never made the string ``"nan"``, and a number is refused rather than
  turned into text (``7`` and ``7.0`` would name two runs); a duplicate is refused naming
  both rows. Without the column the ids are derived, ``<name>-<row>``; a ``run_id`` column is refused (the run
  id is the operation id);
- a stored run of a row's id must have begun from the row's prompt (the loop's system prompt aside): a row
  whose id names another prompt's run is refused, since handing back that run would report a prompt that never
  ran as done.

A row may also be a :class:`Fork` of a stored run instead of a prompt: a counterfactual (another result, other
arguments, today's loop) under a fork's effect policy. Its stored run must be a fork of that same parent.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._driver.fork import lineage
from ._messages import MESSAGE_ADAPTER, Message, coerce_messages
from ._states import TERMINAL, LoopState
from ._visible import visible
from .events import BaseEvent, RunStarted
from .exceptions import AgentnbError
from .store import Store

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Fork:
    """A batch row that forks a stored run instead of starting from a prompt (see ``Run.fork``).

    ``at``: the event to fork after -- a seq, or a predicate of an event (the first one it holds for; None:
    where ``results`` were bound, else the end). ``results`` / ``arguments``: by call id, or a function of the
    parent's events that returns them (None or ``{}``: none). ``effects``, ``reads``, ``rerun``: the fork's
    effect policy. The fork's run id is its row's operation id, so the batch run again finds it.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> parent = loop.start("Paris?").run()
        >>> snow = {"city": "Paris", "temp_c": -5, "sky": "snow"}
        >>> results = lambda events: {next(e.call_id for e in events if e.type == "ToolFinished"): snow}
        >>> forks = anb.batch(loop, [anb.Fork(parent.run_id, results=results)], progress=False)
        >>> forks.table[["forked_from", "state"]].values.tolist() == [[parent.run_id, "COMPLETED"]]
        True
    """

    parent: str
    at: int | Callable[[BaseEvent], bool] | None = None
    results: Mapping[str, Any] | Callable[[list[BaseEvent]], Mapping[str, Any]] | None = None
    arguments: Mapping[str, dict[str, Any]] | Callable[[list[BaseEvent]], Mapping[str, dict[str, Any]]] | None = None
    effects: str = "ask"
    reads: str = "rerun"
    rerun: Sequence[str] = ()

    def describe(self) -> str:
        """A stable description of the fork (what a batch's name is a digest of)."""
        def part(v: Any) -> str:
            return getattr(v, "__qualname__", None) or json.dumps(v, sort_keys=True, default=repr)

        return "|".join(["fork", self.parent, part(self.at), part(self.results), part(self.arguments),
                         self.effects, self.reads, ",".join(self.rerun)])

    def plan(self, events: list[BaseEvent]) -> dict[str, Any]:
        """``Run.fork``'s arguments for the parent with ``events``.

        Raises:
            AgentnbError: ``at`` holds for no event, or a function gave no mapping.
        """
        at = self.at
        if callable(at):
            found = next((e.seq for e in events if at(e)), None)
            if found is None:
                raise AgentnbError(f"fork of {self.parent!r}: the at= predicate holds for none of its events")
            at = found
        out: dict[str, Any] = {"at": at, "effects": self.effects, "reads": self.reads, "rerun": list(self.rerun)}
        for name in ("results", "arguments"):
            value = getattr(self, name)
            value = value(events) if callable(value) else value
            if value is not None and not isinstance(value, Mapping):
                raise AgentnbError(f"fork of {self.parent!r}: {name}= gave {type(value).__name__}, not a mapping by "
                                   "call id")
            out[name] = dict(value) if value else None
        return out


@dataclass
class Item:
    """One row of a batch, checked: its run's id and its prompt as messages."""

    index: int
    operation_id: str
    """The run's id and its operation id: the row's ``operation_id``, or ``<name>-<index>``."""
    prompt: list[Message]
    """The row's prompt, checked and made messages before anything runs."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The row's other DataFrame columns (keyword arguments of a ``loop`` function)."""
    where: str = ""
    """The row, as refusals name it: ``row 3``, or ``row 3 (index 'x')`` for a DataFrame's labelled row."""
    fork: Fork | None = None
    """The row forks a stored run (its prompt is then the parent's conversation, and ``prompt`` is empty)."""
    tags: tuple[str, ...] = ()
    """The batch's ``tags=``, stored with each run it starts."""


_SHOWN = 5
"""Problems named in one refusal; the rest are counted."""


def read_items(prompts: Iterable[Any] | pd.DataFrame, prompt_column: str, name: str | None) -> list[Item]:
    """The batch's items, every row checked first: one refusal names each bad row, and nothing has run."""
    rows: list[tuple[Any, Any, dict[str, Any], str]] = []  # prompt, operation id (_NO_ID: derive it), settings, row
    if hasattr(prompts, "to_dict") and hasattr(prompts, "columns"):
        frame: Any = prompts  # a DataFrame; pandas is imported by whoever made it, never here
        columns = list(frame.columns)
        if prompt_column not in columns:
            raise AgentnbError(f"the DataFrame has no {prompt_column!r} column (columns: {columns}); "
                               "name it, or pass prompt_column=")
        if "run_id" in columns:
            raise AgentnbError("the DataFrame has a 'run_id' column, but a batch names each run by its operation "
                               "id (the run id is the operation id): rename the column to 'operation_id'")
        ids = "operation_id" in columns
        for i, (label, record) in enumerate(zip(frame.index, frame.to_dict("records"), strict=True)):
            where = f"row {i}" if label == i else f"row {i} (index {label!r})"
            prompt, op = record.pop(prompt_column), record.pop("operation_id") if ids else _NO_ID
            rows.append((prompt, op, {str(k): v for k, v in record.items()}, where))
    elif isinstance(prompts, str | bytes):
        raise AgentnbError(f"prompts is one string ({_short(prompts)}), not a list of prompts: pass [prompt]")
    else:
        rows = [(p, _NO_ID, {}, f"row {i}") for i, p in enumerate(prompts)]
    if name is not None and (bad := _id_problem(name)) is not None:
        raise AgentnbError(f"the batch's name {bad[0]}: it is the prefix of every run id ('<name>-<row>')")
    if name is None:
        said = [r[0].describe() if isinstance(r[0], Fork) else r[0] for r in rows]
        digest = hashlib.sha256(json.dumps(said, default=repr, sort_keys=True).encode())
        name = f"b{digest.hexdigest()[:10]}"
    problems: list[str] = []
    items: list[Item] = []
    first: dict[str, str] = {}  # operation id -> the row that has it
    for i, (prompt, op, settings, where) in enumerate(rows):
        fork = prompt if isinstance(prompt, Fork) else None
        messages, problem = ([], _fork_problem(fork)) if fork is not None else _prompt(prompt)
        if problem is not None:
            problems.append(f"{where}: its prompt {problem}")
        if op is _NO_ID:
            op = f"{name}-{i}"
        elif (bad := _id_problem(op)) is not None:
            problems.append(f"{where}: its operation_id {bad[0]}" + (f": {bad[1]}" if bad[1] else ""))
            continue  # a row without a usable id cannot clash with another
        if op in first:
            problems.append(f"{where}: its operation_id {op!r} is also the id of {first[op]} (each run needs its own)")
        first.setdefault(op, where)
        items.append(Item(i, op, messages, settings, where, fork))
    _refuse(problems)
    return items


_NO_ID: Any = object()
"""The operation id of a row that has none to give (a list of prompts): the batch derives ``<name>-<row>``."""


def _fork_problem(fork: Fork) -> str | None:
    """What makes a fork row no fork (its parent id, its policies: ``Run.fork``'s own checks), in words."""
    if (bad := _id_problem(fork.parent)) is not None:
        return f"forks a parent whose id {bad[0]}"
    try:
        lineage(fork.parent, fork.effects, fork.reads, fork.rerun)
    except AgentnbError as exc:
        return f"is no fork: {exc}"
    return None


def _id_problem(op: Any) -> tuple[str, str] | None:
    """What makes ``op`` no run id, in words, and what to do about it (None: it is one)."""
    if (empty := _empty(op)) is not None:
        # never str(op): an empty cell would become the run "nan", which the next batch's empty cell also names
        return f"is empty ({empty})", "give every row an id, or leave the column out to have them derived"
    if not isinstance(op, str):
        # never str(op) either: 7 and 7.0 (what a column of numbers with a gap holds) would name two runs
        return f"is {type(op).__name__} {_short(op)}, not a string", "make the ids strings yourself"
    if not op.strip():
        return f"is blank ({op!r})", ""
    if op != op.strip():
        return f"has leading or trailing whitespace ({op!r})", "it would name another run than it seems to"
    if any(ord(c) < 32 or ord(c) == 127 for c in op):
        return f"holds a control character ({op!r})", ""
    if visible(op)[1]:  # "a" and "a\u200b" look the same and would name two runs
        return f"holds an invisible or direction-changing character ({visible(op)[0]})", ""
    return None


def _empty(value: Any) -> str | None:
    """How a missing value reads (None, NaN, pandas' NA or NaT); None for a value that is there."""
    if value is None:
        return "None"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    pd = sys.modules.get("pandas")  # pandas' own missing values, only if pandas is in use at all
    if pd is not None and (value is pd.NA or value is pd.NaT):
        return repr(value)
    return None


def _prompt(prompt: Any) -> tuple[list[Message], str | None]:
    """The prompt as messages, or what makes it none (a string, a Message, or a non-empty list of messages)."""
    if (empty := _empty(prompt)) is not None:
        return [], f"is empty ({empty})"
    if isinstance(prompt, str):
        return ([], f"is blank ({prompt!r})") if not prompt.strip() else (coerce_messages(prompt), None)
    shape = "a string, a Message, or a list of messages (each a Message, or a dict with 'role' and 'content')"
    if not isinstance(prompt, Message | list | tuple):
        return [], f"is {type(prompt).__name__} {_short(prompt)}; a prompt is {shape}"
    if not prompt:
        return [], "is a list with no message"
    given = [prompt] if isinstance(prompt, Message) else list(prompt)
    try:
        messages = coerce_messages(given)
    except (TypeError, ValueError, KeyError) as exc:  # pydantic's ValidationError is a ValueError
        return [], f"is not {shape}: {(str(exc) or type(exc).__name__).splitlines()[0]}"
    # a dict without a string 'content' validates as a message with nothing in it: the model would get nothing
    hollow = [i for i, m in enumerate(messages) if not m.parts]
    if hollow:
        return [], f"is not {shape}: message {hollow[0]} ({_short(given[hollow[0]])}) has no content"
    return messages, None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refuse(problems: list[str], hint: str = "") -> None:
    """Raise one error naming the first problems, a line each (and counting the rest); nothing when there are none."""
    if not problems:
        return
    lines = [f"- {p}" for p in problems[:_SHOWN]] + ([f"- and {len(problems) - _SHOWN} more"]
                                                      if len(problems) > _SHOWN else [])
    raise AgentnbError("\n".join([f"the batch was refused before anything ran ({len(problems)} problem(s)):",
                                   *lines, *([hint] if hint else [])]))


def check_stored(items: list[Item], store: Store, known: Mapping[str, str]) -> dict[str, list[BaseEvent]]:
    """Refuse rows whose run in the store began from another prompt; return the finished runs' events.

    A stored run is this row's only if it began from this row's prompt (the loop's system prompt aside):
    else a batch run again, with another prompt under an id the store knows, would hand back the transcript
    of a prompt it never ran. A run that cannot be loaded is left to the run itself, whose error its row records.
    """
    problems: list[str] = []
    finished: dict[str, list[BaseEvent]] = {}
    for item in items:
        state = known.get(item.operation_id)
        if state is None:
            continue
        try:
            events = store.load(item.operation_id)
        except Exception:  # recorded in its row when the batch gets to it; the other rows are checked
            continue
        first = events[0] if events else None
        if item.fork is not None:
            lineage = first.settings.get("fork") if isinstance(first, RunStarted) else None
            parent = lineage.get("parent") if isinstance(lineage, dict) else None
            if parent != item.fork.parent:
                problems.append(f"{item.where}: the store's run {item.operation_id!r} is not a fork of "
                                f"{item.fork.parent!r} (its parent: {parent!r})")
        elif isinstance(first, RunStarted):
            stored = _dumped(first.messages)
            if stored != _dumped(item.prompt) and (stored[:1] == [] or stored[0].get("role") != "system"
                                                    or stored[1:] != _dumped(item.prompt)):
                problems.append(f"{item.where}: the store's run {item.operation_id!r} began from another prompt "
                                f"(stored {_shown(first.messages)}, given {_shown(item.prompt)})")
        if LoopState(state) in TERMINAL:
            finished[item.operation_id] = events
    _refuse(problems, "A stored run of another prompt is never this row's transcript: give these rows new "
            "operation ids (or the batch another name=), or use another store")
    return finished


def _dumped(messages: list[Message]) -> list[dict[str, Any]]:
    return [MESSAGE_ADAPTER.dump_python(m, mode="json") for m in messages]


def _shown(messages: list[Message]) -> str:
    if len(messages) == 1:
        return _short(messages[0].text)
    return f"{len(messages)} messages, the last {messages[-1].role}: {_short(messages[-1].text)}"
