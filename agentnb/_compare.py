"""Two runs side by side: aligned turn by turn and call by call, with the first place they part and why.

Theory of operation. Each run is read as its *steps* (:func:`steps`): for every model turn, the turn (its text
and its calls, each a tool and its canonical arguments), then each call's outcome (approved or denied by whom,
its result), then how the run ended. Two runs are aligned step by step in that order; the first step where
they differ is the divergence, and its cause is said in words from what came before it: another model answer
(the conversation was the same up to that turn), another tool result (same call, another answer), another
policy decision (a call one run ran and the other asked about, or denied), another tool choice, a guard, or
another end. :func:`compare` gives a :class:`Comparison` (a DataFrame of the aligned steps, the first
divergence, a side-by-side view in a notebook); ``TranscriptCollection.compare(by=...)`` does it for many runs
of the same tasks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._binding import canonical, sha256
from .events import (
    ApprovalRequested,
    ApprovalResolved,
    BaseEvent,
    CallRejected,
    CallValidated,
    GuardTripped,
    RunFinished,
    RunStarted,
    ToolFinished,
    TurnCompleted,
)
from .exceptions import AgentnbError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Step:
    """One step of a run as a comparison reads it: a turn, a call's outcome, or the end."""

    kind: str
    """``turn``, ``call`` or ``end``."""
    turn: int
    key: str
    """What must be equal for two runs to agree here (a turn: text and calls; a call: decision and result)."""
    label: str
    """The step in words (shown side by side)."""
    seq: int
    """The event that ended the step."""
    call: str | None = None
    calls: int = 0
    """For a turn: how many calls it made."""
    tool: str = ""
    """For a call: its tool."""
    how: str = ""
    """For a call: ``ran``, or ``asked (<kind>), <decision>`` -- what the comparison calls a policy decision."""


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def steps(events: Iterable[BaseEvent]) -> list[Step]:
    """A run's steps, in order (see the module docstring)."""
    out: list[Step] = []
    validated: dict[str, CallValidated] = {}
    asked: dict[str, str] = {}
    decided: dict[str, str] = {}
    names: dict[str, str] = {}
    for e in events:
        if isinstance(e, TurnCompleted):
            calls = [(c.name, canonical(c.arguments)) for c in e.response.message.tool_calls]
            text = e.response.message.text or ""
            label = "; ".join(f"{n}({a})" for n, a in calls) or f"answer: {_short(text)}"
            out.append(Step("turn", e.turn, sha256(canonical([text, calls])), label, e.seq, calls=len(calls)))
        elif isinstance(e, CallValidated):
            validated[e.call_id] = e
        elif isinstance(e, ApprovalRequested):
            asked[e.call_id] = e.kind
            names[e.call_id] = e.name
        elif isinstance(e, ApprovalResolved):
            decided[e.call_id] = e.decision
            if e.decision in ("denied", "submitted") and not e.call_id.startswith("guard:"):  # that is its answer
                how = f"asked ({asked.get(e.call_id, '?')}), {e.decision}"
                content = (e.content if e.decision == "submitted" else e.note) or ""
                name = names.get(e.call_id, "?")
                out.append(Step("call", e.turn, sha256(canonical([name, how, e.decision, content])),
                                f"{name} · {how} · {e.decision}: {_short(content)}", e.seq, e.call_id,
                                tool=name, how=how))
        elif isinstance(e, ToolFinished | CallRejected):
            status: str = e.status if isinstance(e, ToolFinished) else "rejected"
            content = e.content if isinstance(e, ToolFinished) else e.message
            how = f"asked ({asked[e.call_id]}), {decided.get(e.call_id, '?')}" if e.call_id in asked else "ran"
            label = f"{e.name} · {how} · {status}: {_short(content)}"
            out.append(Step("call", e.turn, sha256(canonical([e.name, how, status, content])), label, e.seq,
                            e.call_id, tool=e.name, how=how))
        elif isinstance(e, GuardTripped):
            out.append(Step("guard", e.turn, sha256(canonical([e.guard, e.action])), f"guard {e.guard}: {e.action}",
                            e.seq))
        elif isinstance(e, RunFinished):
            out.append(Step("end", e.turn, e.state.value, f"ended {e.state.value}", e.seq))
    return out


