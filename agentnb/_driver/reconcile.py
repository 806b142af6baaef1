"""After a failed write: what did the store keep? A reply lost after the commit must not make a run write twice.

A store fault on ``append`` usually means nothing was written. But a connection that drops *after* the commit
(the server kept the event, the reply never came) leaves the store one event ahead of the run. Before the run
does anything else, :func:`kept` reads the run back and compares: nothing more stored (write it again), the very
event the driver tried (adopt it: fold it, never write it twice), or events this driver did not write
(another writer moved the run: the driver reloads and says so). While the store cannot be read, the fault is
raised again and the question stays open.
"""

from __future__ import annotations

from typing import Literal

from ..events import BaseEvent, event_to_json
from ..exceptions import RunNotFound
from ..store import Store

Kept = Literal["nothing", "it", "other"]


def kept(store: Store, run_id: str, known: int, attempted: BaseEvent) -> Kept:
    """What ``store`` holds beyond the run's ``known`` events: ``nothing``, ``it`` (``attempted``) or ``other``.

    Raises:
        CheckpointError: the store still cannot be read (the question stays open).
    """
    try:
        stored = store.load(run_id)
    except RunNotFound:
        if known:
            raise
        stored = []  # the run's first event was not kept
    if len(stored) <= known:
        return "nothing"
    if len(stored) == known + 1 and event_to_json(stored[known]) == event_to_json(attempted):
        return "it"
    return "other"
