"""Checkpoint keys and seals: how a durable store detects an edited, reordered or truncated checkpoint.

Every event is sealed with an HMAC chained over the run's previous seal, every effect ledger operation
likewise, and the run's **head** seals both chain ends together: an edited, reordered, inserted, removed or
truncated event *or ledger row* is detected when the run is loaded, and the load is refused as a whole, never
half-loaded. :class:`Seals` holds the one formula, so a run moves between ``SqliteStore`` and ``PostgresStore``
unchanged.

The key comes from the ``key`` argument, ``AGENTNB_CHECKPOINT_KEY``, or a key file created with 0600
permissions (``~/.agentnb/checkpoint.key`` unless ``key_file`` says otherwise): :func:`load_key`. A store
remembers a fingerprint of its key, so a missing or different key is reported as exactly that
(:func:`key_mismatch`), never as tampering.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._outcomes import Effect
from ..events import BaseEvent, event_from_json, events_from_json
from ..exceptions import CheckpointError
from ._protocol import fold_effect

MIN_KEY_BYTES = 8
"""The shortest checkpoint key accepted: a shorter one gives no real integrity."""


def _checked_key(raw: bytes, source: str) -> bytes:
    key = raw.rstrip(b"\r\n")  # a key file written by `echo` ends with a newline: the newline is not the key
    if len(key) < MIN_KEY_BYTES:
        what = "empty" if not key else f"{len(key)} bytes long"
        raise CheckpointError(
            f"the checkpoint key from {source} is {what}; use at least {MIN_KEY_BYTES} bytes "
            "(for example the output of `python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    return key


_INSTEAD = "or set AGENTNB_CHECKPOINT_KEY to the key"
"""What a user can always do instead of a key file."""


def _read_key_file(path: Path) -> bytes | None:
    try:
        if path.is_dir():
            raise CheckpointError(f"the checkpoint key file {path} is a directory; give the path of a file")
        if not path.exists():
            if path.is_symlink():  # exists() follows the link: a link to nothing is not "no key file"
                raise CheckpointError(f"the checkpoint key file {path} is a link to {os.readlink(path)}, which does "
                                      f"not exist; restore the file it points to, remove the link, {_INSTEAD}")
            return None
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise CheckpointError(f"checkpoint key file {path} is readable by others (mode {mode:o}); chmod 600 it")
        return _checked_key(path.read_bytes(), f"key file {path}")
    except OSError as exc:  # no permission to look, an I/O error
        raise CheckpointError(f"cannot read the checkpoint key file {path}: {exc.strerror or exc}; make it readable "
                              f"by this user, give key_file= another path, {_INSTEAD}") from exc


def _new_key_file(path: Path) -> bytes:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where a directory belongs, a directory that cannot be made or written
        raise CheckpointError(
            f"cannot create the directory {path.parent} for the checkpoint key file {path}: {exc.strerror or exc}; "
            f"create the directory, give key_file= a path in a directory you can write, {_INSTEAD}"
        ) from exc
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_hex(32).encode())
        return path.read_bytes()
    except FileExistsError as exc:  # made by another process since it was looked for: use neither, say so
        raise CheckpointError(f"the checkpoint key file {path} appeared while this store was making it (another "
                              "process made one at the same time); open the store again to use it") from exc
    except OSError as exc:  # no permission, a read-only file system, a full disk
        raise CheckpointError(f"cannot create the checkpoint key file {path}: {exc.strerror or exc}; give key_file= "
                              f"a path you can write, {_INSTEAD}") from exc


def load_key(key: bytes | str | None, key_file: str | Path | None, *, where: str, recorded: str | None,
             may_create: bool = True) -> tuple[bytes, str]:
    """A store's checkpoint key, checked, and where it came from.

    From the argument, ``AGENTNB_CHECKPOINT_KEY``, or a key file (created, 0600, only for a store that has no key
    yet: ``recorded`` is its stored fingerprint).

    Raises:
        CheckpointError: the key file is missing for a store sealed with a key, the key is too short, the key file
            is a directory, a link to nothing or readable by others, it (or its directory) cannot be read or made
            (the message names the path and what to do), or there is no key and none may be made.
    """
    if key is not None:
        raw, source = (key.encode() if isinstance(key, str) else key), "the key argument"
    elif os.environ.get("AGENTNB_CHECKPOINT_KEY"):
        raw, source = os.environ["AGENTNB_CHECKPOINT_KEY"].encode(), "AGENTNB_CHECKPOINT_KEY"
    else:
        path = Path(key_file) if key_file else Path.home() / ".agentnb" / "checkpoint.key"
        found = _read_key_file(path)
        if found is None:
            if recorded is not None:
                raise CheckpointError(
                    f"the checkpoint key file {path} is missing, and {where} holds runs sealed with a key "
                    f"(fingerprint {recorded}). Restore that key file, or set AGENTNB_CHECKPOINT_KEY to the key."
                )
            if not may_create:
                raise CheckpointError(f"no checkpoint key for {where}: give key=, key_file= or set "
                                      "AGENTNB_CHECKPOINT_KEY")
            found = _new_key_file(path)
        raw, source = found, f"key file {path}"
    return _checked_key(raw, source), source


def key_mismatch(where: str, recorded: str, fingerprint: str, source: str) -> CheckpointError:
    """The error for a store opened with another key than the one it was sealed with."""
    return CheckpointError(
        f"{where} was sealed with a different key (fingerprint {recorded}) than the one from {source} "
        f"(fingerprint {fingerprint}); open it with the key it was written with"
    )


def fingerprint_of(key: bytes) -> str:
    return hmac.new(key, b"agentnb checkpoint key fingerprint", hashlib.sha256).hexdigest()[:16]


# -- seals -------------------------------------------------------------------------------------------------

Head = tuple[int, str, int, str]  # head seq, head mac, ledger seq, ledger mac


class Seals:
    """The HMAC chains of a durable store and their verification: one formula for every store.

    Events are chained per run (each seal covers the previous one), ledger operations likewise, and the run's
    head seals both chain ends together. :class:`SqliteStore` and ``PostgresStore`` use this one class, so a run
    moves between them unchanged.
    """

    __slots__ = ("_keyed", "key")

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)
        """The HMAC with the key already absorbed: each seal copies it (the same HMAC-SHA256, at half the cost
        of keying it again for every event)."""

    def mac(self, *parts: str) -> str:
        """HMAC-SHA256 of the parts (joined with a unit separator), hex."""
        h = self._keyed.copy()
        h.update("\x1f".join(parts).encode())
        return h.hexdigest()

    def event(self, prev: str, run_id: str, seq: int, data: str) -> str:
        """The seal of one event, chained over the previous event's."""
        return self.mac(prev, run_id, str(seq), data)

    def head(self, run_id: str, head: Head) -> str:
        """The seal of a run's head: the last event's seq and seal, the last ledger entry's number and seal."""
        return self.mac("head", run_id, str(head[0]), head[1], str(head[2]), head[3])

    def ledger(self, run_id: str, lseq: int, op: str, key: str, call_id: str, tool: str, content: str | None,
               value: str | None, status: str | None, prev: str) -> str:
        """The seal of one ledger operation, every column covered, chained over the previous one's."""
        absent = "\x00"  # None and "" seal differently
        return self.mac("ledger", run_id, str(lseq), op, key, call_id, tool, absent if content is None else content,
                        absent if value is None else value, status or "", prev)

    def verify(self, run_id: str, head: Head, rows: list[Any], ledger: list[Any]) -> list[BaseEvent]:
        """The run's events from stored ``(seq, data, mac)`` rows, after checking both chains against the head.

        ``ledger`` holds ``(lseq, op, key, call_id, tool, content, value, result_status, prev, mac)`` rows.

        Raises:
            CheckpointError: an event or ledger row is missing, changed, reordered or unreadable.
        """
        prev = ""
        for expected, (seq, data, mac) in enumerate(rows):
            if seq != expected:
                raise CheckpointError(f"run {run_id!r}: event {expected} is missing from the checkpoint")
            if not hmac.compare_digest(mac, self.event(prev, run_id, seq, data)):
                raise CheckpointError(f"run {run_id!r}: event {seq} was changed after it was written (seal mismatch)")
            prev = mac
        if len(rows) != head[0] + 1 or prev != head[1]:
            raise CheckpointError(
                f"run {run_id!r}: the checkpoint is truncated ({len(rows)} events stored, the head says {head[0] + 1})"
            )
        prev = ""
        for expected, (lseq, op, key, call_id, tool, content, value, status, row_prev, mac) in enumerate(ledger):
            if lseq != expected:
                raise CheckpointError(f"run {run_id!r}: effect ledger entry {expected} is missing")
            good = self.ledger(run_id, lseq, op, key, call_id, tool, content, value, status, row_prev)
            if row_prev != prev or not hmac.compare_digest(mac, good):
                raise CheckpointError(
                    f"run {run_id!r}: effect ledger entry {lseq} ({op} {key!r}) was changed after it was written"
                )
            prev = mac
        if len(ledger) != head[2] + 1 or prev != head[3]:
            raise CheckpointError(
                f"run {run_id!r}: the effect ledger is truncated ({len(ledger)} entries stored, the head says "
                f"{head[2] + 1}): an effect's record was deleted"
            )
        return _decoded(run_id, rows)

    def effect(self, key: str, rows: Iterable[Any]) -> Effect | None:
        """The ledger's view of a key, every row's own seal checked.

        ``rows``: ``(run_id, lseq, op, key, call_id, tool, content, value, result_status, prev, mac)`` in order.
        """
        ops = []
        for run_id, lseq, op, k, call_id, tool, content, value, status, prev, mac in rows:
            if not hmac.compare_digest(mac, self.ledger(run_id, lseq, op, k, call_id, tool, content, value, status,
                                                        prev)):
                raise CheckpointError(f"effect ledger entry {key!r} was changed after it was written (seal mismatch)")
            ops.append((op, run_id, call_id, tool, content, json.loads(value) if value is not None else None, status))
        return fold_effect(key, ops)


def _decoded(run_id: str, rows: list[Any]) -> list[BaseEvent]:
    """The events of sealed rows (all at once; when one cannot be read, the first that cannot is named)."""
    try:
        return events_from_json([data for _, data, _ in rows])
    except Exception:
        pass
    events = []
    for seq, data, _ in rows:
        try:
            events.append(event_from_json(data))
        except Exception as exc:
            raise CheckpointError(f"run {run_id!r}: event {seq} cannot be read: {exc}") from None
    return events


def encode_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)
