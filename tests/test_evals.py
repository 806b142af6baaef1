"""``anb.evaluate``, its datasets and each scorer, on real runs of scripted models (hostile values included)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pydantic
import pytest

import agentnb as anb
from agentnb.evals import Call, Case, Dataset, Score, Trial
from agentnb.evals._evaluate import COLUMNS
from agentnb.exceptions import AgentnbError

S = anb.scorers


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _loop(steps: list[Any], **kw: Any) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel(steps), tools=[add], **kw)


def _trial(steps: list[Any], case: Case, **kw: Any) -> Trial:
    """A real run of a scripted model, scored as evaluate scores it (its only case)."""
    result = anb.evaluate(_loop(steps, **kw), [{"id": case.id, "prompt": case.prompt, "expected": case.expected,
                                               "calls": case.calls, "rubric": case.rubric}],
                          [lambda trial: Score(score=1.0, passed=True, explanation=json.dumps(trial.case.id))],
                          progress=False, concurrency=1)
    from agentnb.evals._evaluate import _trial as make

    t = result.run(case.id)
    return make(result.dataset[case.id], "loop", _loop(steps, **kw), t, None, None)


ADD = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]


# -- datasets --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "problem"), [
    ([{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}], "row 1: its id 'a' is the id of row 0 too"),
    ([{"id": float("nan"), "prompt": "x"}], "row 0: its id is empty (nan)"),
    ([{"id": None, "prompt": "x"}], "row 0: its id is empty (None)"),
    ([{"id": "  ", "prompt": "x"}], "row 0: its id '  ' is blank"),
    ([{"id": " a", "prompt": "x"}], "padded with whitespace"),
    ([{"id": 7, "prompt": "x"}], "its id is a int (7); ids are strings"),
    ([{"id": "a", "prompt": ""}], "row 0: its prompt is '', not a non-blank string"),
    ([{"id": "a", "prompt": float("nan")}], "its prompt is nan"),
    ([{"id": "a", "prompt": "x", "calls": "[{"}], "calls is not JSON"),
    ([{"id": "a", "prompt": "x", "calls": [{"arguments": {}}]}], "call 0 is not"),
    (["just a prompt"], "row 0 is a str, not a mapping"),
])
def test_bad_rows_are_refused_naming_the_row_before_anything_runs(rows: list[Any], problem: str) -> None:
    asked: list[Any] = []
    loop = anb.Loop(model=anb.ScriptedModel([lambda m: asked.append(m) or {"text": "never"}]))
    with pytest.raises(AgentnbError, match="the dataset has bad rows, so nothing ran") as err:
        anb.evaluate(loop, [*rows, {"id": "fine", "prompt": "fine"}], [S.exact()], progress=False)
    assert problem in str(err.value)
    assert asked == [] and loop.store.runs() == []


def test_a_dataframe_with_nan_ids_is_refused_and_nothing_runs() -> None:
    loop = _loop([{"text": "5"}] * 3)
    df = pd.DataFrame({"id": ["a", None, "a"], "prompt": ["x", "y", "z"]})
    with pytest.raises(AgentnbError, match=r"row 1: its id is empty.*row 2: its id 'a' is the id of row 0"):
        anb.evaluate(loop, df, [S.exact()], progress=False)
    assert loop.store.runs() == []


def test_datasets_round_trip_through_jsonl_csv_and_parquet(tmp_path: Path) -> None:
    ds = Dataset([{"id": "007", "prompt": "2 + 3?", "expected": "5", "calls": [{"tool": "add", "arguments": {"a": 2}}],
                   "topic": "sums"},
                  {"id": "q2", "prompt": "typed", "expected": {"n": 1}, "rubric": "be brief"}])
    for suffix in (".jsonl", ".csv", ".parquet"):
        back = Dataset(ds.save(tmp_path / f"d{suffix}"))
        assert [c.id for c in back] == ["007", "q2"], suffix  # "007" stays text in a CSV
        assert back["007"].calls == [{"tool": "add", "arguments": {"a": 2}}], suffix
        assert back["007"].extra["topic"] == "sums" and back["q2"].rubric == "be brief", suffix
        assert back["q2"].expected in ({"n": 1}, '{"n": 1}'), suffix
        assert back["007"].rubric is None and back["q2"].calls is None, suffix
    with pytest.raises(AgentnbError, match="no such dataset file"):
        Dataset(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "x"}\n{oops\n')
    with pytest.raises(AgentnbError, match=r"bad.jsonl:2: not JSON"):
        Dataset(tmp_path / "bad.jsonl")


def test_a_run_added_to_a_dataset_expects_what_it_did() -> None:
    run = _loop(ADD).start("2 + 3?", run_id="ref-1").run()
    ds = Dataset()
    case = ds.add(run)
    assert (case.id, case.prompt, case.expected) == ("ref-1", "2 + 3?", "5")
    assert case.calls == [{"tool": "add", "arguments": {"a": 2, "b": 3}}]
    other = ds.add(run.transcript, id="ref-2", expected="five", calls=None, note="mine")
    assert other.calls is None and other.expected == "five" and other.extra == {"note": "mine"}
    with pytest.raises(AgentnbError, match="has a case 'ref-1' already"):
        ds.add(run)
    result = anb.evaluate(_loop(ADD), ds, [S.exact(), S.calls()], progress=False, concurrency=1)
    assert result.table["passed"].astype(object).where(result.table["passed"].notna(), None).tolist() == [
        True, True, False, None]


def test_labelled_runs_become_a_dataset(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db")
    loop = _loop(ADD * 3, store=store)
    runs = [loop.start(f"2 + 3? ({i})", run_id=f"r{i}").run() for i in range(3)]
    book = anb.Labels(store)
    book.add("r0", tag="good", by="ana")
    book.add("r2", tag="good", note="keep", by="ana")
    book.add("r1", tag="odd", by="bo")
    ds = Dataset.from_labels(book, store, tag="good")
    assert [c.id for c in ds] == ["r0", "r2"]
    assert ds["r2"].expected == "5" and ds["r2"].calls == [{"tool": "add", "arguments": {"a": 2, "b": 3}}]
    assert ds["r2"].extra == {"label_tags": ["good"], "label_notes": ["keep"]}
    assert len(Dataset.from_labels(book, tmp_path / "runs.db")) == 3 and runs


# -- the output scorers ----------------------------------------------------------------------------------------


def test_exact_match_of_text_and_typed_outputs_and_hostile_expected_values() -> None:
    t = _trial(ADD, Case(id="q", prompt="2 + 3?", expected=" 5 "))
    assert S.exact()(t).passed is True
    assert S.exact()(_with(t, expected="6")).explanation == "the output is '5', expected '6'"
    nan = S.exact()(_with(t, expected=None))
    assert math.isnan(nan.score) and nan.passed is None and "no expected output" in nan.explanation
    assert S.exact(case_sensitive=False)(_with(t, output="FIVE", expected="five")).passed is True
    assert S.exact()(_with(t, output=5, expected="5")).passed is True  # a non-string output: its JSON text
    assert S.exact()(_with(t, output=None)).passed is False

    class Answer(pydantic.BaseModel):
        n: int

    typed = _trial([{"tool_calls": [{"name": "final_result", "arguments": {"n": 5}}]}],
                   Case(id="q", prompt="?", expected={"n": 5}), output_type=Answer)
    assert isinstance(typed.output, Answer)
    assert S.exact()(typed).passed is True and S.exact()(_with(typed, expected={"n": 6})).passed is False
    assert S.exact()(_with(typed, expected='{"n": 5}')).passed is True
    assert S.exact()(_with(typed, expected='{ "n":5 }')).passed is True  # JSON text from a CSV cell, any spacing
    assert S.exact()(_with(typed, expected="n is 5")).passed is False


def _with(t: Trial, **kw: Any) -> Trial:
    from dataclasses import replace

    case_kw = {k: kw.pop(k) for k in ("expected", "calls", "rubric") if k in kw}
    return replace(t, case=replace(t.case, **case_kw), **kw)


def test_regex_and_json_schema_match() -> None:
    t = _trial(ADD, Case(id="q", prompt="?", expected=r"^\d$"))
    assert S.regex()(t).passed is True and S.regex(r"six")(t).passed is False
    assert S.regex()(_with(t, expected="(")).passed is None  # a bad pattern in a row: not scored, said why
    with pytest.raises(ValueError, match="is not a regular expression"):
        S.regex("(")
    assert S.regex(r'"n": 5')(_with(t, output={"n": 5})).passed is True  # a typed output as JSON text
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    js = S.json_schema(schema)
    assert js(_with(t, output='{"n": 5}')).passed is True
    bad = js(_with(t, output='{"n": "five"}'))
    assert bad.passed is False and bad.explanation.startswith("n: 'five' is not of type 'integer'")
    assert "not JSON" in js(_with(t, output="{oops")).explanation
    assert js(_with(t, output=None)).passed is False

    class Answer(pydantic.BaseModel):
        n: int

    assert S.json_schema(Answer)(_with(t, output=Answer(n=3))).passed is True
    assert S.json_schema()(_with(t, output='{"n": 1}', expected=json.dumps(schema))).passed is True
    assert S.json_schema()(_with(t, expected=None)).passed is None


# -- trajectories -----------------------------------------------------------------------------------------------


def _calls_trial(calls: list[Any]) -> Trial:
    steps: list[Any] = [{"tool_calls": calls}, {"text": "done"}]
    return _trial(steps, Case(id="q", prompt="?"))


TWO = [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add", "arguments": {"a": 3, "b": 4}}]


@pytest.mark.parametrize(("mode", "expected", "passed", "score"), [
    ("order", [Call("add", {"a": 1}), Call("add", {"a": 3})], True, 1.0),
    ("order", [Call("add", {"a": 3}), Call("add", {"a": 1})], False, 0.0),
    ("any_order", [Call("add", {"a": 3}), Call("add", {"a": 1})], True, 1.0),
    ("any_order", [Call("add", {"a": 3})], False, 0.5),
    ("superset", [Call("add", {"a": 3})], True, 1.0),
    ("superset", [Call("add", {"a": 3}), Call("add", {"a": 9})], False, 0.5),
    ("subset", [Call("add", {"a": 3}), Call("add", {"a": 1}), Call("add", {"a": 9})], True, 1.0),
    ("subset", [Call("add", {"a": 3})], False, 0.5),
    ("order", [Call("add", {"b": lambda b: b % 4 == 0}), Call("add", {"b": lambda b: b % 4 == 0})], False, 0.5),
    ("any_order", [Call("add", {"a": lambda a: a > 0}), Call("add", {"a": 1})], True, 1.0),  # greedy would fail
    ("order", [{"tool": "add", "arguments": {"a": 1, "b": 2}}, {"tool": "add"}], True, 1.0),
    ("order", [Call("add", {"a": True}), Call("add")], False, 0.5),  # True is not 1
])
def test_trajectory_modes_and_argument_predicates(mode: Any, expected: list[Any], passed: bool, score: float) -> None:
    result = S.calls(expected, mode=mode)(_calls_trial(TWO))
    assert (result.passed, result.score) == (passed, score), result.explanation


def test_trajectory_of_calls_with_bad_json_and_predicates_that_raise() -> None:
    t = _calls_trial([{"name": "add", "arguments": '{"a": 2, "b": '}])
    assert t.calls[0].arguments is None
    named = S.calls([Call("add", {"a": 2})])(t)
    assert named.passed is False and "arguments were not a JSON object" in named.explanation
    assert S.calls([Call("add")])(t).passed is True  # no argument named: the tool alone is matched
    boom = S.calls([Call("add", {"a": lambda a: 1 / 0})])(_calls_trial(TWO[:1]))
    assert boom.passed is False and "the predicate raised ZeroDivisionError" in boom.explanation
    assert S.calls()(t).passed is None  # the case has no calls
    assert S.calls()(_with(t, calls=[{"tool": "add", "arguments": None}])).passed is True
    with pytest.raises(ValueError, match="mode is one of"):
        S.calls(mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected call 0 is not"):
        S.calls([42])


# -- budgets, rubrics, functions ---------------------------------------------------------------------------------


def test_budget_of_tokens_turns_and_cost() -> None:
    t = _trial(ADD, Case(id="q", prompt="2 + 3?"))
    assert t.turns == 2 and t.input_tokens + t.output_tokens > 0
    assert S.budget(max_turns=2)(t).passed is True and S.budget(max_turns=1)(t).passed is False
    tokens = t.input_tokens + t.output_tokens
    assert S.budget(max_tokens=tokens)(t).passed is True and S.budget(max_tokens=tokens - 1)(t).passed is False
    unpriced = S.budget(max_cost_usd=1.0)(t)
    assert unpriced.passed is False and "not known" in unpriced.explanation
    assert S.budget(max_cost_usd=1e-9)(_with(t, cost_usd=0.5)).passed is False
    assert S.budget(max_cost_usd=1.0)(_with(t, cost_usd=0.5)).passed is True
    with pytest.raises(ValueError, match="give max_tokens"):
        S.budget()


def test_a_rubric_graded_offline_with_a_typed_grade() -> None:
    def grade(messages: Any) -> dict[str, Any]:
        text = messages[0].text
        ok = "Rubric: answers 5" in text and "[assistant] 5" in text
        return {"tool_calls": [{"name": "final_result", "arguments": {"passed": ok, "score": 0.9 if ok else 0.1,
                                                                      "explanation": "checked"}}]}

    t = _trial(ADD, Case(id="q", prompt="2 + 3?", rubric="answers 5"))
    got = S.rubric(model=anb.ScriptedModel([grade] * 3))(t)
    assert (got.score, got.passed, got.explanation) == (0.9, True, "checked")
    assert S.rubric(model=anb.ScriptedModel([grade]))(_with(t, rubric=None)).passed is None
    never = S.rubric("x", model=anb.ScriptedModel([{"text": "maybe"}] * 3), retries=1)(t)
    assert never.passed is False and "the grader gave no grade: its run ended FAILED" in never.explanation
    with pytest.raises(ValueError, match="non-empty string"):
        S.rubric(" ", model=anb.ScriptedModel([grade]))


def test_own_functions_answer_bools_numbers_pairs_and_a_raise_is_a_zero() -> None:
    t = _trial(ADD, Case(id="q", prompt="2 + 3?"))
    answers = {"flag": lambda tr: tr.output == "5", "number": lambda tr: 0.25, "pair": lambda tr: (1, "fine"),
               "boom": lambda tr: {}["missing"], "weird": lambda tr: object()}
    scored = {k: anb.evals.Scorer(k, fn)(t) for k, fn in answers.items()}
    assert scored["flag"].passed is True and scored["number"] == Score(score=0.25, passed=False, explanation="")
    assert (scored["pair"].score, scored["pair"].explanation) == (1.0, "fine")
    assert scored["boom"].passed is False and "raised KeyError" in scored["boom"].explanation
    assert "a scorer answers a Score" in scored["weird"].explanation
    with pytest.raises(AgentnbError, match="two scorers are named 'exact'"):
        anb.evaluate(_loop(ADD), [{"prompt": "x"}], [S.exact(), S.exact()], progress=False)
    with pytest.raises(AgentnbError, match="at least one scorer"):
        anb.evaluate(_loop(ADD), [{"prompt": "x"}], [], progress=False)


# -- the evaluation ------------------------------------------------------------------------------------------------


def test_an_evaluation_on_a_store_run_again_runs_nothing_and_scores_the_same(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db")
    cases = [{"id": f"q{i}", "prompt": f"2 + 3? ({i})", "expected": "5"} for i in range(4)]
    first = anb.evaluate({"m": _loop(ADD)}, cases, [S.exact()], store=store, progress=False)
    asked: list[Any] = []
    again_model = anb.ScriptedModel([lambda m: asked.append(m) or {"text": "never asked"}])
    again = anb.evaluate({"m": anb.Loop(model=again_model, tools=[add])}, cases, [S.exact()], store=store,
                         progress=False)
    pd.testing.assert_frame_equal(first.table, again.table)
    assert first.table["passed"].all() and asked == []
    assert sorted(r for r, _ in store.runs()) == [f"eval:m:q{i}" for i in range(4)]
    changed = [dict(c, prompt="another prompt") if c["id"] == "q2" else c for c in cases]
    with pytest.raises(AgentnbError, match="q2"):
        anb.evaluate({"m": anb.Loop(model=again_model, tools=[add])}, changed, [S.exact()], store=store,
                     progress=False)


def test_the_table_summary_compare_and_runs() -> None:
    cases = [{"id": f"q{i}", "prompt": f"{i} + 1?", "expected": str(i + 1)} for i in range(3)]
    loops = {"right": anb.Loop(model=anb.ScriptedModel([lambda m: {"text": str(int(m[0].text.split()[0]) + 1)}] * 3)),
             "off": anb.Loop(model=anb.ScriptedModel([lambda m: {"text": "1"}] * 3))}
    result = anb.evaluate(loops, cases, [S.exact(), S.regex(r"^\d+$"), S.calls()], progress=False)
    t = result.table
    assert list(t.columns) == [c for c, _, _ in COLUMNS] and len(t) == 18
    assert t["target"].cat.categories.tolist() == ["right", "off"] and str(t["passed"].dtype) == "boolean"
    cmp = result.compare()
    assert cmp.means.loc["exact"].tolist() == [1.0, 1 / 3] and cmp.means.loc["regex"].tolist() == [1.0, 1.0]
    assert cmp.differ.index.tolist() == [("q1", "exact"), ("q2", "exact")]
    assert cmp.means.index.tolist() == ["exact", "regex", "calls_order"]  # no case has calls: a row of NaN
    assert cmp.means.loc["calls_order"].isna().all() and t.loc[t["scorer"] == "calls_order", "passed"].isna().all()
    assert result.summary().loc[("off", "exact"), "passed"] == pytest.approx(1 / 3)
    assert result.run("q2", target="off").run_id == "eval:off:q2"
    with pytest.raises(KeyError, match="name one"):
        result.run("q2")
    with pytest.raises(KeyError, match="no target 'nope'"):
        result.run("q2", target="nope")
    with pytest.raises(ValueError, match="compare needs two models"):
        result.compare(by="model")  # both are scripted: one model name
    assert "<table" in result._repr_html_() and "rows differ" in cmp._repr_html_()


def test_a_run_that_fails_is_scored_as_a_failure_not_a_stop() -> None:
    @anb.tool
    def boom() -> int:
        """Raise."""
        raise RuntimeError("down")

    loop = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [{"name": "boom", "arguments": {}}]},
                                             {"refusal": "I cannot"}]), tools=[boom])
    result = anb.evaluate(loop, [{"id": "q", "prompt": "x", "expected": "5"}], [S.exact()], progress=False)
    row = result.table.iloc[0]
    assert row["state"] == "REFUSED" and not row["passed"] and "the run has no output" in row["explanation"]


def test_bad_targets_are_refused() -> None:
    with pytest.raises(AgentnbError, match="a mapping name -> Loop"):
        anb.evaluate("gpt", [{"prompt": "x"}], [S.exact()])  # type: ignore[arg-type]
    with pytest.raises(AgentnbError, match="bad: \\['a b'\\]"):
        anb.evaluate({"a b": _loop(ADD)}, [{"prompt": "x"}], [S.exact()])
    with pytest.raises(AgentnbError, match="no cases"):
        anb.evaluate(_loop(ADD), [], [S.exact()])


def test_an_evaluation_on_a_dask_cluster_scores_as_the_same_one_here(pg_dsn: str, pg_schema: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    from tests.batch_worker import slow_loop, story_loop

    # the worker processes import the test package and need the store's key, as a real worker machine would
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("AGENTNB_CHECKPOINT_KEY", "evals-dask-key-01")
    cases = [{"id": f"q{i}", "prompt": f"sum {i}", "expected": "sum 3"} for i in range(4)]
    targets = {"adds": slow_loop, "weather": story_loop}
    here = anb.evaluate({k: f() for k, f in targets.items()}, cases, [S.exact()], progress=False)
    store = anb.PostgresStore(pg_dsn, schema=pg_schema)
    try:
        with distributed.LocalCluster(n_workers=1, threads_per_worker=4, processes=True, dashboard_address=None,
                                      host="127.0.0.1") as cluster, distributed.Client(cluster) as client:
            with pytest.raises(AgentnbError, match="a function that builds an agentnb.Loop"):
                anb.evaluate(slow_loop(), cases, [S.exact()], executor=client, store=store)
            there = anb.evaluate(targets, cases, [S.exact()], executor=client, store=store, progress=False)
            pids = set(client.run(os.getpid).values())
        assert os.getpid() not in pids
        assert {r for r, _ in store.runs(state="COMPLETED")} == {f"eval:{k}:q{i}" for k in targets for i in range(4)}
    finally:
        store.close()
    cols = ["target", "id", "scorer", "score", "passed"]
    pd.testing.assert_frame_equal(there.table[cols], here.table[cols])
    assert there.compare().means.loc["exact"].tolist() == [1.0, 0.0]

