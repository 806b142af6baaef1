"""Guards: budgets, repetition and stall detection, result size caps, context size.

A tool loop must end, must not burn money and must not repeat itself forever. :class:`Budget` declares the
limits; the pure functions here read a folded :class:`~agentnb._engine.RunState` (its :class:`Spent`
counters) and say which limit, if any, is exhausted. The engine turns a finding into a ``GuardTripped``
event and applies the policy the user chose:

- budgets (turns, tool calls, tokens, cost, deadline): ``finalize`` (one tools-free call asking for an
  answer from what the model has), ``stop`` (``BUDGET_EXHAUSTED``) or ``escalate`` (pause for a person;
  approving grants one more allowance of the limit, denying finalizes);
- repetition (the same tool with the same canonical arguments and the same result, K times, or an A-B-A-B
  ping-pong): ``stop`` (``NO_PROGRESS`` with a structured reason), ``note`` (tell the model and go on) or
  ``escalate``;
- no progress (turns that brought neither a new result nor new text): its own limit, same policies.

Checks run before every model request, so a turn's calls always get their results first and the history
stays valid for every provider: the cost of a turn is counted once it is known, after the turn. What a turn
costs is :meth:`Budget.price`'s answer, one rule shared with the frames (:mod:`agentnb._engine.prices`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .._binding import canonical
from .._messages import Message, ReasoningPart, RefusalPart, TextPart, ToolCallPart, ToolResultPart
from .._pairing import answered_turns
from .prices import Price, PriceTable, keys, provider_names, resolve, spent

BudgetPolicy = Literal["finalize", "stop", "escalate"]
RepeatPolicy = Literal["stop", "note", "escalate"]


@dataclass(frozen=True)
class Budget:
    """The limits of a run.

    Args:
        max_turns: model turns (the finalization call comes on top). Every request counts against every limit,
            whatever asked for it (an output correction, a paused turn sent back); a limit is checked before each
            request, so a run passes a token or cost limit by at most the last turn's usage (and the
            finalization's).
        max_tool_calls: calls answered (run, rejected or denied).
        max_input_tokens: input tokens, as the provider reported usage.
        max_output_tokens: output tokens, as the provider reported usage.
        max_total_tokens: input and output tokens together, as the provider reported usage.
        max_cost: US dollars, checked after each turn (a turn's cost is known only once its usage is): the
            first turn whose running cost reaches the limit trips it, and ``on_exhausted`` applies, so a run
            may end past the limit by that turn (and the finalizing one).
        prices: ``{model: (dollars per million input tokens, dollars per million output tokens)}``; a key is a
            model name or ``provider:model`` (``openai:gpt-4.1``), and a dated snapshot the provider answers
            with (``gpt-4.1-2025-04-14``) finds the price of its alias (:mod:`agentnb._engine.prices`). These
            win over ``price_table``.
        price_table: published prices for the models ``prices`` leaves out: True (the default) for agentnb's
            maintained table (the ``Loop`` fills it in), False for ``prices`` alone, or a
            :class:`~agentnb._engine.prices.PriceTable` of your own.
        deadline_s: seconds from the start of the run.
        tool_timeout: seconds, for tools that set no timeout of their own.
        max_parallel: calls of one turn run at the same time (``run()``; ``step()`` takes one at a time).
        max_result_chars: longer results are cut for the model with a visible marker (the audit keeps all).
        on_exhausted: what an exhausted budget does: ``finalize``, ``stop`` or ``escalate``.
        max_repeats: identical calls with identical results before the run counts as looping.
        on_repeat: ``stop`` (``NO_PROGRESS``), ``note`` (tell the model) or ``escalate``.
        max_no_progress: turns in a row without a new result or new text (None: unlimited).
        context_window: the model's window in tokens, for compression (None: never compress).
        compress_at: compress when the request passes this share of the window.
        keep_pairs: complete call/result turns kept by pruning.

    Example:
        >>> budget = Budget(max_turns=5, max_cost=0.10, prices={"gpt-4o": (2.5, 10.0)})
        >>> budget.max_turns, budget.price("openai_chat", "gpt-4o-2024-08-06")
        (5, (2.5, 10.0))
    """

    max_turns: int = 25
    max_tool_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    price_table: PriceTable | bool = field(default=True, compare=False, repr=False)
    deadline_s: float | None = None
    tool_timeout: float | None = None
    max_parallel: int = 4
    max_result_chars: int = 50_000
    on_exhausted: BudgetPolicy = "finalize"
    max_repeats: int = 3
    on_repeat: RepeatPolicy = "stop"
    max_no_progress: int | None = 6
    context_window: int | None = None
    compress_at: float = 0.8
    keep_pairs: int = 2

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if self.on_exhausted not in ("finalize", "stop", "escalate"):
            raise ValueError(f"on_exhausted must be 'finalize', 'stop' or 'escalate', got {self.on_exhausted!r}")
        if self.on_repeat not in ("stop", "note", "escalate"):
            raise ValueError(f"on_repeat must be 'stop', 'note' or 'escalate', got {self.on_repeat!r}")
        if self.max_parallel < 1 or self.max_repeats < 2:
            raise ValueError("max_parallel must be at least 1 and max_repeats at least 2")

    @property
    def table(self) -> PriceTable | None:
        """The price table in force: None until the ``Loop`` has put the maintained one in (or for False)."""
        return None if isinstance(self.price_table, bool) else self.price_table

    def price(self, provider: str, model: str) -> Price | None:
        """The price a turn of ``model`` from ``provider`` counts at under this budget (None: unpriced).

        One rule for the run's cost limit, the frames and the debugger: :func:`agentnb._engine.prices.resolve`.
        """
        return resolve(self.prices, provider, model, self.table)


class UnpricedModelWarning(UserWarning):
    """A budget has ``max_cost`` but a model the run used has no price, so its turns cannot be counted.

    Prices are US dollars per million tokens, found by :meth:`Budget.price`: under ``provider:model`` or the
    model name the provider reports (``Budget(prices={"gpt-4o-mini": (0.15, 0.60)})``), or the alias of a
    dated snapshot, then in the maintained table. A price keyed to another name (a typo, another model) does
    not apply. Warned once per run, at the first unpriced turn. What happens then: the unpriced model's turns
    add nothing to the cost (the turns of priced models still count and still trip ``max_cost``), and the
    run's other limits hold as ever (``max_turns`` is 25 unless you set it).

    Example:
        >>> import warnings
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel([{"text": "hi"}]), budget=anb.Budget(max_cost=0.5))
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = loop.start("hi").run()
        >>> [w.category.__name__ for w in caught]
        ['UnpricedModelWarning']
    """


def unpriced(budget: Budget, provider: str, model: str) -> str | None:
    """What :class:`UnpricedModelWarning` says when ``budget`` has a cost limit and no price for the turn, or None.

    Example:
        >>> print(unpriced(Budget(max_cost=1.0, prices={"gpt-4o": (2.5, 10.0)}), "scripted", "m"))
        Budget(max_cost=1): no price for model 'm' from 'scripted' under 'scripted:m', 'm' (priced: 'gpt-4o'), ...
        >>> unpriced(Budget(max_cost=1.0, prices={"m": (2.5, 10.0)}), "scripted", "m") is None
        True
    """
    if budget.max_cost is None or budget.price(provider, model) is not None:
        return None
    tried = ", ".join(map(repr, keys(provider_names(provider, budget.table), model)))
    priced = ", ".join(map(repr, budget.prices)) or "none"
    table = "nor in its price table" if budget.table is not None else "and it has no price table"
    return (f"Budget(max_cost={budget.max_cost:g}): no price for model {model!r} from {provider!r} under {tried} "
            f"(priced: {priced}), {table}, so its turns add nothing to the cost; priced models still count, and "
            f"the other limits hold (max_turns={budget.max_turns}). Prices are US dollars per million tokens.")


@dataclass(frozen=True, slots=True)
class Trip:
    """A guard that ran out."""

    guard: str
    limit: float
    value: float
    message: str


class Spent(Protocol):
    """What :func:`exhausted` reads of a folded run: the counters a budget limits (``RunState`` has them).

    A protocol, not ``RunState`` itself: the fold calls :func:`signature` and :func:`digest`, so naming the
    fold's state here would close an import circle (``tests/test_walls.py``).
    """

    @property
    def turns_completed(self) -> int:
        """Model turns completed."""
        ...

    @property
    def tool_calls(self) -> int:
        """Calls answered (run, rejected or denied)."""
        ...

    @property
    def input_tokens(self) -> int:
        """Input tokens, as the provider reported them."""
        ...

    @property
    def output_tokens(self) -> int:
        """Output tokens, as the provider reported them."""
        ...

    @property
    def tokens_by_model(self) -> Mapping[tuple[str, str], Sequence[int]]:
        """``{(provider, model): (input tokens, output tokens)}``, for the cost."""
        ...

    @property
    def started_at(self) -> float | None:
        """When the run started (seconds since the epoch), for the deadline."""
        ...

    @property
    def extensions(self) -> Mapping[str, int]:
        """Allowances granted by approved escalations, per limit name."""
        ...


def exhausted(rs: Spent, budget: Budget, now: float | None) -> Trip | None:
    """The first budget that ran out (turns, tool calls, tokens, cost, deadline), or None."""
    ext = rs.extensions
    checks: list[tuple[str, float | None, float]] = [
        ("max_turns", budget.max_turns, rs.turns_completed),
        ("max_tool_calls", budget.max_tool_calls, rs.tool_calls),
        ("max_input_tokens", budget.max_input_tokens, rs.input_tokens),
        ("max_output_tokens", budget.max_output_tokens, rs.output_tokens),
        ("max_total_tokens", budget.max_total_tokens, rs.input_tokens + rs.output_tokens),
    ]
    if budget.max_cost is not None:
        # what the priced models spent counts even when another model has no price (the port warned of it):
        # a run that used one unpriced model is not thereby unlimited in dollars; only a run whose every
        # model is unpriced has no cost to check
        dollars, missing = spent(rs.tokens_by_model.items(), budget.price)
        if not missing or len(missing) < len(rs.tokens_by_model):
            checks.append(("max_cost", budget.max_cost, round(dollars, 6)))
    if budget.deadline_s is not None and now is not None and rs.started_at is not None:
        checks.append(("deadline_s", budget.deadline_s, round(now - rs.started_at, 3)))
    for name, limit, value in checks:
        if limit is None:
            continue
        allowed = limit * (1 + ext[name]) if ext and name in ext else limit
        if value >= allowed:
            return Trip(name, allowed, value, f"{name}: {value:g} reached the limit of {allowed:g}")
    return None


# -- repetition ----------------------------------------------------------------------------------------


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


_FLAT = (str, int, bool, type(None))


def signature(name: str, arguments: dict[str, Any] | None, raw: str) -> str:
    """A call's identity for repetition: tool + canonical arguments (key order, spacing, 1 vs 1.0 ignored).

    Example:
        >>> signature("f", {"a": 1.0, "b": [2]}, "") == signature("f", {"b": [2], "a": 1}, "")
        True
    """
    if arguments is None:
        return f"{name}:{raw}"
    flat = all(type(v) in _FLAT for v in arguments.values())
    return f"{name}:{canonical(arguments if flat else _normal(arguments))}"


def digest(text: str) -> str:
    """A digest of a result's content, for telling new information from old within one process.

    Python's string hash is enough here: digests are compared only with each other, inside one process
    (a resumed run folds its events again and recomputes them), and it costs nothing for strings.
    """
    return format(hash(text) & 0xFFFFFFFFFFFFFFFF, "016x")


def repetition(history: Sequence[tuple[str, str]], k: int, start: int = 0) -> tuple[int, list[str]] | None:
    """A loop at the end of ``history`` (pairs of call signature and result digest), or None.

    A loop is a pattern of period 1 or 2 (the same call, or an A-B-A-B ping-pong) repeated ``k`` times with
    the same results each time: no new information came back. Returns the period and the repeated calls.

    Example:
        >>> repetition([("a", "x"), ("b", "y"), ("a", "x"), ("b", "y"), ("a", "x"), ("b", "y")], 3)
        (2, ['a', 'b'])
        >>> repetition([("a", "x"), ("a", "z"), ("a", "x")], 3) is None
        True
    """
    n = len(history)
    if n - start < k or history[-1] != history[-2]:
        if n - start < 2 * k or history[-1] != history[-3]:
            return None  # cheap exit: neither period 1 nor period 2 can match at the end
    for period in (1, 2):
        need = period * k
        if n - start < need:
            continue
        tail = history[n - need:]
        pattern = tail[:period]
        if period == 2 and pattern[0][0] == pattern[1][0]:
            continue  # that is period 1
        if all(tail[i] == pattern[i % period] for i in range(need)):
            return period, [sig for sig, _ in pattern]
    return None


# -- context size --------------------------------------------------------------------------------------


def estimate_tokens(messages: Sequence[Message], tools: Sequence[Any] = ()) -> int:
    """A provider-neutral token estimate: about four characters a token.

    It counts text, tool arguments, tool results and the tools' schemas: what the request really carries.
    """
    chars = 0
    for m in messages:
        chars += 4  # role and framing
        for p in m.parts:
            if isinstance(p, TextPart | RefusalPart):
                chars += len(p.text)
            elif isinstance(p, ToolCallPart):
                chars += len(p.name) + len(p.arguments_raw) + 8
            elif isinstance(p, ToolResultPart):
                chars += len(p.content) + 8
            elif isinstance(p, ReasoningPart):
                chars += len(p.text or "")
    for t in tools:
        chars += len(t.name) + len(t.description) + len(canonical(t.parameters))
    return chars // 4 + 1


def prune(messages: Sequence[Message], keep_pairs: int) -> tuple[list[Message], list[int]]:
    """Tier 2: keep system messages, the first user request and the last ``keep_pairs`` complete turns.

    A complete turn is an assistant message with calls and the tool message answering all of them. Returns
    the new history and the indices removed. Never leaves an orphan result or an unanswered call.
    """
    keep: set[int] = {i for i, m in enumerate(messages) if m.role == "system"}
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is not None:
        keep.add(first_user)
    pairs = answered_turns(messages)
    for i, j in pairs[-keep_pairs:] if keep_pairs > 0 else []:
        keep.update((i, j))
    # everything after the last kept pair stays (the history is complete when it is compressed)
    last = max(keep) if keep else -1
    keep.update(range(last + 1, len(messages)))
    removed = [i for i in range(len(messages)) if i not in keep]
    return [m for i, m in enumerate(messages) if i in keep], removed
