"""The value boundary (agentnb._values): each kind of value converts as documented, or fails naming where."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pydantic
import pytest

import agentnb as anb
from agentnb import _values as values
from agentnb._messages import ToolCallPart
from agentnb.events import event_from_json, event_to_json, json_text


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int
    when: dt.date


class Order(pydantic.BaseModel):
    id: int
    tags: set[str]


class BadRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr for you")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


WHEN = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(("value", "expected"), [
    (np.float32(1.5), 1.5),
    (np.int64(7), 7),
    (np.bool_(True), True),
    (np.arange(3), [0, 1, 2]),
    (np.array([[1.5, np.nan]]), [[1.5, math.nan]]),
    (pd.Series([1, 2]), [1, 2]),
    (pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]),
    (pd.Timestamp("2024-01-02T03:04:05Z"), "2024-01-02T03:04:05Z"),
    (pd.NaT, None),
    (pd.NA, None),
    (WHEN, "2024-01-02T03:04:05Z"),
    (dt.date(2024, 1, 2), "2024-01-02"),
    (dt.timedelta(seconds=1.5), "PT1.5S"),
    (decimal.Decimal("1.10"), "1.10"),
    (ID, str(ID)),
    ({3, 1, 2}, [1, 2, 3]),
    (frozenset({"b", "a"}), ["a", "b"]),
    ((1, "a"), [1, "a"]),
    (collections.deque([1, 2]), [1, 2]),
    (range(3), [0, 1, 2]),
    ((i * 2 for i in range(3)), [0, 2, 4]),
    (iter([1]), [1]),
    (Colour.RED, "red"),
    (Level.HIGH, 3),
    (Point(1, dt.date(2024, 1, 2)), {"x": 1, "when": "2024-01-02"}),
    (Order(id=1, tags={"b", "a"}), {"id": 1, "tags": ["a", "b"]}),
    (b"plain", "plain"),
    (bytearray("é", "utf-8"), "é"),
    ({2: "a", None: "b", True: "c", 1.5: "d"}, {"2": "a", "null": "b", "true": "c", "1.5": "d"}),
    ({"nan": math.nan, "inf": [math.inf, -math.inf]}, {"nan": math.nan, "inf": [math.inf, -math.inf]}),
    (Path("/tmp/x"), "/tmp/x"),
    (KeyError("k"), "KeyError('k')"),
])
def test_values_convert_as_a_user_expects(value: Any, expected: Any) -> None:
    data = values.to_json_safe(value)
    assert same(data, expected)
    assert same(json.loads(json.dumps(data)), data)  # JSON-safe: the text reads back the same


def same(a: Any, b: Any) -> bool:
    """Equality where NaN equals NaN and types must match (1 is not True, 1.0 is not 1)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def self_list() -> list[Any]:
    x: list[Any] = [1]
    x.append({"again": x})
    return x


def self_dict() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["me"] = d
    return d


@pytest.mark.parametrize(("value", "path", "problem"), [
    ({"a": ["ok", "\ud83d"]}, "$.a[1]", "lone surrogate U+D83D"),
    ({"files": [os.fsdecode(b"report-\xff.txt")]}, "$.files[0]", "lone surrogate U+DCFF"),
    ({"x": Path(os.fsdecode(b"\xfe"))}, "$.x", "lone surrogate"),
    ({"\udc80": 1}, "$['\\udc80']", "lone surrogate"),
    ({"blob": b"\xff\xfe\x00"}, "$.blob", "not UTF-8 text (byte 0 is 0xff)"),
    (self_list(), "$[1].again", "contains itself"),
    (self_dict(), "$.me", "contains itself"),
    ({"obj": BadRepr()}, "$.obj", "its repr raised ValueError: no repr for you"),
    ({"deep": nested(900)}, "$.deep" + "[0]" * 63, "nested deeper than 64 levels"),
    ({(1, 2): "tuple key"}, "$[(1, 2)]", "dict key of type tuple"),
    ({"gen": (1 / 0 for _ in range(1))}, "$.gen", "raised ZeroDivisionError"),
])
def test_values_that_cannot_be_written_fail_naming_the_path(value: Any, path: str, problem: str) -> None:
    with pytest.raises(anb.ValueConversionError) as info:
        values.to_json_safe(value)
    assert info.value.path == path
    assert problem in info.value.problem
    assert str(info.value).encode("utf-8")  # the message itself can always be written


def test_the_model_sees_numbers_not_reprs() -> None:
    assert values.render(np.float32(1.5)) == "1.5"
    assert values.render({"t": np.float64(2.25), "n": np.int32(3)}) == '{"t": 2.25, "n": 3}'
    assert values.render("as is") == "as is"
    assert values.render(["é"]) == '["é"]'


def test_a_generator_is_consumed_once_and_model_and_audit_see_the_same_items() -> None:
    content, audit = values.convert_result(x for x in "abc")
    assert content == '["a", "b", "c"]' and audit == ["a", "b", "c"]


def test_arguments_check_names_the_problem_and_leaves_non_finite_numbers_to_the_schema() -> None:
    values.check_arguments({"x": math.nan, "y": [math.inf]})  # the schema decides about these
    with pytest.raises(anb.InvalidArguments) as info:
        values.check_arguments({"q": {"deep": nested(80)}})
    assert info.value.errors[0]["type"] == "too_deep" and info.value.errors[0]["loc"].startswith("q.deep[0]")
    with pytest.raises(anb.InvalidArguments) as info:
        values.check_arguments({"name": "x\udcff"})
    problem = "the text holds a lone surrogate U+DCFF (at character 1) that has no UTF-8 form"
    assert info.value.errors == [{"loc": "name", "type": "lone_surrogate", "msg": problem}]


def test_event_encoding_keeps_non_finite_numbers_and_lone_surrogates() -> None:
    run = anb.Loop(model=anb.ScriptedModel([{"text": "half \ud83d, whole 😀"}])).start("go").run()
    finished = run.events[-1]
    line = event_to_json(finished)
    assert line.isascii() and "\\ud83d" in line  # standard JSON escapes; UTF-8 encodable
    assert event_from_json(line) == finished
    assert json_text({"v": [math.nan, math.inf, -math.inf]}) == '{"v":[NaN,Infinity,-Infinity]}'
    assert json.loads(json_text({"v": [math.nan]}))["v"][0] != 0  # Python's json reads the tokens back


def test_a_deep_structure_after_a_lone_surrogate_is_still_too_deep() -> None:
    arguments = {"a": "\ud83d", "b": nested(900)}
    assert not values.fits(arguments)
    part = ToolCallPart(call_id="c", name="t", arguments_raw="{}", arguments=arguments)
    assert part.arguments is None  # the log could not hold it; the raw text keeps what the model sent
