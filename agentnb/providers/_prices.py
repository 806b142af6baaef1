"""The maintained price table: published prices per vendor, read offline from the ``genai-prices`` package.

Theory of operation. ``Budget(max_cost=...)`` needs a price for every model a run uses, and providers change
both their prices and the names their models answer as (OpenAI answers with dated snapshots). Rather than a
table of our own going stale, agentnb reads the one the ``genai-prices`` package (by the Pydantic team, MIT)
maintains and ships as Python data: no network at import or at lookup, since its bundled snapshot is used
and its optional background updater is never started. The ``Loop`` puts :data:`PRICE_TABLE` in its budget
(``Budget(price_table=True)``, the default), and the frames and the debugger read the same table, so the
run's cost limit and every cost column agree (the rule that combines it with the user's prices is
:func:`agentnb._engine.prices.resolve`).

A lookup, for a turn of ``model`` from ``provider`` (a wire API's tag):

- the vendor is the wire API's ``vendor`` (``openai_chat`` and ``openai_responses`` -> ``openai``, ``gemini`` ->
  ``google``); a provider that is not a registered wire API (a ``Model`` of your own reporting ``groq``) is
  looked up under its own name; ``scripted``, ``fallback`` and local servers (``ollama``) have no vendor and
  no table price;
- the model is matched by the table's own rules (which list each model's snapshots and aliases), then by
  its alias when it is a dated snapshot (:func:`~agentnb._engine.prices.alias`);
- the price is the model's standard one as of the first lookup in this process: the latest price whose start
  date has passed, ignoring off-peak hours (a price must not change with the time of day within a run), and
  for a tiered price (a higher rate above a prompt size) its base rate, which undercounts such long prompts.
  Cache and per-request prices are left out: a turn's usage here is input and output tokens.

Each answer is kept for the life of the process (the engine asks the same question before every request and
must get the same answer). Without ``genai-prices`` installed, or for a model it does not list, there is no
price: the user's own prices still count, and :class:`~agentnb.UnpricedModelWarning` says what is missing.

:meth:`PublishedPrices.names` says what else a provider's prices may be filed under: its tag, the prefixes
of ``anb.model`` and its vendor, so ``openai:gpt-4.1`` prices an ``openai_chat`` (and ``openai_responses``) turn.

Example:
    >>> PRICE_TABLE.names("openai_chat")
    ('openai_chat', 'openai', 'openai-chat')
    >>> PRICE_TABLE.price("openai_chat", "gpt-4.1-mini-2025-04-14") == PRICE_TABLE.price("openai_chat", "gpt-4.1-mini")
    True
    >>> PRICE_TABLE.price("scripted", "gpt-4.1-mini") is None
    True
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from .._engine.prices import Price, PriceTable, alias
from ._registry import WIRE_APIS

__all__ = ["NAMES_ONLY", "PRICE_TABLE", "PublishedPrices", "label", "price_table", "recorded_table", "source"]


class PublishedPrices:
    """Published prices per vendor (``published=False``: the provider names alone, no price).

    Args:
        published: read ``genai-prices``; False keeps only :meth:`names` (``Budget(price_table=False)``).
    """

    __slots__ = ("_memo", "_names", "published")

    def __init__(self, *, published: bool = True) -> None:
        self.published = published
        self._memo: dict[tuple[str, str], Price | None] = {}
        self._names: dict[str, tuple[str, ...]] = {}

    def __repr__(self) -> str:
        return f"PublishedPrices({source() if self.published else 'names only'})"

    def __reduce__(self) -> tuple[Any, ...]:
        # a loop shipped to another process (a Dask worker) gets a fresh table there, without this memo
        return _table, (self.published,)

    def names(self, provider: str) -> tuple[str, ...]:
        """The tag, then the prefixes of ``anb.model`` and the vendor of a registered wire API."""
        found = self._names.get(provider)
        if found is None:
            api = WIRE_APIS.get(provider)
            found = (provider,) if api is None else tuple(
                dict.fromkeys(n for n in (api.name, *api.prefixes, api.vendor) if n))
            self._names[provider] = found
        return found

    def price(self, provider: str, model: str) -> Price | None:
        """The standard published price of ``model`` from ``provider`` (see the module docs), or None."""
        if not self.published:
            return None
        key = (provider, model)
        try:
            return self._memo[key]
        except KeyError:
            found = self._memo[key] = _lookup(_vendor(provider), model)
            return found


def _vendor(provider: str) -> str:
    api = WIRE_APIS.get(provider)
    if api is not None:
        return api.vendor
    return "" if provider in ("scripted", "fallback") else provider


def _lookup(vendor: str, model: str) -> Price | None:
    if not vendor:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # the table is a dependency; a broken install leaves only the user's prices
        return None
    short = alias(model)
    now = datetime.now(UTC)
    for name in (model,) if short is None else (model, short):
        try:
            found = calc_price(Usage(input_tokens=0, output_tokens=0), name, provider_id=vendor,
                               genai_request_timestamp=now)
        except LookupError:  # an unknown vendor or model
            continue
        return _standard(found.model.prices, now)
    return None


def _standard(prices: Any, now: datetime) -> Price | None:
    """The standard ``(input, output)`` of a model's price list: the latest started, off-peak hours left out."""
    if isinstance(prices, list):  # conditional prices: the last one in force wins, as in genai-prices
        chosen = prices[0].prices
        for conditional in reversed(prices):
            constraint = conditional.constraint
            start = getattr(constraint, "start_date", None)
            if constraint is None or (start is not None and now.date() >= start):
                chosen = conditional.prices
                break
        prices = chosen
    tin, tout = _rate(getattr(prices, "input_mtok", None)), _rate(getattr(prices, "output_mtok", None))
    if tin is None and tout is None:
        return None  # priced per request, per image or per second: not in tokens
    return tin or 0.0, tout or 0.0


def _rate(value: Any) -> float | None:
    if value is None:
        return None
    return float(getattr(value, "base", value))  # a tiered price: its base rate


@functools.cache
def source() -> str:
    """Where the table's prices come from: ``genai-prices <version>``, or why there is none (read once)."""
    try:
        from importlib.metadata import version

        return f"genai-prices {version('genai-prices')}"
    except Exception:  # noqa: BLE001 - the package is missing or its metadata unreadable
        return "genai-prices not installed"


PRICE_TABLE = PublishedPrices()
"""agentnb's maintained table (``Budget(price_table=True)``; the frames and the debugger read it too)."""

NAMES_ONLY = PublishedPrices(published=False)
"""No published price, the provider names only (``Budget(price_table=False)``)."""


def _table(published: bool) -> PublishedPrices:
    return PRICE_TABLE if published else NAMES_ONLY


def price_table(setting: PriceTable | bool) -> PriceTable:
    """The table a ``Budget(price_table=...)`` setting stands for: True, False or a table of your own."""
    if setting is True:
        return PRICE_TABLE
    if setting is False:
        return NAMES_ONLY
    return setting


def label(table: PriceTable | None) -> str | None:
    """What ``RunStarted`` records of a budget's table: ``genai-prices 0.2.3``, None for none, else its class."""
    if table is None or table is NAMES_ONLY:
        return None
    return source() if table is PRICE_TABLE else type(table).__qualname__


def recorded_table(recorded: object) -> PriceTable:
    """The table to price a recorded run with: none if it had none, else the maintained one (the closest we have)."""
    return NAMES_ONLY if recorded is None else PRICE_TABLE
