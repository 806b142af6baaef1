"""An evaluation's dataset: cases (a prompt, what is expected of its run, an id), checked before anything runs.

Theory of operation. A :class:`Dataset` is a list of :class:`Case` records read from a DataFrame, a list of
dicts, a JSON Lines / CSV / Parquet file, or the runs a person labelled (:meth:`Dataset.from_labels`: a label
book and the store that holds the runs). Every row is checked when the dataset is made, and one error names
each bad row (its position, and its id when it has one) before any run starts:

- ``prompt`` is a non-blank string (an empty cell, NaN, a number are refused);
- ``id`` is optional (without the column the ids are ``row-0``, ``row-1`` ...), but where given it is a
  non-blank string with no surrounding whitespace: an empty cell (None, NaN) is refused, never made the
  string ``"nan"``, and a duplicate is refused naming both rows. The id names the run of each target (see
  :func:`~agentnb.evaluate`), so it must be stable: the same dataset run again finds the same runs;
- ``expected`` (an output: text, or JSON data for a typed output), ``calls`` (a list of
  ``{"tool": name, "arguments": {...}}``; in a CSV or Parquet cell, its JSON text) and ``rubric`` (text a
  model grades the run by) are optional; an empty cell is "none", so a scorer that needs it says so on that row.

Other columns are kept (``case.extra``) and are in the evaluation's table. :meth:`Dataset.add` turns a run into a
case ("add this run to the dataset"): its prompt, and by default its output and its calls as what is expected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._engine import RunState
from .._messages import TextPart
from .._states import LoopState
from .._transcript import Transcript
from ..exceptions import AgentnbError

if TYPE_CHECKING:
    import pandas as pd

KNOWN = ("id", "prompt", "expected", "calls", "rubric")
"""The columns a dataset reads; any others are kept as ``Case.extra``."""

_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One row of a dataset: a prompt and what is expected of its run.

    Attributes:
        id: the row's id (part of the run id of each target's run of it).
        prompt: the prompt the run starts from.
        expected: the expected output (text, or JSON data for a typed output); None: none given.
        calls: the expected tool calls, ``[{"tool": "add", "arguments": {"a": 2}}, ...]``; None: none given.
        rubric: what a model-graded scorer grades the run by; None: none given.
        extra: the row's other columns.

    Example:
        >>> Case(id="q1", prompt="2 + 3?", expected="5").expected
        '5'
    """

    id: str
    prompt: str
    expected: Any = None
    calls: list[dict[str, Any]] | None = None
    rubric: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _empty(v: Any) -> bool:
    """An empty cell: None, NaN, pandas' NA or NaT (a list or a dict is never empty in this sense)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    if isinstance(v, str | list | dict | tuple | int | bool):
        return False
    try:
        import pandas as pd

        return bool(pd.isna(v)) if not hasattr(v, "__len__") else False
    except (ImportError, TypeError, ValueError):
        return False


def _calls(v: Any) -> list[dict[str, Any]]:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            raise ValueError("calls is not JSON (a list of {\"tool\": ..., \"arguments\": {...}})") from None
    if hasattr(v, "tolist"):  # a numpy array from a Parquet list column
        v = v.tolist()
    if not isinstance(v, list | tuple):
        raise ValueError(f"calls is a list of {{\"tool\": ..., \"arguments\": {{...}}}}, got {type(v).__name__}")
    out = []
    for i, c in enumerate(v):
        if not isinstance(c, Mapping) or not isinstance(c.get("tool"), str) or not c["tool"]:
            raise ValueError(f"call {i} is not {{\"tool\": name, \"arguments\": {{...}}}}: {c!r}")
        args = c.get("arguments")
        if args is not None and not isinstance(args, Mapping):
            raise ValueError(f"call {i}'s arguments are not a mapping: {args!r}")
        out.append({"tool": c["tool"], "arguments": None if args is None else dict(args)})
    return out


def _case(row: Mapping[str, Any], index: int) -> Case:
    """A checked case from one row (raises ValueError saying what is wrong with it)."""
    prompt = row.get("prompt")
    if _empty(prompt) or not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"its prompt is {prompt!r}, not a non-blank string")
    if "id" in row:
        rid = row["id"]
        if _empty(rid):
            raise ValueError(f"its id is empty ({rid!r})")
        if not isinstance(rid, str):
            raise ValueError(f"its id is a {type(rid).__name__} ({rid!r}); ids are strings")
        if not rid.strip() or rid != rid.strip() or any(ord(ch) < 32 for ch in rid):
            raise ValueError(f"its id {rid!r} is blank, padded with whitespace or holds a control character")
    else:
        rid = f"row-{index}"
    calls = row.get("calls")
    rubric = row.get("rubric")
    if not _empty(rubric) and not isinstance(rubric, str):
        raise ValueError(f"its rubric is a {type(rubric).__name__}, not text")
    expected = row.get("expected")
    return Case(id=rid, prompt=prompt, expected=None if _empty(expected) else expected,
                calls=None if _empty(calls) else _calls(calls), rubric=None if _empty(rubric) else rubric,
                extra={k: v for k, v in row.items() if k not in KNOWN})


def check(rows: Sequence[Mapping[str, Any]]) -> list[Case]:
    """Checked cases from rows, or one error naming every bad row (see the module docs)."""
    cases: list[Case] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            problems.append(f"row {i} is a {type(row).__name__}, not a mapping of columns")
            continue
        try:
            case = _case(row, i)
        except ValueError as exc:
            problems.append(f"row {i}: {exc}")
            continue
        if case.id in seen:
            problems.append(f"row {i}: its id {case.id!r} is the id of row {seen[case.id]} too")
            continue
        seen[case.id] = i
        cases.append(case)
    if problems:
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        raise AgentnbError("the dataset has bad rows, so nothing ran: " + "; ".join(problems[:_SHOWN]) + more)
    return cases


def _records(source: Any) -> list[dict[str, Any]]:
    """The rows of a DataFrame, a list of dicts, or a ``.jsonl``/``.csv``/``.parquet`` file."""
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        if not path.is_file():
            raise AgentnbError(f"{path}: no such dataset file")
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".ndjson"):
            rows = []
            for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise AgentnbError(f"{path}:{lineno}: not JSON ({exc})") from None
            return rows
        import pandas as pd

        if suffix == ".csv":
            # every column as text, empty cells as missing: an id "007" stays "007", never the number 7
            return _records(pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""]))
        if suffix == ".parquet":
            return _records(pd.read_parquet(path))
        raise AgentnbError(f"{path}: a dataset file is .jsonl, .csv or .parquet")
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None  # type: ignore[assignment]
    if pd is not None and isinstance(source, pd.DataFrame):
        frame = source.astype(object).where(source.notna(), None)
        return [dict(zip(map(str, frame.columns), row, strict=True)) for row in frame.itertuples(index=False)]
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | Mapping):
        return list(source)
    raise AgentnbError(f"a dataset is a DataFrame, a list of dicts, a .jsonl/.csv/.parquet file or a Dataset; got "
                       f"{type(source).__name__}")


def prompt_of(t: Transcript) -> str:
    """The text of a run's first user message (the prompt it began from)."""
    for m in t.messages:
        if m.role == "user":
            return "".join(p.text for p in m.parts if isinstance(p, TextPart))
    raise AgentnbError(f"run {t.run_id!r} has no user message to make a prompt of")


