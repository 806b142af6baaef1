"""What a scanner is: a named, versioned function of a run (or of each call, or of each event) and its hits.

A scanner's function may answer with whatever is natural: ``None`` or ``False`` (nothing found), ``True`` (a
flag), a string (a flag with a message), a :class:`Hit`, any other value (a hit holding that value), or a list of
these. :func:`normalize` turns every answer into a list of :class:`Hit`, with the place the function was called
on (the call, the event) filled in where the hit does not say, and its value made JSON-safe by
:mod:`agentnb._values`, so that a hit read back from the cache equals the hit first found.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from .._values import to_json_safe
from ..events import BaseEvent
from ._views import ScanCall, view

if TYPE_CHECKING:
    from .._transcript import Transcript

Over = Literal["run", "call", "event"]
"""What a scanner's function is called on: the whole run (a :class:`~agentnb.Transcript`), each call (a
:class:`ScanCall`) or each event."""

OVERS: tuple[str, ...] = ("run", "call", "event")


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """One thing a scanner found in a run: where (an event, a call, or the whole run), what and how much.

    Attributes:
        message: what was found, in a sentence.
        seq: the event the hit is about (its ``seq`` in the run's log); for a call, the call's ``seq`` in
            ``frames.calls()`` when not given; None: the whole run.
        call_id: the call the hit is about, if any.
        value: what the scanner answered (``True`` for a plain flag; a question's typed answer as JSON data).
        score: how strongly (a count, a ratio), when the scanner measures one.

    Example:
        >>> import agentnb as anb
        >>> anb.Hit(message="the same call twice", call_id="call_2_1").value
        True
    """

    message: str | None = None
    seq: int | None = None
    call_id: str | None = None
    value: Any = True
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The hit as JSON data (what the cache holds)."""
        return {"message": self.message, "seq": self.seq, "call_id": self.call_id, "value": self.value,
                "score": self.score}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Hit:
        """A hit from :meth:`to_json`'s data."""
        return cls(message=data.get("message"), seq=data.get("seq"), call_id=data.get("call_id"),
                   value=data.get("value", True), score=data.get("score"))


_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,80}$")


@dataclass(frozen=True, slots=True)
class Scanner:
    """A named, versioned function of a run (``over="run"``), of each call or of each event, that finds hits.

    Results are cached under ``(name, version, the run's digest)``: change ``version`` when the function
    changes what it finds, and a scan with a cache finds again in every run.

    Args:
        name: the scanner's name (letters, digits, ``_ . : -``); the ``scanner`` column of the results.
        fn: the function (see :mod:`agentnb.scanners._core` for what it may answer).
        over: ``"run"`` (called with the :class:`~agentnb.Transcript`), ``"call"`` (with each
            :class:`ScanCall`) or ``"event"`` (with each event).
        version: the function's version, part of the cache key.

    Example:
        >>> import agentnb as anb
        >>> many = anb.Scanner("many_calls", lambda t: len(t.frames.calls()) > 2, version="2")
        >>> many.key
        'many_calls@2'
    """

    name: str
    fn: Callable[[Any], Any]
    over: Over = "run"
    version: str = "1"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a scanner's name is 1 to 80 letters, digits or _ . : - ; got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"scanner {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        if self.over not in OVERS:
            raise ValueError(f"scanner {self.name!r}: over must be one of {', '.join(OVERS)}; got {self.over!r}")
        if not isinstance(self.version, str) or not self.version:
            raise ValueError(f"scanner {self.name!r}: version must be a non-empty string, got {self.version!r}")

    @property
    def key(self) -> str:
        """``name@version``: what the cache files of this scanner are kept under."""
        return f"{self.name}@{self.version}"

    def __call__(self, transcript: Transcript) -> list[Hit]:
        """The hits in one run (the function applied over the run, its calls or its events)."""
        if self.over == "run":
            return normalize(self.fn(transcript))
        if self.over == "event":
            return [h for ev in transcript.events for h in normalize(self.fn(ev), seq=ev.seq)]
        return [h for call in calls_of(transcript)
                for h in normalize(self.fn(call), seq=call.seq, call_id=call.call_id)]


def normalize(answer: Any, *, seq: int | None = None, call_id: str | None = None) -> list[Hit]:
    """A scanner's answer as hits (see the module docs), with ``seq``/``call_id`` where a hit leaves them out."""
    return list(_hits(answer, seq, call_id))


def _hits(answer: Any, seq: int | None, call_id: str | None) -> Iterator[Hit]:
    if answer is None or answer is False:
        return
    if isinstance(answer, Hit):
        yield replace(answer, seq=answer.seq if answer.seq is not None else seq,
                      call_id=answer.call_id if answer.call_id is not None else call_id,
                      value=to_json_safe(answer.value),
                      score=None if answer.score is None else float(answer.score))
    elif answer is True:
        yield Hit(seq=seq, call_id=call_id)
    elif isinstance(answer, str):
        yield Hit(message=answer, seq=seq, call_id=call_id)
    elif isinstance(answer, list | tuple | Iterator):
        for item in answer:
            yield from _hits(item, seq, call_id)
    else:
        yield Hit(seq=seq, call_id=call_id, value=to_json_safe(answer))


def calls_of(transcript: Transcript) -> list[ScanCall]:
    """Every call of a run, with its result as the model saw it (built once per run: :func:`.views.view`)."""
    return view(transcript).scan_calls


def as_scanners(items: Iterable[Any]) -> list[Scanner]:
    """The scanners of a scan: :class:`Scanner` objects, or plain functions of a run (named after themselves).

    Raises:
        TypeError: an item is neither.
        ValueError: two scanners share a name.
    """
    out: list[Scanner] = []
    for i, item in enumerate(items):
        if isinstance(item, Scanner):
            out.append(item)
        elif callable(item) and not isinstance(item, type | BaseEvent):
            named = str(getattr(item, "__name__", None) or type(item).__name__)  # a function, or a callable object
            out.append(Scanner(named if _NAME.match(named) else f"scanner_{i}", item))
        else:
            raise TypeError(f"scanner {i} is a {type(item).__name__}: give a Scanner (@anb.scanner, "
                            "anb.scanner.ask(...)) or a function of a run")
    names = [s.name for s in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two scanners are named {twice[0]!r}: give each its own name (Scanner(name=...))")
    return out
