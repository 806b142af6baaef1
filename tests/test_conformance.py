"""Conformance with the real services, on recorded traffic (tests/fixtures/conformance, see its README.md).

Every request a real service accepted lints with no error and gets a 2xx from the emulator; every refused
request whose cause is a history rule is flagged with the matching code (and the emulator refuses it);
every recorded answer parses with the calls its raw body holds. ``bench/conformance.py`` prints the same
figures as a table.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentnb.emulator import Emulator
from tests.conformance_corpus import APIS, REFUSED, emulator_status, lint_errors, load, parsed_calls, raw_calls

ITEMS = {api: load(api) for api in APIS}


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    # Signatures and encrypted reasoning in the recordings were issued by the real services: only they can
    # verify them, and the emulator's defaults accept what it did not issue (its own are verified in
    # test_emulator.py; strict_signatures=True refuses the others).
    with Emulator() as e:
        yield e


def test_the_corpus_covers_every_wire_api() -> None:
    for api in APIS:
        items = ITEMS[api]
        assert len(items) >= 80, api
        assert all(i.source["repo"] and len(i.source["commit"]) == 40 and i.source["path"] for i in items)
    refused = [i.id for api in APIS for i in ITEMS[api] if not i.accepted]
    assert sorted(refused) == sorted(REFUSED), "every refused request is classified in REFUSED"


@pytest.mark.parametrize("api", APIS)
def test_accepted_requests_lint_clean(api: str) -> None:
    bad = {i.id: errors for i in ITEMS[api] if i.accepted and (errors := lint_errors(i))}
    assert bad == {}


@pytest.mark.parametrize("api", APIS)
def test_refused_requests_in_scope_are_flagged(api: str) -> None:
    for item in ITEMS[api]:
        code = REFUSED.get(item.id)
        if not item.accepted and code is not None:
            assert code in lint_errors(item), item.id


@pytest.mark.parametrize("api", APIS)
def test_the_emulator_agrees(emu: Emulator, api: str) -> None:
    wrong = {}
    for item in ITEMS[api]:
        if item.accepted or REFUSED.get(item.id):
            status, text = emulator_status(emu, item)
            assert status < 500, (item.id, text)
            if (200 <= status < 300) != item.accepted:
                wrong[item.id] = (item.status, status, text[:200])
    assert wrong == {}


@pytest.mark.parametrize("api", APIS)
def test_every_answer_parses_with_its_calls(api: str) -> None:
    checked = 0
    for item in ITEMS[api]:
        want = raw_calls(item) if item.accepted else None
        if want is None:
            continue
        got = parsed_calls(item)
        if api == "gemini":  # Gemini calls carry no id on the API: the driver gives each one its own
            got, want = [c[1:] for c in got], [c[1:] for c in want]
        assert got == want, item.id
        checked += 1
    assert checked >= 10
