"""The cyclic garbage collector, paused while a long log's objects are built (they all stay alive)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["AGE_AFTER", "gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many events are built, and restore it after.

    Decoding a long log allocates millions of objects that all stay alive; the collector would walk the
    growing heap again and again for nothing (an event holds no reference cycle), which costs as much as
    the decoding itself. Reference counting still frees everything as usual, and the collector's state is
    put back as it was (a caller that disabled it keeps it disabled) when the last pause open in any thread
    ends: the collector is one for the process, so a pause ending in one thread (a debugger's index built in
    the background) does not turn it on under another thread's build.

    On the way out of a big build (``AGE_AFTER`` new objects or more), what was built moves to the
    collector's oldest generation (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no walk of the
    heap), so the first collections after a long load do not walk all of it again, young generation by young
    generation. A small one (a store's run loaded for an inbox listing) leaves the generations as they are:
    aging everything young in the process each time would keep cyclic garbage until a full collection.
    """
    global _active, _enabled
    with _lock:
        if _active == 0:
            _enabled = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            if gc.get_count()[0] >= AGE_AFTER:  # counted while paused: the objects this build left young
                gc.freeze()  # every tracked object to the permanent generation, then back into the oldest one
                gc.unfreeze()
            _active -= 1
            if _active == 0 and _enabled:
                gc.enable()


_lock = threading.Lock()
_active = 0
"""Pauses open now, in any thread: the collector is enabled again only when the last one ends."""
_enabled = False
"""Whether the collector was enabled when the first of the open pauses began."""

AGE_AFTER = 100_000
"""How many young objects a paused build must leave before :func:`gc_paused` ages them (about 20k events)."""
