"""A question put to a model about each run, answered with a typed value: ``anb.scanner.ask(...)``.

The run is written out as plain text (:func:`run_text`: each message in order, calls with their arguments,
results with their status, then how the run ended) under the question, and sent as the prompt of a run of a
:class:`~agentnb.Loop` with ``output_type=answer``: the model answers through the project's typed-output
machinery (the output tool, or the provider's structured-output mode), validated, with correction turns when
it does not fit. Any model of the project answers: a :class:`~agentnb.ScriptedModel` offline, a provider model,
or one through the emulator. The answer is one hit per run whose ``value`` is the answer as JSON data (a bool, a
pydantic model's fields); a question that gets no valid answer is the scanner raising on that run.

The scanner's version is a digest of the question, the answer's schema and the model's provider and name,
so a cached answer is never reused for another question, type or model.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any

from pydantic import TypeAdapter

from .._loop import Loop
from .._messages import RefusalPart, TextPart, ToolCallPart, ToolResultPart
from .._states import LoopState
from .._transcript import Transcript
from .._values import to_json_safe
from ..exceptions import ModelError
from ._core import Hit, Scanner

PROMPT = ("{question}\n\nAnswer about the run of a tool-calling assistant below, from what it shows. The "
          "run:\n\n{run}")
"""The prompt a question is sent with (``question`` and ``run`` are filled in)."""

MAX_CHARS = 2000
"""Characters of one message part kept in the run's text (the rest is cut, and the cut said)."""


def _cut(text: str, limit: int = MAX_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


def run_text(transcript: Transcript) -> str:
    """A run as plain text for a model to read: its messages, calls, results and how it ended.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> print(run_text(run.start("Paris?").run().transcript).splitlines()[0])
        [user] Paris?
    """
    lines: list[str] = []
    for m in transcript.messages:
        for p in m.parts:
            if isinstance(p, TextPart):
                lines.append(f"[{m.role}] {_cut(p.text)}")
            elif isinstance(p, RefusalPart):
                lines.append(f"[{m.role} refused] {_cut(p.text)}")
            elif isinstance(p, ToolCallPart):
                lines.append(f"[{m.role} calls {p.name} ({p.call_id})] {_cut(p.arguments_raw)}")
            elif isinstance(p, ToolResultPart):
                lines.append(f"[result of {p.name} ({p.call_id}), {p.status}] {_cut(p.content)}")
    folded = transcript.fold()
    lines.append(f"[the run ended {transcript.state.value}" + (f": {folded.reason}]" if folded.reason else "]"))
    return "\n".join(lines)


def _slug(question: str) -> str:
    words = re.findall(r"[a-z0-9]+", question.casefold())[:6]
    return "ask:" + ("_".join(words) or "question")[:60]


def ask(question: str, *, model: Any, answer: Any = bool, name: str | None = None, version: str | None = None,
        retries: int = 2) -> Scanner:
    """A scanner that asks ``model`` ``question`` about each run, answered as an ``answer`` (default ``bool``).

    Args:
        question: what to ask, about one run ("Did the model ignore a tool error?").
        model: any model of the project (a :class:`~agentnb.ScriptedModel`, a provider model, ...).
        answer: the answer's type: ``bool``, a pydantic model, a ``Literal``, any type pydantic validates.
        name: the scanner's name (default: ``ask:`` and the question's first words).
        version: part of the cache key (default: a digest of the question, the answer's schema and the model).
        retries: correction turns for an answer that does not fit the type.

    Raises:
        ValueError: an empty question.
        ToolDefinitionError: an ``answer`` type with no JSON schema.

    Example:
        >>> import agentnb as anb
        >>> judge = anb.ScriptedModel([lambda messages: {"tool_calls": [{"name": "final_result", "arguments": {
        ...     "result": "error" in messages[0].text}}]}])
        >>> question = anb.scanner.ask("Did a tool fail?", model=judge)
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> anb.scan(loop.start("Paris?").run().transcript, question)[["scanner", "value"]]
                        scanner  value
        0  ask:did_a_tool_fail  False
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("anb.scanner.ask needs a question (a non-empty string)")
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, got {retries}")
    Loop(model=model, output_type=answer, output_retries=retries)  # refuses a bad type or model now, not per run
    schema = answer if isinstance(answer, dict) else TypeAdapter(answer).json_schema()
    who = f"{model.provider}:{model.name}"
    basis = json.dumps([question, schema, who], sort_keys=True, default=str)
    version = version or hashlib.sha256(basis.encode()).hexdigest()[:16]

    def find(t: Transcript) -> Hit:
        loop = Loop(model=model, output_type=answer, output_retries=retries)
        prompt = PROMPT.format(question=question.strip(), run=run_text(t))
        run = loop.start(prompt, run_id=f"scan-{secrets.token_hex(8)}").run()
        if run.state != LoopState.COMPLETED:
            raise ModelError(f"the question got no answer: the run ended {run.state.value}"
                             f" ({run.transcript.fold().reason or 'no reason given'})", status=None, retryable=False)
        return Hit(value=to_json_safe(run.output))

    return Scanner(name or _slug(question), find, version=version)
