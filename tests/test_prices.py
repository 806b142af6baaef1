"""Prices that stay enforced: one rule (engine/prices.py) for the run's cost limit, the frames and the debugger.

The promises under test: a price filed under ``provider:model`` and a price filed under the alias of the
dated snapshot a service answers with both count for ``max_cost`` in the run, not only in the frames; the
user's price beats the maintained table; the frames and the run count the same dollars for every turn; and
an unknown model warns once while the run stays limited.
"""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._engine import RunState
from agentnb._engine.prices import alias, keys, resolve, spent
from agentnb._messages import ModelTurn
from agentnb._request import ModelRequest, StreamItem
from agentnb._states import LoopState
from agentnb.events import GuardTripped, RunStarted, TurnCompleted
from agentnb.providers._prices import NAMES_ONLY, PRICE_TABLE, price_table

TURN = {"input_tokens": 100_000, "output_tokens": 10_000}
"""Each turn's usage: at (0.40, 1.60) per million, $0.056 a turn."""


def reading(n: int = 30) -> list[dict[str, Any]]:
    """A model that reads page after page, forever (the budget must stop it)."""
    return [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}], "usage": TURN} for i in range(n)]


class AnswersAs(anb.ScriptedModel):
    """A scripted model whose turns say what a real service's would: a provider tag and a model per turn.

    ``answers`` gives the ``(provider, model)`` of turn k (the last one repeats), as OpenAI answers a request
    for ``gpt-4.1`` with ``gpt-4.1-2025-04-14``.
    """

    def __init__(self, script: Sequence[Any], answers: Sequence[tuple[str, str]]) -> None:
        super().__init__(script)
        self.answers = list(answers)
        self.turns = 0

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        for item in super().respond(request):
            if isinstance(item, ModelTurn):
                item.provider, item.model = self.answers[min(self.turns, len(self.answers) - 1)]
                self.turns += 1
            yield item


def run_of(model: Any, budget: anb.Budget) -> anb.Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anb.UnpricedModelWarning)
        return anb.Loop(model=model, tools=anb.stories.tools("calculator"), budget=budget).start("add").run()


def trip_of(run: anb.Run) -> GuardTripped | None:
    return next((e for e in run.events if isinstance(e, GuardTripped)), None)


# -- the rule --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-4.1-2025-04-14", "gpt-4.1"),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("o3-2025-04-16", "o3"),
    ("gpt-4.1", None),
    ("gemini-2.0-flash-001", None),  # a version, not a date
    ("claude-3-5-haiku-latest", None),
    ("m-2025-13-01", None),  # no month 13
    ("m-20250230", None),  # no February 30
    ("m-1999-01-01", None),  # outside 2000-2099
    ("-2025-04-14", None),  # nothing before the date
    ("gpt-4.1-2025-0414", None),  # half dashed is neither form
])
def test_a_dated_snapshot_resolves_to_its_alias_and_nothing_else_does(model: str, expected: str | None) -> None:
    assert alias(model) == expected


def test_keys_go_from_the_most_to_the_least_specific() -> None:
    assert keys(["openai_chat", "openai"], "gpt-4.1-2025-04-14") == [
        "openai_chat:gpt-4.1-2025-04-14", "openai:gpt-4.1-2025-04-14", "gpt-4.1-2025-04-14",
        "openai_chat:gpt-4.1", "openai:gpt-4.1", "gpt-4.1"]
    prices = {"gpt-4.1": (1.0, 1.0), "openai:gpt-4.1": (2.0, 2.0), "gpt-4.1-2025-04-14": (3.0, 3.0)}
    assert resolve(prices, "openai_chat", "gpt-4.1-2025-04-14", NAMES_ONLY) == (3.0, 3.0)  # the exact name first
    del prices["gpt-4.1-2025-04-14"]
    assert resolve(prices, "openai_chat", "gpt-4.1-2025-04-14", NAMES_ONLY) == (2.0, 2.0)  # then the provider's
    assert resolve(prices, "anthropic", "gpt-4.1-2025-04-14", NAMES_ONLY) == (1.0, 1.0)  # another provider's not
    assert resolve({"gpt-4.1-2025-04-14": (3.0, 3.0)}, "openai_chat", "gpt-4.1", NAMES_ONLY) is None  # no way back


