"""Moving runs between stores without repeating an effect: an operation travels whole, with its ledger.

An idempotency key names an *operation's* intent, and the ledger that says "this refund already happened" lives
in the store where it happened. A run copied alone into another store (row by row: the seals are the same)
would find that store's ledger empty and do the refund again. So:

- every run started on a durable store records that store's id (``RunStarted.settings["store"]``, see
  :func:`home_of`);
- :func:`move_run` copies a run **with every run of its operation and their ledger** into another store,
  verbatim (seals unchanged), marks the operation *moved in* there (with the effect keys it brought) and
  *moved out* of the source;
- a store refuses to claim a new effect (:meth:`Guard.check`, called inside the claim's transaction) for a run
  that started in another store when the operation was not moved in with its ledger, for an operation that
  moved out, or for a key the moved-in ledger had and that is now missing (a deleted ledger row is detected,
  not taken as "never happened"). The refusal is a :class:`~agentnb.CheckpointError` raised from ``run()``: the
  run stays as it was, nothing ran.

Runs started before stores recorded their id carry no home and are not checked (nothing is known about them).
Marks are sealed with the store's key, so editing one is as detectable as editing an event.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..exceptions import CheckpointError, RunNotFound
from ._protocol import Store
from ._seals import Seals

EventRow = tuple[int, str, str, str]
"""``(seq, type, data, mac)`` of one stored event."""
LedgerRow = tuple[int, str, str, str, str, "str | None", "str | None", "str | None", float, str, str]
"""``(lseq, op, key, call_id, tool, content, value, result_status, ts, prev, mac)`` of one ledger operation."""
HeadRow = tuple[int, str, int, str, str, str, float]
"""``(head_seq, head_mac, ledger_seq, ledger_mac, seal, state, updated)`` of a run's head."""


@dataclass(frozen=True, slots=True)
class RunRows:
    """One run's stored rows, verbatim: what a move copies (seals and all)."""

    run_id: str
    events: list[EventRow]
    ledger: list[LedgerRow]
    head: HeadRow


@dataclass(slots=True)
class Mark:
    """What a store knows of an operation's moves: where it came from (and the keys it brought), where it went."""

    came_from: str | None = None
    keys: list[str] = field(default_factory=list)
    went_to: str | None = None
    at: float = 0.0

    def encode(self, seals: Seals, operation: str) -> str:
        """The sealed ``meta`` value of this mark for ``operation``."""
        body = json.dumps({"from": self.came_from, "keys": self.keys, "to": self.went_to, "at": self.at},
                          sort_keys=True)
        return json.dumps({"body": body, "mac": seals.mac("move", operation, body)})

    @staticmethod
    def decode(seals: Seals, operation: str, raw: str) -> Mark:
        """The mark a sealed ``meta`` value holds; ``CheckpointError`` when its seal does not match."""
        try:
            outer = json.loads(raw)
            body = str(outer["body"])
            good = hmac.compare_digest(str(outer["mac"]), seals.mac("move", operation, body))
            data = json.loads(body)
        except (ValueError, KeyError, TypeError):
            good = False
        if not good:
            raise CheckpointError(f"the move record of operation {operation!r} was changed after it was written "
                                  "(seal mismatch): this store cannot tell which of its effects happened elsewhere")
        return Mark(data["from"], list(data["keys"]), data["to"], float(data["at"]))


def mark_name(operation: str) -> str:
    """The ``meta`` row that holds an operation's :class:`Mark`."""
    return f"move:{operation}"


def origin(first_event_data: str) -> tuple[str | None, str]:
    """``(home store id, operation id)`` of a run from its stored first event (a ``RunStarted``)."""
    try:
        data = json.loads(first_event_data)
        settings = data.get("settings") or {}
        home = settings.get("store")
        operation = settings.get("operation_id") or data.get("run_id") or ""
    except (ValueError, AttributeError):
        return None, ""
    return (str(home) if home else None), str(operation)


def home_of(store: object) -> dict[str, str]:
    """The ``settings`` entry a run started on ``store`` records (nothing for a store without an id)."""
    store_id = getattr(store, "store_id", None)
    return {"store": store_id} if isinstance(store_id, str) and store_id else {}


