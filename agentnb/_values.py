"""The one boundary for values: everything that enters a run becomes JSON-safe data, or a defined error.

Theory of operation. A run is its event log, and the log must read back exactly: what a transcript file, a
SQLite checkpoint or a Parquet frame gives back has to equal what the run held, or a resumed run would be
a different run (another request hash, another schema check). So every value that enters a run crosses this
module once, at the edge where it enters:

- **tool results** (:func:`convert_result`, called inside the tool's error boundary in
  :meth:`agentnb.tools.ToolRegistry.run`, so a result that cannot be converted is an error *result* and the
  tool is never run again for it);
- **submitted client results** (``run.submit_result``) and **results given to a fork** (the debugger);
- **call arguments**, as parsed from the model or as edited by an approver (:func:`check_arguments`, called
  by :meth:`agentnb.tools.Tool.validate` before the schema; the engine turns the refusal into an
  ``invalid_arguments`` error result the model can read);
- **parsed arguments inside a model's turn** (:func:`fits`, used by :class:`agentnb._messages.ToolCallPart`).

:func:`to_json_safe` turns a value into data made only of ``dict`` (string keys), ``list``, ``str``, ``int``,
``float``, ``bool`` and ``None``, or raises :class:`~agentnb.exceptions.ValueConversionError` naming the path
inside the value where it failed. Conversions, chosen to be what a user expects:

================================  ===================================================================
value                             becomes
================================  ===================================================================
``str`` (and subclasses)          itself; a lone surrogate (half an emoji, a file name decoded with
                                  ``surrogateescape``) is an error: it has no UTF-8 form
``bytes``, ``bytearray``          the text they hold if they are UTF-8; otherwise an error
``int``/``float`` (+ subclasses)  a plain ``int``/``float``; NaN and ±Infinity are kept (see below)
``Enum``                          its value, converted
numpy scalars and arrays          ``.item()`` / ``.tolist()``, converted (``np.float32(1.5)`` -> ``1.5``)
pandas                            ``DataFrame`` -> list of row dicts, ``Series``/``Index`` -> list,
                                  ``NA``/``NaT`` -> ``None``, ``Timestamp`` as a ``datetime``
``datetime``, ``date``, ``time``  ISO 8601 text (as pydantic writes it: ``2024-01-02T03:04:05Z``)
``timedelta``                     ISO 8601 duration text (``PT1.5S``)
``Decimal``, ``UUID``, ``Path``   their text (``Decimal`` keeps every digit)
``list``, ``tuple``, ``deque``    a list
``set``, ``frozenset``            a list, sorted when its items can be sorted
generators and iterators          a list of what they yield (consumed once; the model and the audit
                                  value see the same items)
``dict`` and other mappings       a dict; keys ``str``/``int``/``float``/``bool``/``None`` become text as
                                  in ``json.dumps``; other keys are an error
dataclasses, pydantic models      a dict of their fields, converted
anything else                     its ``repr`` (an error if ``repr`` raises)
================================  ===================================================================

A value that contains itself is an error (``contains itself``), and so is one nested deeper than
:data:`MAX_DEPTH` levels (the JSON readers under the log stop at about 200 levels, and a run's event wraps
a value in several levels of its own).

NaN and ±Infinity are kept as floats: the event log writes them as the tokens ``NaN``, ``Infinity`` and
``-Infinity`` (the extension of JSON that Python's ``json`` module, pydantic and pandas read), so a value
or an argument that holds one survives save, load and resume unchanged (see :mod:`agentnb.events`). Call
arguments may hold them only where the tool's schema allows them: a ``float`` parameter refuses them unless
declared ``Annotated[float, Field(allow_inf_nan=True)]``; an ``Any`` parameter takes them.

:func:`render` is what the model sees for a value: strings as they are, anything else as JSON text of its
converted form (non-ASCII kept).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network
from pathlib import PurePath
from typing import Any
from uuid import UUID

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from .exceptions import InvalidArguments, ValueConversionError

MAX_DEPTH = 64
"""How many levels of lists and dicts a value (or a call's arguments) may nest."""

_SCALARS = frozenset({str, int, float, bool, type(None)})

_PYDANTIC_LEAVES = (
    datetime, date, time, timedelta, Decimal, UUID, PurePath,
    IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network,
)


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{_safe_repr(key)}]"


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:80]


