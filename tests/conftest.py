from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import agentnb as anb


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@anb.tool
def boom(message: str) -> str:
    """Always fails."""
    raise RuntimeError(message)


@pytest.fixture
def make_loop() -> Callable[..., anb.Loop]:
    """A loop over a script, with the test tools and no retry delay."""

    def make(script: list[Any], tools: list[Any] | None = None, **options: Any) -> anb.Loop:
        stream = options.pop("stream", False)
        options.setdefault("retry_base_delay", 0.0)
        model = anb.ScriptedModel(script, stream=stream, chunk_size=options.pop("chunk_size", 4))
        return anb.Loop(model=model, tools=tools if tools is not None else [add, boom], **options)

    return make


def types(run: anb.Run) -> list[str]:
    return [e.type for e in run.events]
