"""Transcripts from a trace as it is read: one agent invocation at a time, in memory that does not grow with it.

Theory of operation. :func:`iter_trace` reads its source a chunk at a time (a line of JSON Lines, the format of
the Collector's file exporter: see :func:`agentnb.otel._spans.chunks`) and links each span to the spans held by
its parent id. Spans whose parent chain leads to the same ``invoke_agent`` span are that invocation's group (the
nearest agent above a span owns it, as in :func:`~agentnb.import_trace`); spans whose chain stops at a parent
not read yet form a group that waits for it, and joins the group of that parent when it comes. After each
chunk, the groups that are done are rebuilt (:func:`agentnb.otel._importer.rebuild`), yielded and let go.

Nothing short of the end of the source proves a group done (the next line may hold one more span below any
agent), so the rule is one of distance, counted in spans read (a repeated span id is not counted):

- **an invocation** is done once its agent span has been read and ``window`` more spans have been read with
  none joining its group;
- **a group with no agent that holds no chat or tool span** (an HTTP span above the agents, a database span
  waiting for its parent) is let go once ``window`` spans have been read with none joining it;
- **chat and tool spans with no agent above them** are held by trace: once ``window`` spans have been read with
  none of a trace, its chat and tool spans with no agent above them become its one transcript (as
  ``import_trace`` makes it) -- unless one of them still waits for a parent not read yet (it may yet turn out to
  be below an agent: an agent span comes after the spans below it, however long its run), and then they wait
  with it, for the parent or the end;
- **at the end** of the source, everything left is rebuilt as ``import_trace`` rebuilds a trace, and yielded in
  the order it started.

Why a small window is enough for real exports: an SDK exports a span when it ends, and an agent span ends
after every span below it, so a process writes its own spans of an invocation before the agent span (or in the
same batch). Only a span exported by another process (the spans of a remote tool) can come after it, and
``window`` is how far after. On a source where no span comes more than ``window`` spans after the last span
of its group, the transcripts are those of ``import_trace``, yielded in the order their invocations are done
instead of the order they started (``tests/test_otel_stream.py`` compares the two on every trace the tests use).

Past the window, what ``import_trace`` would do differently: a span that comes after its group was let go is
read as one whose parent is not in the trace (it goes into its trace's transcript of spans with no agent above
them); a span id repeating that of a span let go is not known as a repeat; and a note about the document (a
line that is not JSON, say) read after a transcript was yielded is not in that transcript's ``lacks``.

Memory: the spans held are those of the groups not done yet, which is those read within the last ``window``
spans, those of the invocations still going on (a single long run is held whole until its agent span comes),
and chat and tool spans waiting for a parent that never comes (held to the end, with their trace's spans that
have no agent above them), plus two chunks (the next line is read before the groups are judged, so that its
notes are known). A source that is not JSON Lines (one document, SDK spans) is one chunk: it is read whole and
rebuilt at its end, exactly as ``import_trace`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from .._gc import gc_paused
from .._transcript import Transcript
from ..exceptions import TranscriptError
from ._importer import is_member, rebuild, transcripts_of
from ._otlp import Notes
from ._spans import Reading, SpanRecord, chunks

WINDOW = 10_000
"""How many spans :func:`iter_trace` reads past the last span of a group before it takes the group as done."""


def iter_trace(source: Any, *, window: int | None = WINDOW) -> Iterator[Transcript]:
    """Transcripts from GenAI-convention spans as the source is read, each once its agent invocation is done.

    The streaming form of :func:`~agentnb.import_trace`, for files too large to hold: the same transcripts, but
    yielded as they are done, and the memory held is that of the invocations going on, not that of the file.
    An invocation is done once its ``invoke_agent`` span has been read and ``window`` more spans have been read
    with none below it (see :mod:`agentnb.otel._stream` for the rule, and what it means for a span that comes
    later than that); what is left at the end of the source is yielded in the order it started.

    Args:
        source: what :func:`~agentnb.import_trace` takes. A file of JSON Lines (one OTLP/JSON document a line,
            as the Collector's file exporter writes) is read a line at a time; anything else is read whole.
        window: how many spans may come between the spans of one invocation (0: an invocation is done when
            its agent span is read, right for a file one process wrote; None: nothing is done before the end,
            so the transcripts are exactly those of ``import_trace``).

    Raises:
        TranscriptError: as ``import_trace`` does, on the call (a file that does not exist, text that is not
            JSON, ...), or as the file is read (a line that is not UTF-8; no span at all could be read).
        ValueError: ``window`` is negative.

    Example:
        >>> import agentnb as anb, json, os, tempfile
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> spans, provider = InMemorySpanExporter(), TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(spans))
        >>> for question in ("Paris?", "Rome?"):
        ...     run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        ...     _ = anb.otel.export(run.start(question).run(), provider, include_content=True)
        >>> path = os.path.join(tempfile.mkdtemp(), "traces.jsonl")
        >>> with open(path, "w") as f:  # one document a line, as the Collector's file exporter writes
        ...     for span in spans.get_finished_spans():
        ...         print(json.dumps(anb.otel.to_otlp_json([span])), file=f)
        >>> [t.state.value for t in anb.iter_trace(path, window=0)]
        ['COMPLETED', 'COMPLETED']
    """
    if window is not None and window < 0:
        raise ValueError(f"window must be 0 or more spans (or None), not {window}")
    stream = _Stream(window)
    return stream.run(chunks(source, stream.read))


class _Group:
    """Spans linked by their parent ids: below one agent span, or up to a span whose parent is not held."""

    __slots__ = ("agent", "spans", "members", "waits", "traces", "into")

    def __init__(self, agent: SpanRecord | None, waits: str | None) -> None:
        self.agent = agent
        """The agent span the group's spans descend from (None: none is held above them)."""
        self.spans: list[tuple[int, SpanRecord]] = []
        """The spans, each with its place among those read (they are rebuilt in that order)."""
        self.members = 0
        """How many of them are chat or tool spans."""
        self.waits = waits
        """The parent id its top span waits for (None: it has none, or the group has an agent)."""
        self.traces: set[str] = set()
        """The traces of its spans, for a group with no agent."""
        self.into: _Group | None = None
        """The group it was joined to, once its top span's parent came."""