def text_problem(text: str) -> str | None:
    r"""Why ``text`` cannot be written as UTF-8 (it holds a lone surrogate), or None when it can.

    Example:
        >>> text_problem("half an emoji: \ud83d")
        'a lone surrogate U+D83D (at character 15) that has no UTF-8 form'
        >>> text_problem("fine") is None
        True
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"a lone surrogate U+{ord(text[exc.start]):04X} (at character {exc.start}) that has no UTF-8 form")
    return None


def exception_text(exc: BaseException) -> str:
    r"""``"Type: message"`` for an exception, safe to write whatever its ``__str__`` does.

    Example:
        >>> exception_text(ValueError("bad \ud83d"))
        'ValueError: bad \\ud83d'
    """
    try:
        message = str(exc)
    except Exception:
        message = "<the message could not be read>"
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _Fail(Exception):
    """A conversion failed; each container on the way out adds its step to ``segments`` (innermost first).

    Paths are only built on failure: the happy path formats no path strings at all.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.segments: list[str] = []

    def path(self) -> str:
        return "$" + "".join(reversed(self.segments))


def _segment(key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f".{key}"
    return f"[{_safe_repr(key)}]"


class _Converter:
    """One conversion: the containers on the current path (to find values that contain themselves)."""

    __slots__ = ("active", "max_depth")

    def __init__(self, max_depth: int) -> None:
        self.active: set[int] = set()
        self.max_depth = max_depth

    @staticmethod
    def text(text: str) -> str:
        if not text.isascii():
            problem = text_problem(text)
            if problem is not None:
                raise _Fail(f"the text holds {problem}")
        return text

    def enter(self, value: Any, depth: int) -> int:
        if depth >= self.max_depth:
            raise _Fail(f"the value is nested deeper than {self.max_depth} levels")
        ident = id(value)
        if ident in self.active:
            raise _Fail("the value contains itself")
        self.active.add(ident)
        return ident

    def convert(self, value: Any, depth: int) -> Any:
        t = type(value)
        if t is str:
            return value if value.isascii() else self.text(value)
        if value is None or t is int or t is float or t is bool:
            return value
        if t is dict:
            return self.mapping(value, depth)
        if t is list or t is tuple:
            return self.sequence(value, depth)
        return self.other(value, depth)

    def mapping(self, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        ident = self.enter(value, depth)
        convert = self.convert
        inner = depth + 1
        out: dict[str, Any] = {}
        try:
            for k, v in value.items():
                try:
                    out[k if type(k) is str and k.isascii() else self.key(k)] = convert(v, inner)
                except _Fail as fail:
                    fail.segments.append(_segment(k))
                    raise
        finally:
            self.active.discard(ident)
        return out

    def sequence(self, value: Any, depth: int) -> list[Any]:
        ident = self.enter(value, depth)
        convert = self.convert
        inner = depth + 1
        out: list[Any] = []
        append = out.append
        try:
            for i, v in enumerate(value):
                try:
                    append(convert(v, inner))
                except _Fail as fail:
                    fail.segments.append(f"[{i}]")
                    raise
        finally:
            self.active.discard(ident)
        return out

    def key(self, key: Any) -> str:
        if isinstance(key, Enum):
            key = key.value
        if isinstance(key, str):
            return self.text(str.__str__(key))
        if key is None or isinstance(key, bool | int | float):
            return json.dumps(key)  # as json.dumps writes keys: null, true, 1, 1.5, NaN
        np = sys.modules.get("numpy")
        if np is not None and isinstance(key, np.generic):
            return self.key(key.item())
        if isinstance(key, _PYDANTIC_LEAVES):
            return self.text(str(to_jsonable_python(key)))
        raise _Fail(f"a dict key of type {type(key).__name__} has no JSON form (use str keys)")

    def other(self, value: Any, depth: int) -> Any:
        scalar = self.scalar(value, depth)
        if scalar is not _NOTHING:
            return scalar
        special = self.library(value, depth)
        if special is not _NOTHING:
            return special
        if isinstance(value, _PYDANTIC_LEAVES):
            return self.text(to_jsonable_python(value))
        if isinstance(value, Mapping):
            return self.mapping(value, depth)
        if isinstance(value, set | frozenset):
            items = list(value)
            try:
                items.sort()
            except Exception:  # items of kinds that do not compare keep the set's order
                pass
            return self.sequence(items, depth)
        if isinstance(value, BaseModel) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            return self.record(value, depth)
        if isinstance(value, Sequence | range):
            return self.sequence(value, depth)
        if isinstance(value, Iterator):
            try:
                items = list(value)
            except Exception as exc:
                raise _Fail(f"iterating the {type(value).__name__} raised {exception_text(exc)}") from None
            return self.sequence(items, depth)
        try:
            text = repr(value)
        except Exception as exc:
            raise _Fail(
                f"an object of type {type(value).__name__} has no JSON form and its repr raised {exception_text(exc)}"
            ) from None
        if not isinstance(text, str):
            raise _Fail(f"the repr of a {type(value).__name__} is not text")
        return self.text(text)

    def scalar(self, value: Any, depth: int) -> Any:
        """Subclasses of the JSON scalars, enums and bytes."""
        # Enum first: IntEnum and StrEnum are also ints and strs.
        if isinstance(value, Enum):
            return self.convert(value.value, depth)
        if isinstance(value, str):
            return self.text(str.__str__(value))
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Fail(
                    f"bytes that are not UTF-8 text (byte {exc.start} is 0x{bytes(value)[exc.start]:02x}); "
                    "decode them, or return base64 text"
                ) from None
        return _NOTHING

    def record(self, value: Any, depth: int) -> Any:
        """A pydantic model (through its own ``model_dump``) or a dataclass, as a dict of its fields."""
        ident = self.enter(value, depth)
        try:
            if isinstance(value, BaseModel):
                try:  # model_dump applies the model's own serializers and aliases
                    data = value.model_dump(mode="python", by_alias=True)
                except Exception as exc:
                    raise _Fail(f"{type(value).__name__}.model_dump() raised {exception_text(exc)}") from None
            else:
                data = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return self.mapping(data, depth)
        finally:
            self.active.discard(ident)

    def library(self, value: Any, depth: int) -> Any:
        """Values of numpy and pandas, recognised only when those libraries are already imported."""
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(value, np.ndarray):
                return self.convert(value.tolist(), depth)
            if isinstance(value, np.generic):
                item = value.item()
                if type(item) is type(value):  # e.g. longdouble: item() gives the numpy type back
                    item = float(value) if isinstance(value, np.floating) else repr(value)
                return self.convert(item, depth)
        pd = sys.modules.get("pandas")
        if pd is not None:
            if value is pd.NaT or value is pd.NA:
                return None
            if isinstance(value, pd.DataFrame):
                return self.convert(value.to_dict(orient="records"), depth)
            if isinstance(value, pd.Series | pd.Index):
                return self.convert(value.tolist(), depth)
        return _NOTHING


_NOTHING = object()


def to_json_safe(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` as JSON-safe data that reads back exactly (see the module docs for each kind of value).

    Raises:
        ValueConversionError: the value has no such form; ``path`` says where inside it.

    Example:
        >>> import datetime, decimal
        >>> to_json_safe({"when": datetime.date(2024, 1, 2), "price": decimal.Decimal("1.10"), "tags": {"b", "a"}})
        {'when': '2024-01-02', 'price': '1.10', 'tags': ['a', 'b']}
        >>> loop = []
        >>> loop.append(loop)
        >>> to_json_safe({"x": loop})
        Traceback (most recent call last):
        ...
        agentnb.exceptions.ValueConversionError: the value contains itself at $.x[0]
    """
    try:
        return _Converter(max_depth).convert(value, 0)
    except _Fail as fail:
        raise ValueConversionError(fail.path(), fail.problem) from None


def render(value: Any) -> str:
    """The text a model sees for a value: a string as it is, anything else as JSON of its converted form.

    Raises:
        ValueConversionError: as :func:`to_json_safe`.

    Example:
        >>> import numpy as np
        >>> render({"x": np.float32(1.5)})
        '{"x": 1.5}'
    """
    if type(value) is str:
        problem = text_problem(value)
        if problem is not None:
            raise ValueConversionError("$", f"the text holds {problem}")
        return value
    return render_safe(to_json_safe(value))


def render_safe(data: Any) -> str:
    """:func:`render` for data that is already JSON-safe (the output of :func:`to_json_safe`)."""
    if isinstance(data, str):
        return data
    return json.dumps(data, ensure_ascii=False)


def convert_result(value: Any) -> tuple[str, Any]:
    """What a tool's (or a client's) result becomes: ``(content the model sees, audit value)``.

    Both come from one conversion, so a generator is consumed once and the model and the audit see the
    same items.

    Raises:
        ValueConversionError: as :func:`to_json_safe`.

    Example:
        >>> convert_result(i * i for i in range(3))
        ('[0, 1, 4]', [0, 1, 4])
    """
    if type(value) is str and value.isascii():
        return value, value
    data = to_json_safe(value)
    return render_safe(data), data


def _depth_problem(value: Any, max_depth: int, texts: bool = True) -> tuple[str, str] | None:
    """The first (path, problem) of depth, self-containment or (``texts``) lone surrogates in JSON-like data."""
    active: set[int] = set()

    def walk(v: Any, path: str, depth: int) -> tuple[str, str] | None:
        if isinstance(v, str):
            problem = text_problem(v) if texts else None
            return (path, f"the text holds {problem}") if problem else None
        if isinstance(v, dict | list | tuple):
            if depth >= max_depth:
                return path, f"the arguments are nested deeper than {max_depth} levels"
            if id(v) in active:
                return path, "the arguments contain themselves"
            active.add(id(v))
            try:
                if isinstance(v, dict):
                    for k, x in v.items():
                        sub = _key_path(path, k)
                        if texts and isinstance(k, str) and (problem := text_problem(k)):
                            return sub, f"the key holds {problem}"
                        found = walk(x, sub, depth + 1)
                        if found:
                            return found
                else:
                    for i, x in enumerate(v):
                        found = walk(x, f"{path}[{i}]", depth + 1)
                        if found:
                            return found
            finally:
                active.discard(id(v))
        return None

    return walk(value, "$", 0)


def fits(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether JSON-like data nests at most ``max_depth`` levels and does not contain itself.

    Example:
        >>> fits({"a": [1, 2]}), fits([[[1]]], max_depth=2)
        (True, False)
    """
    if type(value) is dict and max_depth > 0 and all(type(v) in _SCALARS for v in value.values()):
        return True  # flat arguments, the common case: nothing to walk
    return _depth_problem(value, max_depth, texts=False) is None


def check_arguments(arguments: Any, max_depth: int = MAX_DEPTH) -> None:
    r"""Refuse call arguments that cannot enter a run, before any schema sees them.

    Lone surrogates (in values or keys), nesting deeper than ``max_depth`` and arguments that contain
    themselves are refused; non-finite numbers are left to the schema (see :meth:`agentnb.tools.Tool.validate`).

    Raises:
        InvalidArguments: naming the first problem and where it is.

    Example:
        >>> check_arguments({"city": "Paris"})
        >>> check_arguments({"city": "\ud83d"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        agentnb.exceptions.InvalidArguments: the text holds a lone surrogate U+D83D ... at $.city
    """
    if type(arguments) is dict and max_depth > 0 and all(
        type(k) is str and k.isascii() and (v.isascii() if type(v) is str else type(v) in _SCALARS)
        for k, v in arguments.items()
    ):
        return  # flat arguments of ASCII text and scalars, the common case: nothing to walk
    found = _depth_problem(arguments, max_depth)
    if found is not None:
        path, problem = found
        loc = path[2:] if path.startswith("$.") else path[1:] or "(arguments)"
        kind = "lone_surrogate" if "surrogate" in problem else "too_deep" if "deeper" in problem else "recursive"
        raise InvalidArguments([{"loc": loc, "msg": problem, "type": kind}])


def non_finite(value: Any) -> bool:
    """Whether a float is NaN or ±Infinity.

    Example:
        >>> non_finite(float("nan")), non_finite(1.5)
        (True, False)
    """
    return isinstance(value, float) and not math.isfinite(value)


__all__ = [
    "MAX_DEPTH", "check_arguments", "convert_result", "exception_text", "fits", "non_finite", "render", "render_safe",
    "text_problem", "to_json_safe",
]
