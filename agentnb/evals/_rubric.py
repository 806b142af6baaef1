"""The model-graded scorer: a model reads the run and grades it by a rubric, answering a typed :class:`Grade`.

The grader is any model of the project (a :class:`~agentnb.ScriptedModel` offline, a provider model, one
through the emulator): the prompt (:data:`PROMPT`) holds the rubric, the case's prompt, its expected output when
it has one, and the run as plain text (the scanners' :func:`~agentnb.scanners._ask.run_text`), and it is the
prompt of a run of a :class:`~agentnb.Loop` with ``output_type=Grade``, so the answer comes through the project's
typed-output machinery (validated, with correction turns). A grader that gives no valid answer is a score of 0
explaining how its run ended, never a stopped evaluation.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from .._loop import Loop
from .._states import LoopState
from ..scanners._ask import run_text
from .scorers import Score, Scorer, Trial

PROMPT = ("Grade the run of a tool-calling assistant below by this rubric.\n\nRubric: {rubric}\n\n"
          "The user asked: {prompt}\n{expected}\nThe run:\n\n{run}")
"""The grader's prompt (``rubric``, ``prompt``, ``expected`` and ``run`` are filled in)."""


class Grade(BaseModel):
    """A grader's answer: passed or not, a score in [0, 1] (default: 1 if passed, else 0), and why.

    Example:
        >>> Grade(passed=True, explanation="it used the tool").score
        1.0
    """

    passed: bool
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    explanation: str = ""

    def model_post_init(self, context: Any, /) -> None:
        """Fill the score in from ``passed`` when the grader gave none."""
        if self.score is None:
            self.score = 1.0 if self.passed else 0.0


def rubric(text: str | None = None, *, model: Any, name: str = "rubric", retries: int = 2) -> Scorer:
    """A model grades each run by a rubric (``text``, or the case's ``rubric``), answering a :class:`Grade`.

    Args:
        text: the rubric for every case; None: each case's ``rubric`` (a case without one is not scored).
        model: the grader: any model of the project.
        name: the scorer's name.
        retries: correction turns for an answer that is not a Grade.

    Example:
        >>> import agentnb as anb
        >>> from agentnb.evals._dataset import Case
        >>> grader = anb.ScriptedModel([{"tool_calls": [{"name": "final_result", "arguments": {
        ...     "passed": True, "explanation": "polite"}}]}])
        >>> trial = Trial(case=Case(id="q", prompt="Hi"), target="a", output="Hello!")
        >>> rubric("Is it polite?", model=grader)(trial)
        Score(score=1.0, passed=True, explanation='polite')
    """
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise ValueError("rubric scorer: the rubric is a non-empty string (or None: each case's rubric)")
    Loop(model=model, output_type=Grade, output_retries=retries)  # refuses a bad model now, not on every row

    def fn(t: Trial) -> Score:
        what = text if text is not None else t.case.rubric
        if what is None:
            return Score.skip("the case has no rubric")
        want = t.case.expected
        shown = want if isinstance(want, str) else json.dumps(want)
        expected = "" if want is None else f"The expected answer: {shown}\n"
        run = run_text(t.transcript) if t.transcript is not None else f"(the run did not start: {t.error})"
        prompt = PROMPT.format(rubric=what.strip(), prompt=t.case.prompt, expected=expected, run=run)
        graded = Loop(model=model, output_type=Grade, output_retries=retries).start(prompt).run()
        if graded.state != LoopState.COMPLETED or not isinstance(graded.output, Grade):
            return Score(score=0.0, passed=False, explanation=f"the grader gave no grade: its run ended "
                         f"{graded.state.value} ({graded.reason or 'no reason given'})")
        g = graded.output
        return Score(score=float(g.score if g.score is not None else float(g.passed)), passed=g.passed,
                     explanation=g.explanation)

    return Scorer(name, fn)


__all__ = ["PROMPT", "Grade", "rubric"]
