"""Named stories: scripted models with the tools they call, for the notebooks, workshops and tests.

Example:
    >>> import agentnb as anb
    >>> sorted(anb.stories.names())
    ['calculator', 'looping', 'malformed', 'parallel', 'refund', 'weather']
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
    >>> loop.start("Refund order 42").run().state
    <LoopState.WAITING_APPROVAL: 'WAITING_APPROVAL'>
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from ._messages import Message
from .tools import Tool, tool

__all__ = [
    "describe",
    "names",
    "script",
    "tools",
]

Step = dict[str, Any] | Callable[[Sequence[Message]], dict[str, Any]]
"""One turn of a story's script: :data:`agentnb.providers._scripted.ScriptStep`, spelled out here because the
scripted model reads these stories (``ScriptedModel.story``), so naming its module would close a circle."""

_CITIES: dict[str, dict[str, Any]] = {
    "Paris": {"temp_c": 18, "sky": "sunny"},
    "London": {"temp_c": 12, "sky": "drizzle"},
    "Tokyo": {"temp_c": 22, "sky": "clear"},
    "Oslo": {"temp_c": 3, "sky": "snow"},
}
_ORDERS: dict[str, dict[str, Any]] = {
    "42": {"order_id": "42", "item": "Blue kettle", "amount_cents": 1999, "status": "delivered"},
}


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
        unit: "c" for Celsius or "f" for Fahrenheit.
    """
    if city not in _CITIES:
        raise ValueError(f"no weather station for {city!r}; try one of {', '.join(_CITIES)}")
    data = _CITIES[city]
    temp = data["temp_c"] if unit == "c" else round(data["temp_c"] * 9 / 5 + 32)
    key = "temp_c" if unit == "c" else "temp_f"
    return {"city": city, key: temp, "sky": data["sky"]}


@tool
def get_order(order_id: str) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order number.
    """
    if order_id not in _ORDERS:
        raise KeyError(f"order {order_id} not found")
    return dict(_ORDERS[order_id])


@tool(approval=True, risk="write")
def create_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Refund (part of) an order. Moves money: a person must approve it.

    Args:
        order_id: The order number.
        amount_cents: The amount to refund, in cents.
    """
    return {"refund_id": f"rf_{order_id}_{amount_cents}", "order_id": order_id, "amount_cents": amount_cents}


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


@tool
def search(query: str) -> str:
    """Search the knowledge base.

    Args:
        query: What to look for.
    """
    return "No results."


def _last_results(messages: Sequence[Message]) -> list[Any]:
    for m in reversed(messages):
        if m.role == "tool":
            return m.tool_results
    return []


def _value(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


def _weather_answer(messages: Sequence[Message]) -> dict[str, Any]:
    r = _last_results(messages)[0]
    if r.status != "ok":
        return {"text": f"I could not get the weather: {r.content}"}
    w = _value(r.content)
    return {"text": f"It is {w['temp_c']} °C and {w['sky']} in {w['city']}."}


def _refund_answer(messages: Sequence[Message]) -> dict[str, Any]:
    r = _last_results(messages)[0]
    if r.status == "ok":
        refund = _value(r.content)
        return {"text": f"Done: refund {refund['refund_id']} of ${refund['amount_cents'] / 100:.2f} for order 42."}
    if r.status == "denied":
        return {"text": f"I did not refund order 42: the refund was not approved ({r.content})."}
    return {"text": f"The refund failed: {r.content}"}


def _trip_answer(messages: Sequence[Message]) -> dict[str, Any]:
    parts = []
    for r in _last_results(messages):
        w = _value(r.content)
        parts.append(f"{w['city']} {w['temp_c']} °C ({w['sky']})" if r.status == "ok" else f"{r.content}")
    return {"text": "Weather now: " + "; ".join(parts) + "."}


def _loop_step(messages: Sequence[Message]) -> dict[str, Any]:
    last = messages[-1]
    if last.role == "user" and len(messages) > 2:  # the finalization instruction
        return {"text": "I searched several times and found nothing about it, so I cannot answer."}
    return {"tool_calls": [{"name": "search", "arguments": {"query": "agentnb release date"}}]}


def _calc_answer(messages: Sequence[Message]) -> dict[str, Any]:
    return {"text": f"(2 + 3) × 4 = {_value(_last_results(messages)[0].content):g}."}


def _calc_second(messages: Sequence[Message]) -> dict[str, Any]:
    total = _value(_last_results(messages)[0].content)
    return {"tool_calls": [{"name": "multiply", "arguments": {"a": total, "b": 4}}]}


_STORIES: dict[str, tuple[Callable[[], list[Step]], list[Tool], str]] = {
    "weather": (
        lambda: [
            {"text": "Let me check.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            _weather_answer,
        ],
        [get_weather],
        "one lookup, then an answer that uses the result",
    ),
    "parallel": (
        lambda: [
            {"tool_calls": [
                {"name": "get_weather", "arguments": {"city": c}} for c in ("Paris", "London", "Tokyo")
            ]},
            _trip_answer,
        ],
        [get_weather],
        "three calls in one turn, answered in the model's order",
    ),
    "refund": (
        lambda: [
            {"tool_calls": [{"name": "get_order", "arguments": {"order_id": "42"}}]},
            {"text": "The order was delivered; I will refund it.",
             "tool_calls": [{"name": "create_refund", "arguments": {"order_id": "42", "amount_cents": 1999}}]},
            _refund_answer,
        ],
        [get_order, create_refund],
        "a read, then a write that waits for a person's approval",
    ),
    "calculator": (
        lambda: [
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
            _calc_second,
            _calc_answer,
        ],
        [add, multiply],
        "two dependent calls; the second uses the first result",
    ),
    "malformed": (
        lambda: [
            {"tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": '}]},
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": "three"}}]},
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
            {"text": "2 + 3 = 5."},
        ],
        [add, multiply],
        "broken JSON, then a schema error, then a correct call: the model reads each error",
    ),
    "looping": (
        lambda: [_loop_step] * 200,
        [search],
        "a model that repeats the same call until a guard stops it",
    ),
}


def names() -> list[str]:
    """The names of the stories that ship with agentnb."""
    return list(_STORIES)


def describe(name: str) -> str:
    """One line on what a story shows."""
    return _entry(name)[2]


def tools(name: str) -> list[Tool]:
    """The tools a story's model calls."""
    return list(_entry(name)[1])


def script(name: str) -> list[Step]:
    """A fresh copy of a story's script (what :meth:`agentnb.ScriptedModel.story` plays)."""
    return _entry(name)[0]()


def _entry(name: str) -> tuple[Callable[[], list[Step]], list[Tool], str]:
    try:
        return _STORIES[name]
    except KeyError:
        raise KeyError(f"no story {name!r}; stories: {', '.join(_STORIES)}") from None