@dataclass(frozen=True)
class Parting:
    """The first step where two runs differ, and why in words."""

    step: int
    """Its position in the aligned steps."""
    a: Step | None
    b: Step | None
    why: str

    def __str__(self) -> str:
        return self.why


def _why(a: Step | None, b: Step | None) -> str:
    if a is None or b is None:
        longer, which = (b, "b") if a is None else (a, "a")
        assert longer is not None
        return f"run {which} goes on after the other ended: {longer.label}"
    if a.kind != b.kind:
        return f"one run has a {a.kind} ({a.label}) where the other has a {b.kind} ({b.label})"
    if a.kind == "turn":
        return f"another model answer at turn {a.turn} (the conversation was the same up to it): {a.label} / {b.label}"
    if a.kind == "call":
        if a.how != b.how:
            return f"another policy decision for {a.tool}: {a.label} / {b.label}"
        return f"another tool result at turn {a.turn}: {a.label} / {b.label}"
    if a.kind == "guard":
        return f"another guard: {a.label} / {b.label}"
    return f"another end: {a.label} / {b.label}"


class Comparison:
    """Two runs aligned step by step: :attr:`table`, the first divergence (:attr:`parting`), a side-by-side view."""

    def __init__(self, a: list[BaseEvent], b: list[BaseEvent]) -> None:
        self.a_run = a[0].run_id if a else ""
        self.b_run = b[0].run_id if b else ""
        self.a_events, self.b_events = list(a), list(b)
        self.a_steps, self.b_steps = steps(a), steps(b)
        if _parent_of(b) == self.a_run:  # a fork starts where its parent stood: read its steps from there
            self.b_steps = _inherited_steps(self.a_steps, b) + self.b_steps
        elif _parent_of(a) == self.b_run:
            self.a_steps = _inherited_steps(self.b_steps, a) + self.a_steps
        self.parting: Parting | None = None
        for i, (sa, sb) in enumerate(_iter_pairs(self.a_steps, self.b_steps)):
            if sa is None or sb is None or (sa.kind, sa.key) != (sb.kind, sb.key):
                self.parting = Parting(i, sa, sb, _why(sa, sb))
                break

    @property
    def same(self) -> bool:
        """True when the two runs took the same trajectory to the same end."""
        return self.parting is None

    @property
    def table(self) -> pd.DataFrame:
        """One row per aligned step: ``step``, ``kind``, ``turn``, each side's label and seq, ``same``."""
        import pandas as pd

        rows = []
        for i, (sa, sb) in enumerate(_iter_pairs(self.a_steps, self.b_steps)):
            first = sa or sb
            assert first is not None
            rows.append({"step": i, "kind": first.kind, "turn": first.turn,
                         "a": sa.label if sa else None, "b": sb.label if sb else None,
                         "a_seq": sa.seq if sa else None, "b_seq": sb.seq if sb else None,
                         "same": sa is not None and sb is not None and (sa.kind, sa.key) == (sb.kind, sb.key)})
        frame = pd.DataFrame(rows)
        return frame.astype({"a_seq": "Int64", "b_seq": "Int64"}) if rows else frame

    def __repr__(self) -> str:
        verdict = "the same trajectory" if self.parting is None else f"part at step {self.parting.step}: {self.parting}"
        return f"<agentnb.Comparison {self.a_run} vs {self.b_run}: {verdict}>"

    def _repr_html_(self) -> str:
        """The aligned steps side by side in the debugger's style, the first divergence lit, the conversations' diff.

        Static HTML with its stylesheet: a saved notebook keeps it as it was, with both runs in it.
        """
        from ._debugger.compare_view import comparison_html

        return comparison_html(self)

    def to_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write the side-by-side view as one self-contained HTML file (both runs in it) and return its path.

        Example:
            >>> import agentnb as anb, tempfile, os
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> run = loop.start("Paris?").run()
            >>> out = anb.compare(run, run).to_html(os.path.join(tempfile.mkdtemp(), "same.html"))
            >>> "the same trajectory" in out.read_text(encoding="utf-8")
            True
        """
        from ._debugger.compare_view import write_comparison

        return write_comparison(self, path, title=title)


def _parent_of(events: list[BaseEvent]) -> str | None:
    fork = events[0].settings.get("fork") if events and isinstance(events[0], RunStarted) else None
    return str(fork.get("parent")) if isinstance(fork, dict) else None


def _inherited_steps(parent: list[Step], fork: list[BaseEvent]) -> list[Step]:
    """The parent's steps a fork's conversation starts from: up to its fork point, whole turns only.

    The results the fork replaced are read from the fork's own first messages.
    """
    first = fork[0]
    assert isinstance(first, RunStarted)
    lineage = first.settings["fork"]
    at = lineage.get("at")
    prefix = [s for s in parent if at is not None and s.seq <= at and s.kind in ("turn", "call")]
    while prefix:  # a turn whose calls were not all answered at the fork point is asked again by the fork
        turns = [i for i, s in enumerate(prefix) if s.kind == "turn"]
        last = turns[-1] if turns else None
        if last is None or len(prefix) - last - 1 >= prefix[last].calls:
            break
        prefix = prefix[:last]
    replaced = set(lineage.get("results") or ())
    if not replaced:
        return prefix
    given = {p.call_id: p for m in first.messages for p in m.tool_results if p.call_id in replaced}
    out = []
    for s in prefix:
        if s.kind == "call" and s.call in given:
            part = given[s.call]
            label = f"{s.tool} · ran · {part.status}: {_short(part.content)} (replaced in the fork)"
            s = Step("call", s.turn, sha256(canonical([s.tool, "ran", part.status, part.content])), label, s.seq,
                     s.call, tool=s.tool, how="ran")
        out.append(s)
    return out


def _events(run: Any) -> list[BaseEvent]:
    events = getattr(run, "events", run)
    if not isinstance(events, list) or not events or not isinstance(events[0], RunStarted):
        raise AgentnbError(f"compare needs runs, transcripts or event lists that start with RunStarted; got {run!r}")
    return events


def compare(a: Any, b: Any) -> Comparison:
    """Align two runs turn by turn and call by call; the first divergence says why they parted.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = loop.start("Paris?").run()
        >>> call = next(e.call_id for e in run.events if e.type == "ToolFinished")
        >>> snow = run.fork(results={call: {"city": "Paris", "temp_c": -5, "sky": "snow"}}).run()
        >>> anb.compare(run, run).same, anb.compare(run, snow).parting.why.startswith("another tool result")
        (True, True)

    Raises:
        AgentnbError: either side is not a run (a Run, a Transcript, or its events).
    """
    return Comparison(_events(a), _events(b))


def compare_many(runs: Iterable[Any], by: Any, task: Any = None) -> pd.DataFrame:
    """Runs of the same tasks compared across the two values of ``by`` (see ``TranscriptCollection.compare``)."""
    import pandas as pd

    key_of = by if callable(by) else (lambda t: _attribute(t, by))
    task_of = task if callable(task) else (lambda t: canonical([m.text for m in t.events[0].messages]))
    groups: dict[Any, dict[Any, Any]] = {}
    for t in runs:
        groups.setdefault(task_of(t), {}).setdefault(key_of(t), t)
    values = sorted({v for g in groups.values() for v in g}, key=str)
    if len(values) != 2:
        raise AgentnbError(f"compare(by=...) compares two groups; {by!r} gives {len(values)}: {values[:5]}")
    rows = []
    for name, g in groups.items():
        if len(g) != 2:
            continue
        c = compare(g[values[0]], g[values[1]])
        rows.append({"task": _short(str(name), 80), "a_run": c.a_run, "b_run": c.b_run, "same": c.same,
                     "parted_at": c.parting.step if c.parting else None,
                     "why": c.parting.why if c.parting else None})
    out = pd.DataFrame(rows)
    out.attrs["a"], out.attrs["b"] = values
    if rows:
        out.attrs["identical_share"] = float(out["same"].mean())
    return out


def _attribute(t: Any, name: str) -> Any:
    first = t.events[0]
    if name == "model":
        return first.model
    value = first.settings.get(name)
    if value is None:
        raise AgentnbError(f"compare(by={name!r}): the runs' RunStarted has no {name!r} (use 'model' or a function "
                           "of a transcript)")
    return value


def _iter_pairs(a: list[Step], b: list[Step]) -> Iterator[tuple[Step | None, Step | None]]:
    for i in range(max(len(a), len(b))):
        yield (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)


__all__ = ["Comparison", "Parting", "Step", "compare", "compare_many", "steps"]