def test_a_provider_goes_by_its_tag_its_prefixes_and_its_vendor() -> None:
    assert PRICE_TABLE.names("openai_chat") == ("openai_chat", "openai", "openai-chat")
    assert PRICE_TABLE.names("openai_responses") == ("openai_responses", "openai-responses", "openai")
    assert PRICE_TABLE.names("gemini") == ("gemini", "google", "google-gla")
    assert PRICE_TABLE.names("scripted") == ("scripted",)
    price = (0.4, 1.6)
    for provider in ("openai_chat", "openai_responses"):
        assert resolve({"openai:gpt-4.1-mini": price}, provider, "gpt-4.1-mini", NAMES_ONLY) == price
    assert resolve({"google:gemini-2.5-flash": price}, "gemini", "gemini-2.5-flash", NAMES_ONLY) == price
    assert resolve({"openai:gpt-4.1-mini": price}, "openai_chat", "gpt-4.1-mini") is None  # no table: the tag only


def test_the_table_prices_vendors_models_and_their_snapshots_and_nothing_else() -> None:
    mini = PRICE_TABLE.price("openai_chat", "gpt-4.1-mini")
    assert mini is not None and mini[0] > 0 and mini[1] > mini[0]  # output costs more than input
    assert PRICE_TABLE.price("openai_chat", "gpt-4.1-mini-2025-04-14") == mini
    assert PRICE_TABLE.price("openai_responses", "gpt-4.1-mini") == mini  # one vendor, one price list
    assert PRICE_TABLE.price("anthropic", "claude-sonnet-4-20250514") is not None
    assert PRICE_TABLE.price("gemini", "gemini-2.5-flash") is not None
    for provider, model in [("scripted", "gpt-4.1-mini"), ("fallback", "gpt-4.1-mini"), ("ollama", "llama3"),
                            ("openai_chat", "no-such-model"), ("story", "story:weather")]:
        assert PRICE_TABLE.price(provider, model) is None, (provider, model)
    assert NAMES_ONLY.price("openai_chat", "gpt-4.1-mini") is None
    assert price_table(True) is PRICE_TABLE and price_table(False) is NAMES_ONLY
    assert pickle.loads(pickle.dumps(PRICE_TABLE)) is PRICE_TABLE  # a Dask worker gets its own table