def output_of(t: Transcript | RunState) -> Any:
    """A completed run's output as JSON data: the typed output's JSON form when it has one, else its final text.

    ``t`` is the run, or its folded state (what a debugger's timeline already holds).
    """
    rs = t if isinstance(t, RunState) else t.fold()
    if rs.state is not LoopState.COMPLETED:
        return None
    return rs.final_output if rs.output_ok else rs.output


def calls_of(t: Transcript) -> list[dict[str, Any]]:
    """A run's tool calls, in order, as a dataset writes them (``{"tool": ..., "arguments": ...}``)."""
    from ..scanners._views import view

    return [{"tool": c.tool, "arguments": c.arguments} for c in view(t).scan_calls]


_SAME: Any = object()


class Dataset:
    """The cases of an evaluation (see the module docs for what a row holds and what is refused).

    Args:
        source: a DataFrame, a list of dicts, a ``.jsonl``/``.csv``/``.parquet`` path, or another Dataset;
            none: an empty dataset to :meth:`add` runs to.

    Raises:
        AgentnbError: naming every bad row (a blank prompt; an empty, blank or duplicate id; calls that are
            not a list of tool calls), before anything runs.

    Example:
        >>> ds = Dataset([{"id": "q1", "prompt": "2 + 3?", "expected": "5"}, {"id": "q2", "prompt": "4 - 1?"}])
        >>> [c.id for c in ds], ds["q2"].expected
        (['q1', 'q2'], None)
        >>> Dataset([{"id": "q1", "prompt": "a"}, {"id": "q1", "prompt": "b"}])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        agentnb.exceptions.AgentnbError: the dataset has bad rows, so nothing ran: row 1: its id 'q1' is the id...
    """

    def __init__(self, source: Any = ()) -> None:
        self._cases: list[Case]
        if isinstance(source, Dataset):
            self._cases = list(source._cases)
        else:
            self._cases = check(_records(source))

    @classmethod
    def from_labels(cls, book: Any, store: Any, *, tag: str | None = None, calls: bool = True) -> Dataset:
        """The runs a person labelled, as cases whose expected output (and calls) are what those runs did.

        Args:
            book: a :class:`~agentnb.Labels` (or what makes one: a path, an SqliteStore).
            store: the store that holds the runs (a store, or the path of an SQLite store).
            tag: only runs with a label of this tag (None: every labelled run).
            calls: also expect the run's tool calls.

        The case id is the run id; its ``label_tags`` and ``label_notes`` columns are the run's labels.
        """
        from .._labels import Labels
        from ..store import as_store

        labels = (book if isinstance(book, Labels) else Labels(book)).all()
        store_ = as_store(store)
        chosen: dict[str, list[Any]] = {}
        for lb in labels:
            chosen.setdefault(lb.run_id, []).append(lb)
        if tag is not None:
            chosen = {r: lbs for r, lbs in chosen.items() if any(lb.tag == tag for lb in lbs)}
        ds = cls()
        for run_id, lbs in chosen.items():
            t = Transcript(store_.load(run_id))
            ds.add(t, id=run_id, calls=_SAME if calls else None,
                   label_tags=[lb.tag for lb in lbs if lb.tag], label_notes=[lb.note for lb in lbs if lb.note])
        return ds

    def add(self, run: Any, *, id: str | None = None, expected: Any = _SAME, calls: Any = _SAME,
            rubric: str | None = None, **extra: Any) -> Case:
        """Add a run to the dataset: its prompt, and (unless given) its output and its calls as what is expected.

        Args:
            run: a :class:`~agentnb.Run` or :class:`~agentnb.Transcript`.
            id: the case's id (default: the run's id).
            expected: the expected output (default: the run's own; None: none).
            calls: the expected calls (default: the run's own; None: none).
            rubric: a rubric for model-graded scorers.
            **extra: other columns.

        Example:
            >>> import agentnb as anb
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> ds = Dataset()
            >>> case = ds.add(loop.start("Paris?", run_id="good-1").run())
            >>> case.id, case.prompt, case.calls[0]["tool"]
            ('good-1', 'Paris?', 'get_weather')
        """
        t = run if isinstance(run, Transcript) else getattr(run, "transcript", None)
        if not isinstance(t, Transcript) or not t.run_id:
            raise AgentnbError(f"add a Run or a Transcript of a run to a dataset, got {type(run).__name__}")
        row: dict[str, Any] = {"id": id if id is not None else t.run_id, "prompt": prompt_of(t),
                               "expected": output_of(t) if expected is _SAME else expected,
                               "calls": calls_of(t) if calls is _SAME else calls, "rubric": rubric, **extra}
        case = check([row])[0]
        if any(c.id == case.id for c in self._cases):
            raise AgentnbError(f"the dataset has a case {case.id!r} already; give the run another id=")
        self._cases.append(case)
        return case

    def __len__(self) -> int:
        return len(self._cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self._cases)

    def __getitem__(self, case_id: str) -> Case:
        for c in self._cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)

    def __repr__(self) -> str:
        return f"<agentnb.evals.Dataset of {len(self._cases)} cases>"

    def to_frame(self) -> pd.DataFrame:
        """The cases as a DataFrame (``calls`` and a non-text ``expected`` as their JSON text)."""
        import pandas as pd

        rows = [{"id": c.id, "prompt": c.prompt,
                 "expected": c.expected if c.expected is None or isinstance(c.expected, str)
                 else json.dumps(c.expected), "calls": None if c.calls is None else json.dumps(c.calls),
                 "rubric": c.rubric, **c.extra} for c in self._cases]
        return pd.DataFrame(rows, columns=list(KNOWN) if not rows else None)

    def save(self, path: str | Path) -> Path:
        """Write the dataset as ``.jsonl`` (values as they are), ``.csv`` or ``.parquet`` (JSON text cells)."""
        p = Path(path).expanduser()
        suffix = p.suffix.lower()
        if suffix in (".jsonl", ".ndjson"):
            lines = [json.dumps({"id": c.id, "prompt": c.prompt, "expected": c.expected, "calls": c.calls,
                                 "rubric": c.rubric, **c.extra}, ensure_ascii=False, default=str) for c in self]
            p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        elif suffix == ".csv":
            self.to_frame().to_csv(p, index=False)
        elif suffix == ".parquet":
            self.to_frame().to_parquet(p, index=False)
        else:
            raise AgentnbError(f"{p}: a dataset file is .jsonl, .csv or .parquet")
        return p


def as_dataset(source: Any) -> Dataset:
    """A :class:`Dataset` from what :func:`~agentnb.evaluate` accepts."""
    return source if isinstance(source, Dataset) else Dataset(source)
