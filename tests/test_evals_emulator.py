"""The acceptance test of ``anb.evaluate``: 200 cases, two scripted models served by the emulator to the official
``openai`` SDK, scores checked one by one against what the two scripts were built to do."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd
import pytest

import agentnb as anb
from agentnb._messages import ToolResultPart
from agentnb.emulator import Emulator

pytest.importorskip("openai")

N = 200


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _numbers(messages: Any) -> tuple[int, int]:
    found = re.search(r"Add (\d+) and (\d+)", messages[0].text)
    assert found is not None
    return int(found[1]), int(found[2])


def _result(messages: Any) -> str | None:
    parts = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    return parts[-1].content if parts else None


def good(messages: Any) -> dict[str, Any]:
    """Calls add with the prompt's numbers, then answers with the result."""
    a, b = _numbers(messages)
    result = _result(messages)
    if result is None:
        return {"tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}
    return {"text": result}


def wrong_arg(i: int) -> bool:
    return i % 7 == 0  # the second model adds one to b: a wrong call, a wrong answer


def no_tool(i: int) -> bool:
    return i % 11 == 0 and not wrong_arg(i)  # the second model answers right, in its head: no call


def sloppy(messages: Any) -> dict[str, Any]:
    a, b = _numbers(messages)
    i = a  # the prompts are built with a = i
    result = _result(messages)
    if no_tool(i):
        return {"text": str(a + b)}
    if result is None:
        return {"tool_calls": [{"name": "add", "arguments": {"a": a, "b": b + 1 if wrong_arg(i) else b}}]}
    return {"text": result}


def grader(messages: Any) -> dict[str, Any]:
    """An offline grader: passes a run whose text shows an add call."""
    used = "calls add (" in messages[0].text
    return {"tool_calls": [{"name": "final_result", "arguments": {"passed": used, "explanation":
                                                                   "used add" if used else "no tool"}}]}


def test_two_models_through_the_emulator_get_exactly_the_expected_scores() -> None:
    cases = [{"id": f"case-{i:03d}", "prompt": f"Add {i} and {2 * i + 1}", "expected": str(3 * i + 1),
              "calls": [{"tool": "add", "arguments": {"a": i, "b": 2 * i + 1}}]} for i in range(N)]

    @anb.scorers.scorer
    def mentions_prompt_sum(trial: anb.evals.Trial) -> bool:
        return trial.output == str(sum(int(x) for x in re.findall(r"\d+", trial.case.prompt)))

    scorers = [anb.scorers.exact(), anb.scorers.calls(), anb.scorers.budget(max_turns=1), mentions_prompt_sum,
               anb.scorers.rubric("Did it use the add tool?", model=anb.ScriptedModel([grader] * (2 * N)))]
    with Emulator() as one, Emulator() as two:
        one.play([good] * (3 * N))
        two.play([sloppy] * (3 * N))
        loops = {
            "one": anb.Loop(model=anb.OpenAIChatModel(one.client("openai_chat"), model="gpt-4.1"), tools=[add]),
            "two": anb.Loop(model=anb.OpenAIChatModel(two.client("openai_chat"), model="gpt-4.1-mini"),
                            tools=[add]),
        }
        result = anb.evaluate(loops, cases, scorers, concurrency=8, progress=False)
        assert all(r.status == 200 for r in one.requests + two.requests)
        assert len(one.requests) == 2 * N
        assert len(two.requests) == 2 * N - sum(no_tool(i) for i in range(N))

    t = result.table
    assert len(t) == 2 * N * len(scorers) and t["state"].eq("COMPLETED").all()
    assert set(t.loc[t["target"] == "one", "model"]) == {"openai_chat:gpt-4.1"}
    passed = dict(zip(zip(t["target"].astype(str), t["id"], t["scorer"].astype(str), strict=True),
                      t["passed"].tolist(), strict=True))
    for i in range(N):
        cid = f"case-{i:03d}"
        for scorer in ("exact", "mentions_prompt_sum"):
            assert passed[("one", cid, scorer)] is True
            assert passed[("two", cid, scorer)] is (not wrong_arg(i)), (cid, scorer)
        assert passed[("one", cid, "calls_order")] is True
        assert passed[("two", cid, "calls_order")] is (not wrong_arg(i) and not no_tool(i)), cid
        assert passed[("one", cid, "budget")] is False  # two turns: a call, then the answer
        assert passed[("two", cid, "budget")] is no_tool(i), cid
        assert passed[("one", cid, "rubric")] is True
        assert passed[("two", cid, "rubric")] is (not no_tool(i)), cid

    wrong = sum(wrong_arg(i) for i in range(N))
    headless = sum(no_tool(i) for i in range(N))
    cmp = result.compare(by="target")
    assert cmp.means.loc["exact"].tolist() == [1.0, (N - wrong) / N]
    assert cmp.means.loc["calls_order"].tolist() == [1.0, (N - wrong - headless) / N]
    by_model = result.compare(by="model")
    assert list(by_model.means.columns) == ["openai_chat:gpt-4.1", "openai_chat:gpt-4.1-mini"]
    differ = cmp.differ.reset_index()
    expected_differ = {(f"case-{i:03d}", s) for i in range(N) if wrong_arg(i)
                       for s in ("exact", "mentions_prompt_sum", "calls_order")}
    expected_differ |= {(f"case-{i:03d}", s) for i in range(N) if no_tool(i) for s in ("calls_order", "budget",
                                                                                       "rubric")}
    assert set(zip(differ["id"], differ["scorer"], strict=True)) == expected_differ
    summary = result.summary()
    assert summary.loc[("two", "exact"), "passed"] == pytest.approx((N - wrong) / N)
    # each row opens as its run, the debugger's display
    bad = result.run(f"case-{7:03d}", target="two")
    assert isinstance(bad, anb.Transcript) and bad.run_id == "eval:two:case-007"
    assert json.loads(bad.frames.calls()["arguments"].iloc[0]) == {"a": 7, "b": 16}
    assert isinstance(t, pd.DataFrame)


def test_a_rubric_graded_through_the_official_sdk_and_the_emulator() -> None:
    def grade(messages: Any) -> dict[str, Any]:
        ok = "[assistant] 5" in messages[0].text
        return {"text": json.dumps({"passed": ok, "score": 1.0 if ok else 0.0, "explanation": "read the answer"})}

    cases = [{"id": "right", "prompt": "Add 2 and 3", "rubric": "Is the answer 5?"},
             {"id": "wrong", "prompt": "Add 2 and 4", "rubric": "Is the answer 5?"}]
    model = anb.ScriptedModel([lambda m: {"text": str(sum(map(int, re.findall(r"\d", m[0].text))))}])
    with Emulator() as emu:
        emu.play([grade] * 2)
        judge = anb.OpenAIChatModel(emu.client("openai_chat"), model="gpt-4.1")
        result = anb.evaluate(anb.Loop(model=model), cases, [anb.scorers.rubric(model=judge)], progress=False)
        assert len(emu.requests) == 2 and "response_format" in emu.requests[0].body  # a typed answer
    assert result.table["passed"].tolist() == [True, False]
    assert result.table["explanation"].tolist() == ["read the answer"] * 2
