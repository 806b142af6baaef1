r"""The smallest value a JSON schema accepts: what the emulator puts in the calls it has to make up.

Theory of operation. A service that enforces a tool choice or strict mode never answers with arguments that do
not fit the tool's schema (constrained decoding); the emulator, which plays scripted turns, has to make such
arguments up when the script has none (:mod:`agentnb.emulator._choice`). :func:`minimal_instance` walks the
schema and returns, for each keyword it honours, a value that satisfies it:

- objects: the required properties (strict mode requires them all); arrays: ``minItems`` items;
- strings: ``const``/``enum``, a few ``format`` values (``date-time``, ``date``, ``time``, ``email``, ``uri``,
  ``uuid``, ``ipv4``), ``minLength``/``maxLength``, and ``pattern``: a string made from the pattern itself by
  walking the standard library's parse of it (literals, classes, ranges, ``\d``/``\w``/``\s``, groups,
  alternatives, repeats, anchors, back references), checked with ``re.search`` before it is used;
- numbers and integers: ``minimum``/``maximum``, ``exclusiveMinimum``/``exclusiveMaximum`` (the 2020-12 numbers
  and the draft-4 booleans) and ``multipleOf``, the value nearest to zero that fits.

What it cannot satisfy -- a pattern with lookarounds or a construct it does not walk, a string it made that the
pattern then refuses, bounds no value fits -- it refuses to invent: a ``ValueError`` names the field, the
keyword and what to do (script the call's arguments). The emulator answers the request with a 500 that tells
the SDK not to retry, its message naming all of that; a call that does not fit would only be refused later,
further from its cause.
"""

from __future__ import annotations

import math
import re
from typing import Any

_FORMATS = {"date-time": "1970-01-01T00:00:00Z", "date": "1970-01-01", "time": "00:00:00Z",
            "email": "x@example.com", "uri": "https://example.com/", "uuid": "00000000-0000-0000-0000-000000000000",
            "ipv4": "127.0.0.1", "hostname": "example.com"}
"""A value of each common ``format`` (the one pydantic's own types check: datetime, date, EmailStr, ...)."""


def minimal_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None, where: str = "$") -> Any:
    r"""The smallest value a JSON schema accepts (required properties only; the first enum value).

    Raises:
        ValueError: no value can be made for the schema at ``where`` (the message says why, and what to do).

    Example:
        >>> code = {"type": "string", "pattern": "^[A-Z]{2}-\\d+$"}
        >>> minimal_instance({"type": "object", "properties": {"code": code, "n": {"type": "integer",
        ...     "exclusiveMinimum": 0}}, "required": ["code", "n"]})
        {'code': 'AA-0', 'n': 1}
    """
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal_instance(defs.get(str(schema["$ref"]).split("/")[-1], {}), defs, where)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0], defs, where)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "null")
    kind = str(kind).lower() if kind is not None else None  # Gemini's schemas say STRING, OBJECT, ...
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: minimal_instance(props.get(k, {}), defs, f"{where}.{k}") for k in schema.get("required", [])}
    if kind == "array":
        return [minimal_instance(schema.get("items", {}), defs, f"{where}[{i}]")
                for i in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return _string(schema, where)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer", where)
    if kind == "boolean":
        return False
    return None


# -- numbers ------------------------------------------------------------------------------------------------


def _bounds(schema: dict[str, Any]) -> tuple[float | None, bool, float | None, bool]:
    """``(low, low is exclusive, high, high is exclusive)``, the tighter of each pair of keywords."""
    low, low_x, high, high_x = schema.get("minimum"), False, schema.get("maximum"), False
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if ex_low is True:  # draft 4: a flag on minimum
        low_x = low is not None
    elif isinstance(ex_low, int | float) and (low is None or ex_low >= low):
        low, low_x = ex_low, True
    if ex_high is True:
        high_x = high is not None
    elif isinstance(ex_high, int | float) and (high is None or ex_high <= high):
        high, high_x = ex_high, True
    return low, low_x, high, high_x


def _number(schema: dict[str, Any], integer: bool, where: str) -> int | float:
    """The number nearest to zero inside the bounds (a multiple of ``multipleOf``; whole for an integer)."""
    low, low_x, high, high_x = _bounds(schema)
    step = schema.get("multipleOf")
    if not isinstance(step, int | float) or isinstance(step, bool) or step <= 0:
        step = 1 if integer else None
    value: float
    if step is None:  # any number: zero, or the bound nearest to it, moved inside when it is exclusive
        value = 0.0
        if low is not None and not _fits(value, low, low_x, None, False):
            value = _above(float(low), high) if low_x else float(low)
        elif high is not None and not _fits(value, None, False, high, high_x):
            value = _below(float(high), low) if high_x else float(high)
    else:  # the multiple of the step nearest to zero
        k = 0
        if low is not None and not _fits(0, low, low_x, None, False):
            k = math.floor(low / step) + 1 if low_x else math.ceil(low / step)
        elif high is not None and not _fits(0, None, False, high, high_x):
            k = math.ceil(high / step) - 1 if high_x else math.floor(high / step)
        value = k * step
    if not _fits(value, low, low_x, high, high_x) or (integer and value != int(value)):
        raise ValueError(f"the emulator cannot make up a number for {where}: no {'integer' if integer else 'number'} "
                         f"fits {_said(schema)}; script this call's arguments instead")
    return int(value) if integer else float(value)


def _above(low: float, high: float | None) -> float:
    """A number above ``low`` (one more, or halfway to ``high`` when that is nearer)."""
    return low + 1 if high is None or low + 1 < high else (low + high) / 2


def _below(high: float, low: float | None) -> float:
    return high - 1 if low is None or high - 1 > low else (low + high) / 2


def _fits(value: float, low: float | None, low_x: bool, high: float | None, high_x: bool) -> bool:
    return ((low is None or (value > low if low_x else value >= low))
            and (high is None or (value < high if high_x else value <= high)))


def _said(schema: dict[str, Any]) -> str:
    keys = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
            "pattern")
    return ", ".join(f"{k}={schema[k]!r}" for k in keys if k in schema)


