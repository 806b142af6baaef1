"""Prices: the one rule that says what a model turn costs, for the budget, the frames and the debugger alike.

Theory of operation. A turn says who answered (``provider``: the wire API's tag, ``openai_chat``) and which
model (``model``, as the service names it: OpenAI answers a request for ``gpt-4.1`` with the dated snapshot
``gpt-4.1-2025-04-14``). Prices are US dollars per million tokens, ``(input, output)``, the unit providers
publish. :func:`resolve` finds a turn's price in two places, in this order:

1. the user's mapping (``Budget(prices=...)``, ``frames.turns(prices=...)``), trying the keys of
   :func:`keys`: ``name:model`` for each name the provider goes by (its tag first, then the names a
   :class:`PriceTable` adds: the prefixes of ``anb.model`` and the vendor, so ``openai:gpt-4.1`` prices an
   ``openai_chat`` turn), then the bare ``model``; then the same for the model's alias when the model is a
   dated snapshot (:func:`alias`);
2. then the table (a :class:`PriceTable`; the ``Loop`` puts agentnb's maintained table in the budget, see
   :mod:`agentnb.providers._prices`), which knows each vendor's models with their own snapshots and aliases.

So the user's price wins over the table at every step, and a price filed under the alias still counts when
the service answers with a snapshot. The snapshot rule, exactly: a name ending in ``-YYYY-MM-DD`` or
``-YYYYMMDD``, a real calendar date of the years 2000 to 2099, is a snapshot of the name before the date
(``gpt-4o-2024-08-06`` and ``claude-3-5-sonnet-20241022`` are snapshots of ``gpt-4o`` and
``claude-3-5-sonnet``). Nothing else is: ``-001``, ``-latest`` and ``-preview`` suffixes are names of their
own, case counts, and an alias never finds a price filed under one of its snapshots (which one would it be?).

A run's spending is the sum over the ``(provider, model)`` pairs it used (the fold keeps their tokens):
:func:`spent` adds the priced pairs and names the unpriced ones. Everything here is pure: the engine reads no
table of its own and no clock; a :class:`PriceTable` must answer one question the same way for the life of
a process (``decide()`` is called twice on one state and must agree).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date
from functools import lru_cache
from typing import Protocol

Price = tuple[float, float]
"""US dollars per million input tokens, per million output tokens."""

Prices = Mapping[str, Sequence[float]]
"""A user's prices: ``{"model" or "provider:model": (input, output)}``, dollars per million tokens."""

PriceOf = Callable[[str, str], "Price | None"]
"""``price_of(provider, model)``: the price a turn is counted at, or None."""


class PriceTable(Protocol):
    """A maintained table of published prices, and the names each provider goes by.

    The ``Loop`` puts agentnb's (:class:`agentnb.providers._prices.PublishedPrices`) in ``Budget.price_table``;
    a table of your own needs these two methods, and must answer the same question the same way every time.
    """

    def names(self, provider: str) -> Sequence[str]:
        """The names a price may be filed under for ``provider``'s turns, its own tag first."""
        ...

    def price(self, provider: str, model: str) -> Price | None:
        """The published price of ``model`` served by ``provider``, or None when the table has none."""
        ...


_DASHED = re.compile(r"-(20\d\d)-(\d\d)-(\d\d)$")
_COMPACT = re.compile(r"-(20\d\d)(\d\d)(\d\d)$")


@lru_cache(maxsize=1024)  # a run names a few models, and asks before every request
def alias(model: str) -> str | None:
    """The alias of a dated snapshot (``name-YYYY-MM-DD`` or ``name-YYYYMMDD``), or None for any other name.

    Example:
        >>> alias("gpt-4.1-2025-04-14"), alias("claude-sonnet-4-20250514"), alias("gpt-4.1"), alias("m-20251399")
        ('gpt-4.1', 'claude-sonnet-4', None, None)
    """
    match = _DASHED.search(model) or _COMPACT.search(model)
    if match is None or match.start() == 0:
        return None
    try:
        date(*(int(g) for g in match.groups()))
    except ValueError:  # 2025-13-99 is a version number, not a date
        return None
    return model[:match.start()]