def test_the_table_is_read_offline_and_the_engine_never_loads_it() -> None:
    code = (
        "import socket, sys\n"
        "def refuse(*a, **k): raise OSError('no network here')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse\n"
        "import agentnb._engine\n"
        "assert 'genai_prices' not in sys.modules, 'the engine loaded the table'\n"
        "import agentnb\n"
        "assert 'genai_prices' not in sys.modules, 'importing agentnb loaded the table'\n"
        "from agentnb.providers._prices import PRICE_TABLE\n"
        "assert PRICE_TABLE.price('openai_chat', 'gpt-4.1-2025-04-14') is not None\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert socket.socket.connect is not None  # (the patch lived in the child only)


# -- enforced in the run ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", [False, True], ids=["prices-alone", "with-the-table"])
def test_a_price_under_provider_model_is_enforced_through_the_real_client(table: bool) -> None:
    pytest.importorskip("openai")
    budget = anb.Budget(max_cost=0.15, prices={"openai:gpt-4.1-mini": (0.40, 1.60)}, on_exhausted="stop",
                        price_table=table)
    with anb.emulator.Emulator(reading()) as emu:
        model = anb.model("openai:gpt-4.1-mini", base_url=emu.url("openai"), api_key="test")
        with warnings.catch_warnings():
            warnings.simplefilter("error", anb.UnpricedModelWarning)  # it is priced: no warning
            run = anb.Loop(model=model, tools=anb.stories.tools("calculator"), budget=budget).start("add").run()
    trip = trip_of(run)
    assert trip is not None and trip.guard == "max_cost" and run.state is LoopState.BUDGET_EXHAUSTED
    turns = run.transcript.frames.turns(prices=budget.prices)
    assert set(turns["provider"].astype(str)) == {"openai_chat"}
    assert len(turns) == 3 and trip.value == pytest.approx(turns["cost_usd"].sum())  # $0.056 a turn: 3 reach 0.15


def test_a_price_under_the_alias_is_enforced_for_a_dated_snapshot_answer() -> None:
    model = AnswersAs(reading(), [("openai_chat", "gpt-4.1-mini-2025-04-14")])
    budget = anb.Budget(max_cost=0.15, prices={"gpt-4.1-mini": (0.40, 1.60)}, on_exhausted="stop",
                        price_table=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", anb.UnpricedModelWarning)
        run = anb.Loop(model=model, tools=anb.stories.tools("calculator"), budget=budget).start("add").run()
    trip = trip_of(run)
    assert trip is not None and trip.guard == "max_cost" and run.state is LoopState.BUDGET_EXHAUSTED
    assert run.view.turns_completed == 3 and trip.value == pytest.approx(3 * 0.056)


def test_the_maintained_table_enforces_a_budget_without_prices() -> None:
    model = AnswersAs(reading(), [("openai_chat", "gpt-4.1-2025-04-14")])
    price = PRICE_TABLE.price("openai_chat", "gpt-4.1")
    assert price is not None
    per_turn = (TURN["input_tokens"] * price[0] + TURN["output_tokens"] * price[1]) / 1e6
    run = run_of(model, anb.Budget(max_cost=2.5 * per_turn, on_exhausted="stop"))
    trip = trip_of(run)
    assert trip is not None and trip.guard == "max_cost" and run.view.turns_completed == 3
    assert trip.value == pytest.approx(3 * per_turn)
    started = next(e for e in run.events if isinstance(e, RunStarted))
    assert str(started.settings["budget"]["price_table"]).startswith("genai-prices ")  # the log says which table


def test_the_users_price_beats_the_table() -> None:
    table = PRICE_TABLE.price("openai_chat", "gpt-4.1")
    assert table is not None and table != (40.0, 160.0)
    mine = {"gpt-4.1": (40.0, 160.0)}  # a hundred times the list price, filed under the alias
    budget = anb.Budget(max_cost=5.0, prices=mine, on_exhausted="stop")
    model = AnswersAs(reading(), [("openai_chat", "gpt-4.1-2025-04-14")])
    run = run_of(model, budget)
    assert run.loop.config.budget.price("openai_chat", "gpt-4.1-2025-04-14") == (40.0, 160.0)
    trip = trip_of(run)
    assert trip is not None and trip.guard == "max_cost" and run.view.turns_completed == 1  # $5.60 at my price
    turns = run.transcript.frames.turns(prices=mine)
    assert turns["cost_usd"].tolist() == [pytest.approx(5.6)]


def test_an_unknown_model_warns_once_and_the_run_stays_limited() -> None:
    model = AnswersAs(reading(), [("openai_chat", "our-own-finetune")])
    loop = anb.Loop(model=model, tools=anb.stories.tools("calculator"),
                    budget=anb.Budget(max_cost=0.01, max_turns=6, on_exhausted="stop", max_no_progress=None))
    with pytest.warns(anb.UnpricedModelWarning) as caught:
        run = loop.start("add").run()
    unpriced = [w for w in caught if w.category is anb.UnpricedModelWarning]
    assert len(unpriced) == 1  # once per run, not once per turn
    text = str(unpriced[0].message)
    assert "'our-own-finetune' from 'openai_chat'" in text and "'openai:our-own-finetune'" in text
    assert "max_turns=6" in text  # it says what still holds
    trip = trip_of(run)
    assert trip is not None and trip.guard == "max_turns" and run.state is LoopState.BUDGET_EXHAUSTED
    assert run.transcript.frames.turns()["cost_usd"].isna().all()  # the frames show the gap as <NA>


def test_the_priced_models_of_a_run_still_count_when_another_has_no_price() -> None:
    # a fallback to an unpriced model must not switch the limit off for what the priced one spends
    answers = [("openai_chat", "our-own-finetune")] * 2 + [("openai_chat", "gpt-4.1-mini")]
    budget = anb.Budget(max_cost=0.15, prices={"gpt-4.1-mini": (0.40, 1.60)}, on_exhausted="stop",
                        max_no_progress=None)
    run = run_of(AnswersAs(reading(), answers), budget)
    trip = trip_of(run)
    assert trip is not None and trip.guard == "max_cost"
    assert run.view.turns_completed == 5 and trip.value == pytest.approx(3 * 0.056)  # 2 unpriced + 3 priced


# -- frames and run agree --------------------------------------------------------------------------------------

PROVIDERS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "scripted"]
MODELS = ["gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini-20250414", "claude-sonnet-4-20250514", "gemini-2.5-flash",
          "our-own-finetune", "llama3:8b"]
KEY_PROVIDERS = ["", "openai", "openai_chat", "openai-responses", "google", "anthropic", "scripted", "ollama", "x"]

price_pairs = st.tuples(st.floats(0, 50, allow_nan=False), st.floats(0, 200, allow_nan=False))
price_keys = st.builds(lambda p, m: f"{p}:{m}" if p else m, st.sampled_from(KEY_PROVIDERS),
                       st.sampled_from([*MODELS, "gpt-4.1-mini", "claude-sonnet-4"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.lists(st.tuples(st.sampled_from(PROVIDERS), st.sampled_from(MODELS)), min_size=1, max_size=5),
       usages=st.lists(st.tuples(st.integers(0, 300_000), st.integers(0, 50_000)), min_size=1, max_size=5),
       prices=st.dictionaries(price_keys, price_pairs, max_size=6), table=st.booleans())
def test_frames_and_run_agree_on_every_turns_cost(answers: list[tuple[str, str]], usages: list[tuple[int, int]],
                                                  prices: dict[str, tuple[float, float]], table: bool) -> None:
    n = len(answers)
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}],
               "usage": {"input_tokens": usages[i % len(usages)][0], "output_tokens": usages[i % len(usages)][1]}}
              for i in range(n - 1)] + [{"text": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}]
    budget = anb.Budget(max_cost=1e9, prices=prices, price_table=table, max_no_progress=None, max_repeats=9)
    run = run_of(AnswersAs(script, answers), budget)
    in_force = run.loop.config.budget
    turns = run.transcript.frames.turns(prices=prices, price_table=table)
    # the run's count after each turn, from the fold (what exhausted() reads), turn by turn
    rs, counted = RunState(), []
    for ev in run.events:
        rs.apply(ev)
        if isinstance(ev, TurnCompleted):
            counted.append(spent(rs.tokens_by_model.items(), in_force.price)[0])
    per_turn = [b - a for a, b in zip([0.0, *counted], counted, strict=False)]
    assert len(turns) == len(per_turn) == n
    for k, row in enumerate(turns.itertuples()):
        price = in_force.price(str(row.provider), str(row.model))
        if price is None:
            assert row.cost_usd is pd.NA, (k, row.provider, row.model)
            assert per_turn[k] == pytest.approx(0.0, abs=1e-12)
        else:
            assert float(row.cost_usd) == pytest.approx(per_turn[k], rel=1e-9, abs=1e-12), (k, row.provider,
                                                                                              row.model)
    assert float(turns["cost_usd"].sum()) == pytest.approx(counted[-1], rel=1e-9, abs=1e-12)


