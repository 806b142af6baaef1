"""The course's claims about providers, checked against the recorded real traffic the suite replays.

A lesson that states how a provider behaves (a finish reason, a binding field, a strict flag, a model name the
service answers with) backs the statement in its cell's source with a machine-readable tag naming a recording::

    <!-- claim: conformance gemini-0048 response.candidates[0].finishReason = "SAFETY" -->
    <!-- claim: wire openai-chat/nonstream-parallel-tool-calls.json choices[0].finish_reason = "tool_calls" -->

``conformance <id>`` is an exchange of ``tests/fixtures/conformance`` (``status``, ``request`` or ``response``
first in the path; every one is replayed by ``tests/test_conformance.py``); ``wire <file>`` a recording of
``tests/fixtures/wire`` (``tests/test_wire_corpus.py``), whose path starts at the JSON document (``text`` is a
stream's raw text). ``=`` compares JSON values, ``~`` finds a JSON string inside the value's text. Where no
recording exists the lesson says so where students read it, ``*(From the documentation: [title](url).)*``.
A claim that the recordings contradict fails here, naming the notebook and the cell.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conformance_corpus import APIS, load

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("**/*.ipynb"))
CONFORMANCE = ROOT / "tests" / "fixtures" / "conformance"
WIRE = ROOT / "tests" / "fixtures" / "wire"

CLAIM = re.compile(r"<!--\s*claim:\s*(?P<corpus>\w+)\s+(?P<record>\S+)\s+(?P<path>\S+)\s+(?P<op>[=~])\s+(?P<value>.+?)"
                   r"\s*-->")
DOC = re.compile(r"\*\(From the documentation: \[[^\]]+\]\(https://[^)\s]+\)\.\)\*")
STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")

# Words that name a provider's own behaviour on the wire: a markdown cell that uses one states a provider fact,
# so it carries a claim or a documentation citation.
PROVIDER_WORDS = ("`end_turn`", "`tool_use`", "`stop_sequence`", "`pause_turn`", "`model_context_window_exceeded`",
                  "`MAX_TOKENS`", "`SAFETY`", "`MALFORMED_FUNCTION_CALL`", "`UNEXPECTED_TOOL_CALL`",
                  "`content_filter`", "`output_config", "`parametersJsonSchema`", "`openWorldHint`",
                  "`destructiveHint: true`", "snapshot")


def cells() -> list[tuple[str, str, str, str]]:
    """(notebook, cell id, cell type, source) of every cell of the course and its solutions."""
    out = []
    for path in NOTEBOOKS:
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            out.append((path.relative_to(ROOT).as_posix(), str(cell.get("id", i)), cell["cell_type"],
                        "".join(cell["source"])))
    return out


def claims() -> list[tuple[str, str, re.Match[str]]]:
    return [(nb, cid, m) for nb, cid, _, src in cells() for m in CLAIM.finditer(src)]


@cache
def conformance() -> dict[str, Any]:
    return {item.id: item for api in APIS for item in load(api, CONFORMANCE)}


def recording(corpus: str, record: str) -> Any:
    """The recorded document a claim names (a KeyError/ValueError says what is wrong with the name)."""
    if corpus == "conformance":
        item = conformance()[record]
        return {"status": item.status, "request": item.request, "response": item.response}
    if corpus == "wire":
        expected = json.loads((WIRE / "expected.json").read_text(encoding="utf-8"))["files"]
        if record not in expected:
            raise KeyError(f"{record} is not a recording of tests/fixtures/wire/expected.json")
        text = (WIRE / record).read_text(encoding="utf-8")
        return {"text": text} if expected[record]["format"] != "json" else json.loads(text)
    raise ValueError(f"unknown corpus {corpus!r}: use 'conformance' or 'wire'")


def resolve(doc: Any, path: str) -> Any:
    for key, index in STEP.findall(path):
        doc = doc[int(index)] if index else doc[key]
    return doc


def verdict(corpus: str, record: str, path: str, op: str, value: str) -> str | None:
    """None when the recordings agree with the claim, else what they say instead."""
    try:
        found = resolve(recording(corpus, record), path)
        wanted = json.loads(value)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return f"cannot be read: {type(exc).__name__}: {exc}"
    if op == "=" and found != wanted:
        return f"the recording has {json.dumps(found)[:200]}"
    if op == "~" and (not isinstance(wanted, str) or wanted not in str(found)):
        return f"the recording has {json.dumps(found)[:200]}, without {wanted!r}"
    return None


ALL = claims()


def test_the_course_backs_its_provider_claims_with_recordings() -> None:
    assert len(ALL) >= 20, "the lessons' claims are tagged (see this module's docstring)"
    tagged = {nb.split("/")[-1][:3] for nb, _, _ in ALL}
    assert tagged >= {"01_", "05_", "05b", "09_", "11_", "13_"}


@pytest.mark.parametrize(("notebook", "cell", "claim"), ALL, ids=[f"{nb.split('/')[-1]}:{c}:{m['record']}:{m['path']}"
                                                                  for nb, c, m in ALL])
def test_every_claim_agrees_with_the_recording_it_names(notebook: str, cell: str, claim: re.Match[str]) -> None:
    problem = verdict(claim["corpus"], claim["record"], claim["path"], claim["op"], claim["value"])
    assert problem is None, f"{notebook}, cell {cell}: {claim.group(0)}: {problem}"


def test_a_claim_the_recording_contradicts_is_caught() -> None:
    assert verdict("conformance", "gemini-0048", "response.candidates[0].finishReason", "=", '"SAFETY"') is None
    assert "the recording has" in str(verdict("conformance", "gemini-0048", "response.candidates[0].finishReason",
                                              "=", '"STOP"'))
    assert "without" in str(verdict("conformance", "gemini-0045", "status", "~", '"404"'))
    assert "cannot be read" in str(verdict("conformance", "gemini-9999", "status", "=", "200"))
    assert "cannot be read" in str(verdict("wire", "openai-chat/nope.json", "model", "=", '"x"'))
    assert "cannot be read" in str(verdict("conformance", "gemini-0048", "response.candidates[7]", "=", "1"))
    tagged = 'x <!-- claim: wire openai-chat/stream-refusal.sse text ~ "refusal" --> y'
    match = CLAIM.search(tagged)
    assert match is not None and verdict(match["corpus"], match["record"], match["path"], match["op"],
                                         match["value"]) is None


def test_a_cell_that_states_a_provider_fact_names_its_recording_or_its_documentation() -> None:
    missing = []
    for notebook, cell, kind, source in cells():
        if kind != "markdown":
            continue
        words = [w for w in PROVIDER_WORDS if w in source]
        if words and not CLAIM.search(source) and not DOC.search(source):
            missing.append(f"{notebook}, cell {cell}: names {', '.join(words)} with no claim tag or citation")
    assert not missing, "\n".join(missing)


def test_the_guides_class_times_are_the_estimates_of_bench_class_time() -> None:
    from bench.class_time import estimate

    rows = [line.split(" | ") for line in (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `") and line.count(" | ") == 4]
    listed = {re.match(r"\| `(\w+)`", row[0]).group(1): row[3] for row in rows}  # type: ignore[union-attr]
    assert sorted(listed) == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    for name, said in listed.items():
        whole, demo = estimate(ROOT / "notebooks" / f"{name}.ipynb")
        wanted = f"{whole} min" if demo is None else f"{demo} min demo ({whole} min whole)"
        assert said == wanted, f"the guide says {name} takes {said!r} in class; bench/class_time.py says {wanted!r}"