class Guard:
    """The claim-time check a durable store makes: a run may only start new effects where its operation lives.

    ``first`` reads a run's stored first event and ``mark`` an operation's :class:`Mark`, both inside the claim's
    transaction, which calls this only for a key this store has no claim of. Origins are cached per run (a first
    event never changes); marks are read each time (a move may happen while a run object lives).
    """

    def __init__(self, store_id: str, where: str) -> None:
        self.store_id = store_id
        self.where = where
        self._origins: dict[str, tuple[str | None, str]] = {}

    def check(self, run_id: str, key: str, first: Callable[[str], str | None],
              mark: Callable[[str], Mark | None]) -> None:
        """Raise when ``run_id`` may not claim the new (unclaimed here) ``key``; see the module docstring."""
        known = self._origins.get(run_id)
        if known is None:
            data = first(run_id)
            known = origin(data) if data is not None else (None, "")
            self._origins[run_id] = known
        home, operation = known
        if not operation:
            return
        found: Mark | None = mark(operation)
        if found is not None and found.went_to is not None:
            raise CheckpointError(
                f"run {run_id!r}: operation {operation!r} was moved to store {found.went_to} "
                f"({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(found.at))}); its runs go on there, and "
                f"{self.where} starts no new effect for it (the call did not run)"
            )
        if home is not None and home != self.store_id and (found is None or found.came_from is None):
            raise CheckpointError(
                f"run {run_id!r} of operation {operation!r} started in store {home} and was copied into {self.where} "
                "without its operation's effect ledger: an effect done there would be done again here, so this "
                "call did not run. Move runs with agentnb.move_run(run_id, source, destination), which carries "
                "every run of the operation and its ledger"
            )
        if found is not None and key in found.keys:
            raise CheckpointError(
                f"run {run_id!r}: the effect ledger of operation {operation!r} is missing its record of {key!r}, "
                f"which the move from store {found.came_from} brought: a deleted ledger row is not taken as "
                "\"never happened\", so this call did not run"
            )


class _Movable(Protocol):
    store_id: str
    _seals: Seals

    def _export(self, run_id: str) -> RunRows: ...
    def _first(self, run_id: str) -> str | None: ...
    def _import(self, rows: list[RunRows], operation: str, mark: Mark) -> None: ...
    def _put_mark(self, operation: str, mark: Mark) -> None: ...
    def _get_mark(self, operation: str) -> Mark | None: ...
    def runs(self, state: str | None = None) -> list[tuple[str, str]]: ...
    def load(self, run_id: str) -> list[Any]: ...
    def lease(self, run_id: str) -> Any: ...


def _movable(got: Store, role: str) -> _Movable:
    if not all(hasattr(got, name) for name in ("_export", "_import", "_first", "store_id")):
        raise CheckpointError(f"the {role} {got!r} is not a durable store: runs move between SqliteStore and "
                              "PostgresStore (a MemoryStore's runs leave with its process)")
    return got  # type: ignore[return-value]


def move_run(run_id: str, source: Store, destination: Store) -> list[str]:
    """Move a run into another store with every run of its operation and their effect ledger.

    The rows are copied verbatim (the seals verify in the destination, which must use the same key); the
    destination records that the operation moved in with its effect keys, the source that it moved out. From
    then on the operation's effects are claimed in the destination only: a write already done in the source is
    answered from the copied ledger, never run again, and the source refuses new effects for the operation. A
    move interrupted between the two stores is finished by calling it again. The source keeps its rows (to read).

    Returns:
        The ids of the runs moved (the run and the other runs of its operation), in the source's order.

    Raises:
        CheckpointError: a store is not durable, the keys differ, a run is being driven (a live lease), a run of
            the operation already differs in the destination, or a store fault; nothing is marked moved then.
        RunNotFound: no such run in the source.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> a = anb.SqliteStore(os.path.join(d, "a.db"), key="a-test-key")
        >>> b = anb.SqliteStore(os.path.join(d, "b.db"), key="a-test-key")
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=a)
        >>> run = loop.start("Refund order 42", operation_id="refund-42").run()
        >>> anb.move_run(run.run_id, a, b) == [run.run_id]
        True
        >>> anb.Run.resume(run.run_id, loop=loop, store=b).state.value
        'WAITING_APPROVAL'
    """
    if not isinstance(run_id, str) or not run_id.strip():
        raise CheckpointError(f"move_run needs a run id, not {run_id!r}")
    src, dst = _movable(source, "source"), _movable(destination, "destination")
    if src.store_id == dst.store_id:
        raise CheckpointError(f"{src!r} and {dst!r} are the same store (id {src.store_id}): nothing to move")
    if not hmac.compare_digest(src._seals.key, dst._seals.key):
        raise CheckpointError(f"{src!r} and {dst!r} use different checkpoint keys: the runs' seals would not verify "
                              "in the destination. Open both with the same key")
    first = src._first(run_id)
    if first is None:
        raise RunNotFound(f"no run {run_id!r} in {src!r}")
    _, operation = origin(first)
    members = [rid for rid, _ in src.runs() if rid == run_id or origin(src._first(rid) or "{}")[1] == operation]
    rows: list[RunRows] = []
    for rid in members:
        lease = src.lease(rid)
        if lease is not None and lease.live:
            raise CheckpointError(f"run {rid!r} of operation {operation!r} is being driven by {lease.owner} in "
                                  f"{src!r}: stop it (or let its lease expire) before moving the operation")
        src.load(rid)  # every seal checked before anything is copied
        rows.append(src._export(rid))
    already = src._get_mark(operation)
    keys = sorted({row[2] for run in rows for row in run.ledger} | set(already.keys if already else []))
    dst._import(rows, operation, Mark(came_from=src.store_id, keys=keys, at=time.time()))
    for rid in members:
        dst.load(rid)
    src._put_mark(operation, Mark(came_from=already.came_from if already else None,
                                  keys=already.keys if already else [], went_to=dst.store_id, at=time.time()))
    return members


__all__ = ["Guard", "Mark", "RunRows", "home_of", "mark_name", "move_run", "origin"]