def keys(names: Sequence[str], model: str) -> list[str]:
    """The keys of a user's mapping tried for a turn of ``model`` from a provider called ``names``, in order.

    Example:
        >>> keys(["openai_chat", "openai"], "gpt-4o-2024-08-06")  # doctest: +NORMALIZE_WHITESPACE
        ['openai_chat:gpt-4o-2024-08-06', 'openai:gpt-4o-2024-08-06', 'gpt-4o-2024-08-06',
         'openai_chat:gpt-4o', 'openai:gpt-4o', 'gpt-4o']
    """
    return list(dict.fromkeys(_keys(names, model)))


def _keys(names: Sequence[str], model: str) -> Iterator[str]:
    # lazily: most lookups hit one of the first keys, and the alias (a regex and a date) is rarely needed
    for n in names:
        yield f"{n}:{model}"
    yield model
    short = alias(model)
    if short is not None:
        for n in names:
            yield f"{n}:{short}"
        yield short


def provider_names(provider: str, table: PriceTable | None) -> Sequence[str]:
    """The names a price may be filed under for ``provider``: the table's list, or the tag alone without one."""
    return (provider,) if table is None else table.names(provider)


def resolve(prices: Prices, provider: str, model: str, table: PriceTable | None = None) -> Price | None:
    """The price a turn of ``model`` from ``provider`` counts at: the user's first, then the table's.

    Args:
        prices: the user's mapping (see :data:`Prices`).
        provider: the provider tag on the turn (``openai_chat``, ``anthropic``, ``scripted``).
        model: the model the turn reports.
        table: the maintained table, which also says what other names the provider goes by (None: only
            ``prices``, under the provider's own tag).

    Example:
        >>> resolve({"openai:gpt-4.1": (2.0, 8.0)}, "openai_chat", "gpt-4.1-2025-04-14") is None  # no names
        True
        >>> resolve({"gpt-4.1": (2.0, 8.0)}, "openai_chat", "gpt-4.1-2025-04-14")
        (2.0, 8.0)
    """
    if prices:
        for key in _keys(provider_names(provider, table), model):
            found = prices.get(key)
            if found is not None:
                return float(found[0]), float(found[1])
    return None if table is None else table.price(provider, model)


Tokens = Iterable[tuple[tuple[str, str], Sequence[int]]]
"""``((provider, model), (input tokens, output tokens))`` pairs, as ``RunState.tokens_by_model.items()``."""


def spent(tokens: Tokens, price_of: PriceOf) -> tuple[float, list[tuple[str, str]]]:
    """Dollars for the priced ``(provider, model)`` pairs, and the pairs that have no price.

    Example:
        >>> table = {"m": (2.0, 10.0)}
        >>> spent([(("p", "m"), (1_000_000, 500_000)), (("p", "x"), (9, 9))], lambda p, m: table.get(m))
        (7.0, [('p', 'x')])
    """
    total = 0.0
    missing: list[tuple[str, str]] = []
    for (provider, model), (tin, tout) in tokens:
        price = price_of(provider, model)
        if price is None:
            missing.append((provider, model))
        else:
            total += tin * price[0] / 1e6 + tout * price[1] / 1e6
    return total, missing


def cost(tokens: Tokens, prices: Prices, table: PriceTable | None = None) -> float | None:
    """Dollars for every pair, or None when one of them has no price (a total would be a guess).

    Example:
        >>> cost([(("scripted", "m"), (1_000_000, 500_000))], {"m": (2.0, 10.0)})
        7.0
    """
    total, missing = spent(tokens, lambda p, m: resolve(prices, p, m, table))
    return None if missing else total


__all__ = ["Price", "PriceOf", "PriceTable", "Prices", "Tokens", "alias", "cost", "keys", "provider_names", "resolve",
           "spent"]
