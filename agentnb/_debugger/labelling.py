"""The debugger's Label and Add-to-dataset buttons: a person marks the run or an event, or keeps the run as a case.

Theory of operation. :class:`Labelling` is the :class:`~.controller.Controller` plus three things given to the
debugger (``Debugger(run, labels=..., by=..., dataset=...)``): a label book, who labels, and a dataset. Its
public methods are what the page's buttons call, so a test drives what a click does:

- :meth:`Labelling.label` writes a label through the label API (:meth:`agentnb.Labels.add`), checked against
  the run as it is shown: the run (the header's button), an event (a card's button), the event's call or its
  turn. The label goes *beside* the log, in the book; no event is written and no seal changes, so it works on
  a finished run, a replayed transcript and a run waiting for approval alike.
- :meth:`Labelling.add_to_dataset` adds the shown run to the dataset (:meth:`agentnb.evals.Dataset.add`): its
  prompt, the expected output the person confirmed (the run's own by default, none when cleared) and its calls.

The book is the one given (a :class:`~agentnb.Labels`, or what makes one: a ``.jsonl`` path, a store, an SQLite
file, a Parquet dataset, an HTML export); without one, the run's own store when it keeps labels (SQLite,
PostgreSQL), else the book beside the transcript file the debugger was opened on (``run.labels.jsonl``, or
inside the HTML export itself). A run in memory has no such place: the page says so, and how to give one.

What the page shows comes from :meth:`Labelling.labels_view` (a synced trait of the view): the run's labels,
read again from the book when the person selects an event, after each label, and on :meth:`reload_labels`;
the front end draws the run's labels in the header and an event's (and its call's) on its card, and a
refusal as a message beside the form that sent it, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._engine import RunState
from .._transcript import Transcript
from .._visible import visible
from ..exceptions import AgentnbError
from ..store import PostgresStore, SqliteStore
from .controller import Controller
from .intervene import default_by

if TYPE_CHECKING:
    from .._labels import Label, Labels
    from .._run import Run
    from ..evals._dataset import Case, Dataset

NO_BOOK = ("there is nowhere to keep labels for this run (it is in memory): open the debugger with a label "
           "book, Debugger(run, labels=\"labels.jsonl\") (or a SqliteStore, a PostgresStore)")
NO_DATASET = "no dataset to add to: open the debugger with one, Debugger(run, dataset=anb.evals.Dataset())"


def _number(text: Any) -> float | None:
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if isinstance(text, bool):
        raise AgentnbError(f"a score is a number, got {text!r}")
    if isinstance(text, int | float):
        return float(text)
    try:
        return float(str(text).strip())
    except ValueError:
        raise AgentnbError(f"a score is a number, got {str(text)[:40]!r}") from None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if text.strip() else None


class Labelling(Controller):
    """The controller with a label book, a labeller and a dataset: the Label and Add-to-dataset buttons.

    Args:
        source: as for :class:`~.controller.Controller`.
        labels: where labels go (see the module docs; default: the run's store, else beside its file).
        by: who labels (default: the operating system's user name).
        dataset: a :class:`~agentnb.evals.Dataset`, or the path of a ``.jsonl``/``.csv``/``.parquet`` dataset
            file (read, added to and written again on each add), for the header's "Add to dataset".
        **options: the controller's (``start``, ``updates_per_second``).

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> book = anb.Labels(os.path.join(tempfile.mkdtemp(), "labels.jsonl"))
        >>> dbg = Labelling(run.start("Paris?", run_id="r1"), labels=book, by="ana").cont()
        >>> dbg.label(tag="good run").by, dbg.label(2, tag="right tool", score=1).seq
        ('ana', 2)
        >>> [lb.tag for lb in dbg.run_labels()]
        ['good run', 'right tool']
    """

    def __init__(self, source: Run | Transcript | str | Path, *, labels: Labels | str | Path | SqliteStore |
                 PostgresStore | None = None, by: str | None = None, dataset: Dataset | str | Path | None = None,
                 **options: Any) -> None:
        from .._labels import Labels
        from ..evals._dataset import Dataset

        if labels is not None and not isinstance(labels, Labels):
            labels = Labels(labels)
        if dataset is not None and not isinstance(dataset, Dataset | str | Path):
            raise TypeError(f"dataset= is an agentnb.evals.Dataset or a dataset file's path, got "
                            f"{type(dataset).__name__}")
        self.labels_by = by or default_by()
        """Who the labels given from this debugger are by."""
        self.dataset = dataset
        """The dataset "Add to dataset" adds to (a Dataset, or a file's path), or None."""
        self._book = labels
        self._source_path = Path(source) if isinstance(source, str | Path) else None
        self._labels_cache: tuple[str, list[Label]] | None = None
        self._replay_state: tuple[int, RunState] | None = None
        self._labels_at = -1  # the selection the labels were read at: a person's click reads the book again
        self._label_note: dict[str, Any] = {"error": "", "done": "", "form": "", "stamp": 0}
        super().__init__(source, by=self.labels_by, **options)

    def _child_options(self) -> dict[str, Any]:
        """A fork's debugger labels into the same book, as the same person, and adds to the same dataset."""
        return {**super()._child_options(), "labels": self._book, "dataset": self.dataset}

    # -- the book ---------------------------------------------------------------------------------------

    @property
    def label_book(self) -> Labels | None:
        """Where this debugger's labels go for the shown run (see the module docs), or None."""
        from .._labels import Labels

        if self._book is not None:
            return self._book
        run = self.run
        if run is not None and isinstance(run.store, SqliteStore | PostgresStore):
            return Labels(run.store)
        path = self._source_path
        if run is None and path is not None:
            return Labels(path) if path.suffix.lower() in (".html", ".htm") else Labels.beside(path)
        return None

    def _labelled_run(self) -> Transcript:
        # a live run as it is now; a replayed transcript whole (a label is about the run, wherever the replay is)
        run = self.run
        return run.transcript if run is not None else Transcript(list(self._replay))

    def _final_state(self) -> RunState:
        """The labelled run's folded state: the live timeline's, or the whole replay's (folded once)."""
        if self.run is not None:
            return self.timeline.state
        if self._replay_state is None or self._replay_state[0] != len(self._replay):
            self._replay_state = (len(self._replay), Transcript(list(self._replay)).fold())
        return self._replay_state[1]

    def _labelled_id(self) -> str:
        run = self.run
        return run.run_id if run is not None else (self.timeline.state.run_id or "")

    def run_labels(self) -> list[Label]:
        """The labels of the shown run, in the order given (read from the book: another hand's are there too)."""
        book = self.label_book
        if book is None:
            return []
        return book.all(self._labelled_id())

    def reload_labels(self) -> None:
        """Read the book again (labels given from code or another process) and show them."""
        self._labels_cache = None
        self.refresh()

    def _cached_labels(self) -> list[Label]:
        key = self._labelled_id()
        if self.selected != self._labels_at and not self.running:
            self._labels_at = self.selected
            self._labels_cache = None
        if self._labels_cache is None or self._labels_cache[0] != key:
            try:
                self._labels_cache = (key, self.run_labels())
            except AgentnbError as exc:  # a damaged or unreadable book: said on the page, the debugger goes on
                self._labels_cache = (key, [])
                self._label_note = {**self._label_note, "error": str(exc), "form": "run"}
        return self._labels_cache[1]

    # -- the buttons (public: the page calls these) ---------------------------------------------------------

    def label(self, seq: int | None = None, *, call_id: str | None = None, turn: int | None = None,
              tag: str | None = None, note: str | None = None, score: float | None = None) -> Label:
        """Label the shown run (no ``seq``, ``call_id`` or ``turn``), one of its events, calls or turns.

        Written to :attr:`label_book` by :attr:`labels_by` at once (see :meth:`agentnb.Labels.add`); the log is
        not touched.

        Raises:
            AgentnbError: no book for this run; from the book, a :class:`~agentnb.exceptions.LabelError`: no such
                event, call or turn, nothing said, a bad tag or score.
        """
        book = self.label_book
        if book is None:
            raise AgentnbError(NO_BOOK)
        with self._lock:
            shown = self._labelled_run()
        made = book.add(shown, seq=seq, call_id=call_id, turn=turn, tag=tag, note=note, score=score,
                        by=self.labels_by or None)
        self._labels_cache = None
        self.refresh()
        return made

    def add_to_dataset(self, *, id: str | None = None, expected: Any = ..., calls: bool = True) -> Case:
        """Add the shown run to :attr:`dataset` as a case (see :meth:`agentnb.evals.Dataset.add`).

        The case is the run's prompt, the expected output (default: the run's own; None: none) and, with
        ``calls``, the run's calls as the expected calls.

        Raises:
            AgentnbError: no dataset; the dataset has a case of that id; the run has no prompt.
        """
        from ..evals._dataset import Dataset

        if self.dataset is None:
            raise AgentnbError(NO_DATASET)
        with self._lock:
            shown = self._labelled_run()
        what: dict[str, Any] = {} if expected is ... else {"expected": expected}
        if not calls:
            what["calls"] = None
        if isinstance(self.dataset, Dataset):
            return self.dataset.add(shown, id=id, **what)
        path = Path(self.dataset).expanduser()
        ds = Dataset(path) if path.exists() else Dataset()
        case = ds.add(shown, id=id, **what)
        ds.save(path)
        return case

    def _labels_into(self, page: Path) -> Path:
        """Copy the shown run's labels into an HTML export just written (``export_html``), and return its path."""
        from .._labels import Labels

        labels = self.run_labels()
        if labels:
            Labels(page).extend(labels)
        return page

    # -- the page ---------------------------------------------------------------------------------------

    def _label_said(self, form: str, *, error: str = "", done: str = "") -> None:
        self._label_note = {"error": error, "done": done, "form": form, "stamp": self._label_note["stamp"] + 1}

    def _label_from_page(self, args: dict[str, Any]) -> None:
        form = "run" if args.get("form") == "run" else "event"
        try:
            about = str(args.get("about") or "run")
            seq = args.get("seq")
            where: dict[str, Any] = {}
            if about == "event":
                where["seq"] = seq
            elif about == "call":
                where["call_id"] = str(args.get("call_id") or "")
            elif about == "turn":
                where["turn"] = args.get("turn")
            if about != "run" and None in where.values():  # never a label on the whole run by accident
                raise AgentnbError(f"no {about} to label: select an event first")
            made = self.label(**where, tag=_text(args.get("tag")), note=_text(args.get("note")),
                              score=_number(args.get("score")))
        except (AgentnbError, OSError) as exc:  # a refusal, or a book that cannot be written: said on the page
            self._label_said(form, error=str(exc))
        else:
            on = {"event": f"event {made.seq}", "call": f"call {made.call_id}",
                  "turn": f"turn {made.turn}"}.get(about, "the run")
            self._label_said(form, done=f"labelled {on} ({visible(made.tag or made.note or str(made.score))[0][:60]})")
        self.refresh()

    def _dataset_from_page(self, args: dict[str, Any]) -> None:
        from ..evals._dataset import output_of

        try:
            if self.dataset is None:
                raise AgentnbError(NO_DATASET)
            expected: Any = None
            text = args.get("expected")
            if isinstance(text, str) and text.strip():
                expected = text
                own = output_of(self._final_state())
                if own is not None and not isinstance(own, str):  # a typed output: the person edited its JSON
                    try:
                        expected = json.loads(text)
                    except ValueError as exc:
                        raise AgentnbError(f"the expected output of a typed run is JSON: {exc}") from None
            case = self.add_to_dataset(id=_text(args.get("id")), expected=expected, calls=bool(args.get("calls", True)))
        except (AgentnbError, OSError) as exc:
            self._label_said("dataset", error=str(exc))
        else:
            if isinstance(self.dataset, str | Path):
                into = str(self.dataset)
            else:
                into = f"the dataset ({len(self.dataset)} {'case' if len(self.dataset) == 1 else 'cases'})"
            self._label_said("dataset", done=f"added case {visible(case.id)[0]!r} to {into}")
        self.refresh()

    def labels_view(self) -> dict[str, Any]:
        """What the page shows and offers about labels for the selected moment (the view's ``labels`` trait)."""
        book = self.label_book
        run_id = self._labelled_id()
        items = [_shown_label(lb) for lb in (self._cached_labels() if run_id else [])]
        sel = self.selected
        targets: list[dict[str, Any]] = []
        if len(self.timeline):
            ev = self.timeline.events[max(0, min(sel, len(self.timeline) - 1))]
            targets.append({"about": "event", "seq": ev.seq, "text": f"this event ({ev.seq} · {ev.type})"})
            call_id = getattr(ev, "call_id", None)
            if isinstance(call_id, str) and call_id:
                targets.append({"about": "call", "call_id": call_id, "text": f"its call {visible(call_id)[0]}"})
            if ev.turn > 0:
                targets.append({"about": "turn", "turn": ev.turn, "text": f"its turn {ev.turn}"})
        return {
            "can": book is not None and bool(run_id), "why": "" if book is not None else NO_BOOK,
            "book": repr(book) if book is not None else "", "by": visible(self.labels_by)[0],
            "run_id": visible(run_id)[0], "items": items, "targets": targets, **self._label_note,
            "dataset": self._dataset_offer(),
        }

    def _dataset_offer(self) -> dict[str, Any] | None:
        if self.dataset is None or not len(self.timeline):
            return None
        from ..evals._dataset import output_of

        own = output_of(self._final_state())  # the fold's state, as the timeline holds it: nothing folds again
        shown = own if own is None or isinstance(own, str) else json.dumps(own, indent=2, ensure_ascii=False)
        where = str(self.dataset) if isinstance(self.dataset, str | Path) else f"{len(self.dataset)} cases"
        return {"where": where, "id": self._labelled_id(), "expected": shown or ""}


def _shown_label(lb: Label) -> dict[str, Any]:
    """A label as the page draws it (text with its invisible characters written out)."""
    def show(v: str | None) -> str | None:
        return None if v is None else visible(v)[0]

    return {"label_id": lb.label_id, "seq": lb.seq, "turn": lb.turn, "call_id": show(lb.call_id), "tag": show(lb.tag),
            "note": show(lb.note), "score": lb.score, "by": show(lb.by), "at": lb.at.isoformat(timespec="seconds")}