def _root(group: _Group) -> _Group:
    """The group ``group`` is part of now (the groups it was joined into, followed; the path is shortened)."""
    root = group
    while root.into is not None:
        root = root.into
    while group.into is not None and group.into is not root:
        group.into, group = root, group.into
    return root


class _Stream:
    """The spans held, by group, and the order in which groups and traces last saw a span."""

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.read = Notes()
        """The notes of the reading (lines, spans and fields left out)."""
        self.repeats = Notes()
        """Span ids given twice (after the reading's notes, as ``import_trace`` lists them)."""
        self.cycles = Notes()
        """Parent ids that form a cycle, as the rebuilds found them."""
        self.n = 0
        """How many spans were read (repeats left out)."""
        self.live: dict[str, tuple[SpanRecord, _Group]] = {}
        self.waiting: dict[str, dict[_Group, None]] = {}
        """The groups whose top span's parent is each span id not held."""
        self.quiet: dict[_Group, int] = {}
        """Groups by when a span last joined them (``n`` then), the longest quiet first."""
        self.traces: dict[str, int] = {}
        """Traces by when a span of theirs was last read, the longest quiet first."""
        self.by_trace: dict[str, dict[_Group, None]] = {}
        """The groups with no agent that hold spans of each trace."""
        self._notes: tuple[tuple[int, int, int], Notes] | None = None

    def run(self, source: Iterator[list[SpanRecord]]) -> Iterator[Transcript]:
        chunk = next(source, None)
        while chunk is not None:
            with gc_paused():
                for span in chunk:
                    self._add(span)
            del chunk
            chunk = next(source, None)  # read before the groups are judged: after the last, the end rebuilds all
            if chunk is not None and self.window is not None:
                with gc_paused():
                    done = self._due()
                yield from done
                del done
        with gc_paused():
            if not self.n and len(self.read):
                raise TranscriptError(f"no span could be read: {self.read.summary()}")
            rest = [span for span, _ in self.live.values()]
            self.live, self.waiting, self.quiet, self.traces, self.by_trace = {}, {}, {}, {}, {}
            done = self._batch(rest)
        yield from done

    def notes(self) -> Notes:
        """The notes so far, in the order ``import_trace`` gives them (read, then repeats, then cycles)."""
        key = (len(self.read), len(self.repeats), len(self.cycles))
        if self._notes is None or self._notes[0] != key:
            notes = Notes()
            for part in (self.read, self.repeats, self.cycles):
                notes.extend(part)
            self._notes = (key, notes)
        return self._notes[1]

    # -- reading -----------------------------------------------------------------------------------------

    def _add(self, span: SpanRecord) -> None:
        if span.span_id in self.live:
            self.repeats.add(f"span id {span.span_id} appears twice: the second, {span.name!r}, is left out",
                             span.trace_id)
            return
        self.n += 1
        if span.operation == "invoke_agent":
            group = _Group(span, None)
        else:
            parent = self.live.get(span.parent_id or "")
            if parent is not None:
                group = _root(parent[1])
            else:
                group = _Group(None, span.parent_id or None)
                if span.parent_id:
                    self.waiting.setdefault(span.parent_id, {})[group] = None
        group.spans.append((self.n, span))
        group.members += is_member(span)
        self.live[span.span_id] = (span, group)
        for below in self.waiting.pop(span.span_id, {}):
            if below is group:  # the parent ids form a cycle: the rebuild notes it
                group.waits = None
            else:
                self._join(below, group)
        self._touch(group, span.trace_id)

    def _join(self, below: _Group, group: _Group) -> None:
        """Join ``below`` (a group with no agent, whose top span's parent came) to the group of that parent."""
        self.quiet.pop(below, None)
        for trace in below.traces:
            self.by_trace.get(trace, {}).pop(below, None)
            if group.agent is None:
                group.traces.add(trace)
                self.by_trace.setdefault(trace, {})[group] = None
        if len(below.spans) > len(group.spans):  # the longer list is extended
            below.spans, group.spans = group.spans, below.spans
        group.spans += below.spans
        group.members += below.members
        below.spans, below.into = [], group

    def _touch(self, group: _Group, trace: str) -> None:
        self.quiet.pop(group, None)
        self.quiet[group] = self.n
        self.traces.pop(trace, None)
        self.traces[trace] = self.n
        if group.agent is None and trace not in group.traces:
            group.traces.add(trace)
            self.by_trace.setdefault(trace, {})[group] = None

    # -- what is done --------------------------------------------------------------------------------------

    def _due(self) -> list[Transcript]:
        """The transcripts of the groups and traces quiet for ``window`` spans; they are let go."""
        assert self.window is not None
        out: list[Transcript] = []
        while self.quiet:
            group, last = next(iter(self.quiet.items()))
            if self.n - last < self.window:
                break
            del self.quiet[group]
            if group.agent is not None:
                self._release(group)
                members = [s for _, s in sorted(group.spans, key=itemgetter(0)) if is_member(s)]
                out.append(rebuild(group.agent, members, self.notes()))
            elif not group.members:
                self._release(group)  # no chat or tool span: nothing to rebuild
        while self.traces:
            trace, last = next(iter(self.traces.items()))
            if self.n - last < self.window:
                break
            del self.traces[trace]
            held = self.by_trace.get(trace, {})
            if any(g.members and g.waits is not None for g in held):
                continue  # a chat or tool span waits for its parent: the trace waits with it
            groups = list(self.by_trace.pop(trace, {}))
            if groups:
                spans = sorted((item for g in groups for item in g.spans), key=itemgetter(0))
                for g in groups:
                    self._release(g)
                out += self._batch([s for _, s in spans])
        return out

    def _release(self, group: _Group) -> None:
        for _, span in group.spans:
            del self.live[span.span_id]
        self.quiet.pop(group, None)
        for trace in group.traces:
            self.by_trace.get(trace, {}).pop(group, None)
        if group.waits is not None:
            waiting = self.waiting.get(group.waits, {})
            waiting.pop(group, None)
            if not waiting:
                self.waiting.pop(group.waits, None)

    def _batch(self, spans: list[SpanRecord]) -> list[Transcript]:
        """The transcripts of ``spans`` as ``import_trace`` makes them; the cycles it notes are kept for later."""
        notes = self.notes()
        kept, more = len(notes.items), notes.more
        out = transcripts_of(Reading(spans, notes))
        for trace, text in notes.items[kept:]:
            self.cycles.add(text, trace)
        self.cycles.more += notes.more - more
        self._notes = None
        return out
