"""Scanners: questions asked of every run, whose answers are a DataFrame that joins the frames.

Theory of operation. A scanner (:class:`Scanner`) is a named, versioned function of a run, of each of its
calls or of each of its events, that answers with hits (:class:`Hit`: where, what, a value, a score); or a
question put to a model, answered with a typed value (:func:`~agentnb.scanners._ask.ask`); or one of the
built-ins (:mod:`._builtin`, :mod:`._injection`) that find tool errors the model went past, repeated calls, made-up
arguments, instructions hidden in tool results, refusals, and slow or costly turns. :func:`scan` runs them over
a transcript, a collection, saved transcripts or a store, concurrently, with a cache that makes a second scan
run only what changed (:mod:`._runner`, :mod:`._cache`). The results are one row per hit with the frames' keys.

Example:
    >>> import agentnb as anb
    >>> @anb.scanner(over="call")
    ... def weather_calls(call):
    ...     return call.tool == "get_weather"
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
    >>> t = loop.start("Weather?", run_id="r1").run().transcript
    >>> hits = anb.scan(t, weather_calls)
    >>> hits.merge(t.frames.calls(), on=["run_id", "call_id"])[["call_id", "status"]]
        call_id status
    0  call_1_1     ok
    1  call_1_2     ok
    2  call_1_3     ok
"""

from __future__ import annotations

from ._core import Hit, Over, Scanner
from ._kit import ScannerKit
from ._runner import COLUMNS, ScanWarning, scan
from ._views import ScanCall, ScanView, view

scanner = ScannerKit()
"""``anb.scanner``: the decorator, ``ask`` and the built-ins (see :class:`ScannerKit`)."""

__all__ = ["COLUMNS", "Hit", "Over", "ScanCall", "ScanView", "ScanWarning", "Scanner", "ScannerKit", "scan", "scanner",
           "view"]
