"""What a model is asked and what it answers with: :class:`ModelRequest` in, stream items out.

Theory of operation. The engine builds one :class:`ModelRequest` per turn
(:func:`agentnb._engine.inputs.request_for`) and the driver hands it to :meth:`agentnb.providers._base.Model.respond`.
A request has three kinds of content, kept apart because they are read by different people:

- **what is asked**: the conversation (a read-only :class:`HistoryView`), the tools offered this turn and the
  tools the run defines (a provider that needs definitions for a history holding tool calls renders these on a
  tools-free turn, so no model has to remember a run's earlier requests);
- **how the answer is shaped**: :class:`RequestOptions`, a frozen record of the options the engine decides --
  the tool choice, whether parallel calls are allowed, a structured-output schema, and whether this is the
  finalization turn. Every wire adapter reads these fields and renders them in its own dialect;
- **what passes through**: ``settings``, the sampling parameters (``temperature``, ``max_tokens``, ``stop``,
  provider-specific keys) an adapter maps or copies into the body without agentnb giving them a meaning.

The options are typed and closed: a tool choice is ``"auto"``, ``"none"``, ``"required"`` or a
:class:`NamedTool`; anything else is refused when the options are made (:class:`RequestOptions` checks its
fields), naming the value and what it could be. :func:`split_options` turns a settings dict that still
carries the options under their setting names (``Loop(settings=...)``, a model's own settings, the settings an
event recorded) into the typed record and the pass-through rest, and :meth:`RequestOptions.to_settings` gives
them back in that recorded form.

The answer is an iterator of :data:`StreamItem`: :class:`TextDelta` and :class:`ArgumentsDelta` as fragments
arrive, then the final :class:`~agentnb._messages.ModelTurn` (a non-streaming model yields only the turn).

This is a core module: it imports only the other core types (messages, events) and the standard library.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ._messages import Message, ModelTurn
from .events import ToolInfo

ToolMode = Literal["auto", "none", "required"]
"""A tool choice that names no tool: the model decides (``auto``), may not call (``none``), must call one
(``required``)."""

TOOL_MODES: tuple[ToolMode, ...] = get_args(ToolMode)

OPTION_SETTINGS = ("tool_choice", "parallel_tool_calls", "output_schema")
"""The setting names the options are recorded under (in ``Loop(settings=...)``, a model's settings, events)."""


@dataclass(frozen=True, slots=True)
class NamedTool:
    """A tool choice that forces one tool by name.

    Example:
        >>> NamedTool("lookup_order").to_json()
        {'name': 'lookup_order'}
    """

    name: str
    """The tool the model must call."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a named tool choice needs a tool name, got {self.name!r}")

    def to_json(self) -> dict[str, str]:
        """The choice as recorded in events and settings: ``{"name": ...}``."""
        return {"name": self.name}


ToolChoice = ToolMode | NamedTool
"""What the model may do with the tools on a turn: a :data:`ToolMode` or a :class:`NamedTool`."""


def tool_choice_of(value: Any) -> ToolChoice:
    """A tool choice from its recorded form: ``"auto"``, ``"none"``, ``"required"``, ``{"name": tool}``.

    ``"any"`` (Anthropic's word for ``required``) is read as ``"required"``. A :class:`NamedTool` is returned
    as is.

    Raises:
        ValueError: for any other value (a provider's own dict belongs in ``settings["extra"]``).

    Example:
        >>> tool_choice_of("required"), tool_choice_of({"name": "refund"})
        ('required', NamedTool(name='refund'))
    """
    if isinstance(value, NamedTool):
        return value
    if isinstance(value, str):
        if value == "any":
            return "required"
        for mode in TOOL_MODES:
            if value == mode:
                return mode
    elif isinstance(value, Mapping) and set(value) == {"name"} and isinstance(value["name"], str):
        return NamedTool(value["name"])
    raise ValueError(f"tool_choice={value!r} is not a tool choice: use 'auto', 'none', 'required' or "
                     "{'name': <tool>} (a provider's own tool_choice object goes in settings['extra'])")


def tool_choice_json(choice: ToolChoice | None) -> str | dict[str, str] | None:
    """A tool choice in its recorded form (the inverse of :func:`tool_choice_of`)."""
    return choice.to_json() if isinstance(choice, NamedTool) else choice


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """A structured-output request: the answer's text must be JSON that fits ``schema``.

    Example:
        >>> OutputSchema("Weather", {"type": "object"}, strict=True).to_json()
        {'name': 'Weather', 'schema': {'type': 'object'}, 'strict': True}
    """

    name: str
    """The schema's name (OpenAI's ``json_schema.name``; other APIs send the schema alone)."""
    schema: Mapping[str, Any]
    """The JSON schema of the answer (read-only: adapters copy it into the body)."""
    strict: bool = False
    """Ask for strict mode (constrained decoding) where the API has it; the schema then follows its rules."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"an output schema needs a name, got {self.name!r}")
        if not isinstance(self.schema, Mapping):
            raise ValueError("an output schema's schema must be a JSON-schema object, got "
                             f"{type(self.schema).__name__}")
        if not isinstance(self.strict, bool):
            raise ValueError(f"an output schema's strict must be True or False, got {self.strict!r}")

    @classmethod
    def of(cls, value: Any) -> OutputSchema:
        """An output schema from its recorded form ``{"name", "schema", "strict"}`` (or an ``OutputSchema``).

        Raises:
            ValueError: for anything else.
        """
        if isinstance(value, OutputSchema):
            return value
        if isinstance(value, Mapping) and {"name", "schema"} <= set(value) <= {"name", "schema", "strict"}:
            return cls(value["name"], value["schema"], bool(value.get("strict", False)))
        raise ValueError(f"output_schema={value!r} is not an output schema: give "
                         "{'name': ..., 'schema': {...}, 'strict': bool}")

    def to_json(self) -> dict[str, Any]:
        """The schema in its recorded form (the ``output_schema`` setting)."""
        return {"name": self.name, "schema": dict(self.schema), "strict": self.strict}


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """How the answer to one request is shaped: the options the engine decides and every adapter renders.

    ``None`` means "not asked": the adapter sends nothing and the provider's default applies. The fields are
    checked when the record is made, so a value no wire API could render never reaches one.

    Example:
        >>> RequestOptions(tool_choice=NamedTool("refund"), parallel_tool_calls=False).to_settings()
        {'tool_choice': {'name': 'refund'}, 'parallel_tool_calls': False}
        >>> RequestOptions(tool_choice="sometimes")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: tool_choice='sometimes' is not a tool choice: use 'auto', 'none', 'required' or ...
    """

    tool_choice: ToolChoice | None = None
    """What the model may do with the tools offered (None: the provider's default, which is ``auto``)."""
    parallel_tool_calls: bool | None = None
    """False: at most one call per turn; True: several allowed; None: the provider's default."""
    output: OutputSchema | None = None
    """Structured output: the answer is JSON fitting this schema (``Loop(output_type=..., output_mode="native")``)."""
    finalize: bool = False
    """The loop's last, tools-free turn: the model answers with what it has."""

    def __post_init__(self) -> None:
        choice = self.tool_choice
        if choice is not None and not isinstance(choice, NamedTool) and not (
                isinstance(choice, str) and choice in TOOL_MODES):
            tool_choice_of(choice)  # raises, naming the value; a recorded form must be read with tool_choice_of
            raise ValueError(f"tool_choice={choice!r}: give a NamedTool, not its recorded form "
                             "(read one with agentnb.providers.tool_choice_of)")
        if self.parallel_tool_calls is not None and not isinstance(self.parallel_tool_calls, bool):
            raise ValueError(f"parallel_tool_calls={self.parallel_tool_calls!r}: use True, False or None")
        if self.output is not None and not isinstance(self.output, OutputSchema):
            raise ValueError(f"output={self.output!r}: use an OutputSchema (or OutputSchema.of(a dict))")
        if not isinstance(self.finalize, bool):
            raise ValueError(f"finalize={self.finalize!r}: use True or False")

    def over(self, defaults: RequestOptions) -> RequestOptions:
        """These options, with the ones left unset taken from ``defaults`` (a model's own options).

        Example:
            >>> RequestOptions(tool_choice="none").over(RequestOptions("required", parallel_tool_calls=False))
            RequestOptions(tool_choice='none', parallel_tool_calls=False, output=None, finalize=False)
        """
        if defaults == NO_OPTIONS:
            return self
        return RequestOptions(
            tool_choice=self.tool_choice if self.tool_choice is not None else defaults.tool_choice,
            parallel_tool_calls=(self.parallel_tool_calls if self.parallel_tool_calls is not None
                                 else defaults.parallel_tool_calls),
            output=self.output if self.output is not None else defaults.output,
            finalize=self.finalize,  # a property of the turn, never a model's default
        )

    def to_settings(self) -> dict[str, Any]:
        """The options that are set, under their setting names and in their recorded (JSON) form."""
        out: dict[str, Any] = {}
        if self.tool_choice is not None:
            out["tool_choice"] = tool_choice_json(self.tool_choice)
        if self.parallel_tool_calls is not None:
            out["parallel_tool_calls"] = self.parallel_tool_calls
        if self.output is not None:
            out["output_schema"] = self.output.to_json()
        return out


NO_OPTIONS = RequestOptions()
"""No option asked: every provider default applies."""


def split_options(settings: Mapping[str, Any]) -> tuple[RequestOptions, dict[str, Any]]:
    """The options a settings dict carries under their setting names, and the pass-through rest.

    This is where the recorded, untyped form (``{"tool_choice": "none", "temperature": 0}``) becomes typed;
    a value that is not a known option value is refused here, naming it.

    Raises:
        ValueError: a ``tool_choice``, ``parallel_tool_calls`` or ``output_schema`` that is not one.

    Example:
        >>> split_options({"tool_choice": {"name": "refund"}, "temperature": 0})
        (RequestOptions(tool_choice=NamedTool(name='refund'), parallel_tool_calls=None, output=None, finalize=False), {'temperature': 0})
    """  # noqa: E501 - a doctest's output is one line
    if not any(k in settings for k in OPTION_SETTINGS):
        return NO_OPTIONS, dict(settings)
    rest = {k: v for k, v in settings.items() if k not in OPTION_SETTINGS}
    choice = settings.get("tool_choice")
    output = settings.get("output_schema")
    options = RequestOptions(
        tool_choice=None if choice is None else tool_choice_of(choice),
        parallel_tool_calls=settings.get("parallel_tool_calls"),
        output=None if output is None else OutputSchema.of(output),
    )
    return options, rest


@dataclass(slots=True)
class ModelRequest:
    """Everything a model needs for one turn (see the module docs for what each part is for).

    Example:
        >>> req = ModelRequest(messages=[Message.user("Hi")], tools=[], options=RequestOptions(tool_choice="none"))
        >>> req.options.tool_choice, req.settings
        ('none', {})
    """

    messages: Sequence[Message]
    """The conversation; a read-only view, valid after the call too (agentnb only appends)."""
    tools: Sequence[ToolInfo]
    """The tools offered this turn (empty when finalizing, or only the output tool)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Pass-through request parameters: ``temperature``, ``max_tokens``, ``stop``, provider keys, ``extra``."""
    options: RequestOptions = NO_OPTIONS
    """How the answer is shaped: tool choice, parallel calls, output schema, finalization."""
    run_tools: Sequence[ToolInfo] = ()
    """Every tool the run defines, offered this turn or not: what a provider that needs tool definitions for a
    history with tool calls renders on a tools-free turn (empty: the request's maker did not say)."""
    run_id: str = ""
    turn: int = 0
    renders: dict[str, Any] | None = None
    """Where a wire adapter keeps what it rendered of this run's earlier requests, so that a message is rendered
    once (:mod:`agentnb.providers._render`): the run's model port gives each of its requests the same dict, and
    drops it with the run. None: every message is rendered afresh."""


# Stream items are made once per fragment (a 1 MB argument in 8-byte fragments is 131,072 of them) and never
# changed after; a non-frozen slotted dataclass is built in about a quarter of the time of a frozen one
# (bench/stream_assembly.py), so they skip the cost of frozen __init__ like the per-turn records do.


@dataclass(slots=True)
class TextDelta:
    """A fragment of answer text."""

    fragment: str


@dataclass(slots=True)
class ArgumentsDelta:
    """A fragment of one call's argument text; ``index`` tells parallel calls apart."""

    index: int
    fragment: str
    call_id: str | None = None
    name: str | None = None


StreamItem = TextDelta | ArgumentsDelta | ModelTurn
"""What a model's answer yields: fragments as they arrive, then the whole turn."""


class HistoryView(Sequence[Message]):
    """A fixed-length, read-only view of an append-only message list (O(1) to make, no copy).

    Example:
        >>> msgs = [Message.user("a")]
        >>> view = HistoryView(msgs)
        >>> msgs.append(Message.user("b"))
        >>> len(view), view
        (1, HistoryView(1 message))
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Message], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._items[: self._n][i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("history index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._n):
            yield items[i]

    @property
    def items(self) -> list[Message]:
        """The append-only list this view reads (its first ``len(view)`` messages are the view's): never change it."""
        return self._items

    def __repr__(self) -> str:
        return f"HistoryView({self._n} message{'' if self._n == 1 else 's'})"


__all__ = ["NO_OPTIONS", "OPTION_SETTINGS", "TOOL_MODES", "ArgumentsDelta", "HistoryView", "ModelRequest",
           "NamedTool", "OutputSchema", "RequestOptions", "StreamItem", "TextDelta", "ToolChoice", "ToolMode",
           "split_options", "tool_choice_json", "tool_choice_of"]