def test_the_debugger_meter_counts_what_the_run_counted() -> None:
    from agentnb._debugger.timeline import Timeline
    from agentnb._debugger.viewdata import meters

    model = AnswersAs(reading(), [("openai_chat", "gpt-4.1-mini-2025-04-14")])
    run = run_of(model, anb.Budget(max_cost=0.15, prices={"openai:gpt-4.1-mini": (0.40, 1.60)},
                                   on_exhausted="stop"))
    tl = Timeline(run.events)
    cost = next(row for row in meters(tl, len(tl) - 1) if row[0] == "cost")
    trip = trip_of(run)
    assert trip is not None and cost[1] == pytest.approx(trip.value) and cost[2] == 0.15


def test_budgets_without_the_table_and_loops_that_fill_it() -> None:
    budget = anb.Budget(max_cost=1.0)
    assert budget.table is None and budget.price("openai_chat", "gpt-4.1") is None  # the engine alone knows none
    loop = anb.Loop(model=anb.ScriptedModel([{"text": "hi"}]), budget=budget)
    assert loop.config.budget.table is PRICE_TABLE and loop.config.budget == budget
    assert loop.config.budget.price("openai_chat", "gpt-4.1") == PRICE_TABLE.price("openai_chat", "gpt-4.1")
    off = anb.Loop(model=anb.ScriptedModel([{"text": "hi"}]), budget=replace(budget, price_table=False))
    assert off.config.budget.table is NAMES_ONLY and off.config.budget.price("openai_chat", "gpt-4.1") is None
