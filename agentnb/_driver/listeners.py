"""A run's listeners (:meth:`~agentnb.Run.on_event`) and what a raising one costs: a warning, nothing else.

Theory of operation. A listener is called after its event is stored and folded, so nothing it does can undo
the event: the log, the store and the run's state already agree. An ``Exception`` a listener raises is
therefore not allowed to leave the run half-way through its work (the rest of a turn's results not written,
the later listeners not told): it is warned about, as a :class:`ListenerWarning` that names the listener, the
run and the event, pointing at the line of the listener that raised; the remaining listeners get the event and
the run goes on. The listener stays attached and gets the next events. A ``BaseException`` that is no
``Exception`` (``KeyboardInterrupt``, ``SystemExit``) is no listener's fault and propagates as anywhere else;
the event it interrupted is stored already.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..events import BaseEvent


class ListenerWarning(UserWarning):
    """A run's listener raised on an event; the event is stored, the other listeners got it, the run went on."""


def listener_failed(listener: Callable[..., Any], run_id: str, event: BaseEvent, exc: Exception) -> None:
    """Warn that ``listener`` raised ``exc`` on ``event``, at the line of the listener that raised it."""
    name = getattr(listener, "__qualname__", None) or repr(listener)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    code = getattr(listener, "__code__", None)
    filename, lineno = ((tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None
                        else (getattr(code, "co_filename", __file__), getattr(code, "co_firstlineno", 1)))
    # warn_explicit without a registry: every failure is shown, not only the first one from that line
    warnings.warn_explicit(
        f"the listener {name} of run {run_id} raised on event {event.seq} ({event.type}): "
        f"{type(exc).__name__}: {exc}; the event is stored and the run goes on",
        ListenerWarning, filename, lineno)