# -- strings ------------------------------------------------------------------------------------------------


def _string(schema: dict[str, Any], where: str) -> str:
    least, most = int(schema.get("minLength", 0)), schema.get("maxLength")
    most = most if isinstance(most, int) and not isinstance(most, bool) else None
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        return _matching(pattern, least, most, where)
    example = _FORMATS.get(str(schema.get("format")))
    if example is not None and least <= len(example) and (most is None or len(example) <= most):
        return example
    n = max(least, 1) if most is None else min(max(least, 1), most)
    if n < least:
        raise ValueError(f"the emulator cannot make up a string for {where}: {_said(schema)} leave no length; "
                         "script this call's arguments instead")
    return "x" * n


def _matching(pattern: str, least: int, most: int | None, where: str) -> str:
    """A string ``re.search(pattern, ...)`` finds, of ``least`` to ``most`` characters."""
    why = "a construct the emulator's generator does not make strings for (a lookaround, a conditional)"
    try:
        compiled = re.compile(pattern)
        parsed = _parse(pattern)
        for stretch in range(max(least, 1) + 1):  # repeats grow until the string is long enough
            text = _Maker(stretch).make(parsed)
            if len(text) >= least or stretch == least:
                break
        if compiled.search(text) and len(text) >= least and (most is None or len(text) <= most):
            return text
        why = f"the string it made, {text!r}, does not fit (the length bounds, or an anchor inside the pattern)"
    except (re.error, _Unsupported, RecursionError, TypeError, ValueError, IndexError) as exc:
        if isinstance(exc, re.error):
            why = f"it is not a regular expression Python reads ({exc})"
    raise ValueError(f"the emulator cannot make up a string for {where} that matches pattern {pattern!r}: {why}; "
                     "script this call's arguments instead")


class _Unsupported(Exception):
    """A part of a pattern the generator does not make strings for."""


def _parse(pattern: str) -> Any:
    """The standard library's parse of a pattern (``re._parser``: private, so anything odd is unsupported)."""
    from re import _parser  # type: ignore[attr-defined]

    return _parser.parse(pattern)


_CATEGORY = {"CATEGORY_DIGIT": "0", "CATEGORY_NOT_DIGIT": "a", "CATEGORY_WORD": "a", "CATEGORY_NOT_WORD": " ",
             "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "a", "CATEGORY_LINEBREAK": "\n",
             "CATEGORY_NOT_LINEBREAK": "a"}
_CANDIDATES = "aA0_ -.x@z9Z"
"""Characters tried, in order, for a negated class (``[^...]``)."""


class _Maker:
    """Makes the shortest string of a parsed pattern; ``stretch`` more repeats where a repeat allows them."""

    def __init__(self, stretch: int) -> None:
        self.stretch = stretch
        self.groups: dict[int, str] = {}

    def make(self, items: Any) -> str:
        return "".join(self.one(str(op), av) for op, av in items)

    def one(self, op: str, av: Any) -> str:
        if op == "LITERAL":
            return chr(av)
        if op == "NOT_LITERAL":
            return next(c for c in _CANDIDATES if ord(c) != av)
        if op == "ANY":
            return "a"
        if op == "IN":
            return self.member(av)
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = av
            count = low if high == low else min(int(high), low + self.stretch)
            return "".join(self.make(sub) for _ in range(count))
        if op == "SUBPATTERN":
            group, _, _, sub = av
            text = self.make(sub)
            if group is not None:
                self.groups[group] = text
            return text
        if op == "ATOMIC_GROUP":
            return self.make(av)
        if op == "BRANCH":
            return self.make(av[1][0])
        if op == "AT":
            return ""
        if op == "GROUPREF":
            return self.groups.get(av, "")
        raise _Unsupported(op)

    def member(self, items: Any) -> str:
        """A character of a class: its first member, or for ``[^...]`` the first candidate it does not exclude."""
        if items and str(items[0][0]) == "NEGATE":
            excluded = [(str(op), av) for op, av in items[1:]]
            for c in _CANDIDATES:
                if not any(_in_class(c, op, av) for op, av in excluded):
                    return c
            raise _Unsupported("NEGATE")
        op, av = str(items[0][0]), items[0][1]
        if op == "LITERAL":
            return chr(av)
        if op == "RANGE":
            return chr(av[0])
        if op == "CATEGORY" and str(av) in _CATEGORY:
            return _CATEGORY[str(av)]
        raise _Unsupported(op)


def _in_class(c: str, op: str, av: Any) -> bool:
    if op == "LITERAL":
        return ord(c) == int(av)
    if op == "RANGE":
        low, high = int(av[0]), int(av[1])
        return low <= ord(c) <= high
    if op == "CATEGORY":
        probe = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_WORD": r"\w",
                 "CATEGORY_NOT_WORD": r"\W", "CATEGORY_SPACE": r"\s", "CATEGORY_NOT_SPACE": r"\S"}.get(str(av))
        return probe is None or re.fullmatch(probe, c) is not None
    return True  # anything else excludes every candidate: the class is unsupported
