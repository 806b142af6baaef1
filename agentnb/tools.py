"""Tools: typed Python functions the model may call, an explicit registry, and the dispatcher.

``@tool`` reads a function's signature and Google-style docstring and builds a pydantic model of its
parameters; the JSON schema offered to the model comes from that model, and the same model validates the
arguments the model sends. The model's text never selects an arbitrary callable: a call is looked up only in
the loop's :class:`ToolRegistry`, and every way a call can go wrong becomes a structured error result the
model can read and correct (see :meth:`ToolRegistry.check`):

- an unknown name -> an error listing the tools that exist;
- arguments that are not a JSON object -> an error quoting the parse error (never repaired);
- arguments that fail the schema -> an error naming each bad field;
- a tool that raises -> an error with the exception type and message;
- a tool past its timeout -> a ``timeout`` result.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import inspect
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, cast, get_args, get_origin, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from . import values
from ._aio import run_coroutine
from .events import ToolInfo
from .exceptions import InvalidArguments, ToolDefinitionError, ValueConversionError
from .messages import ResultStatus

Risk = Literal["read", "write", "dangerous"]
ApprovalPolicy = bool | Callable[[Any, Any], bool] | None

_PRIMITIVES = frozenset({str, int, float, bool})


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into the description and per-parameter texts.

    Google (``Args:``), Sphinx (``:param x:``), NumPy (``Parameters`` / ``----------``) and Epytext
    (``@param x:``) docstrings are read by the ``docstring-parser`` package, which picks the style that
    explains the most; sections other than the parameters (``Returns``, ``Raises``, ``Example``) are left out
    of the description. A parameter's text spread over several lines becomes one line.

    Example:
        >>> parse_docstring('''Add two numbers.
        ...
        ... Args:
        ...     a: the first.
        ...     b: the second.
        ... ''')
        ('Add two numbers.', {'a': 'the first.', 'b': 'the second.'})
        >>> parse_docstring('''Add two numbers.
        ...
        ... :param a: the first.
        ... :param b: the second.
        ... ''')
        ('Add two numbers.', {'a': 'the first.', 'b': 'the second.'})
    """
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:  # a docstring in no known style is all description
        return text.strip(), {}
    desc = parsed.short_description or ""
    if parsed.long_description:
        gap = "\n\n" if parsed.blank_after_short_description else "\n"
        desc = f"{desc}{gap}{parsed.long_description}" if desc else parsed.long_description
    params = {p.arg_name.lstrip("*"): " ".join(p.description.split()) for p in parsed.params if p.description}
    return desc.strip(), params


@dataclass(frozen=True)
class ToolContext:
    """What a tool may learn about the call it serves; declare a parameter of this type to receive it.

    A parameter annotated ``ToolContext`` is filled by agentnb and never shown to the model.
    """

    run_id: str
    call_id: str
    tool_name: str
    turn: int
    idempotency_key: str | None = None
    """Hand this to the downstream system so a retried write is recognised there too."""


@dataclass(frozen=True)
class Tool:
    """A function the model may call. Build one with :func:`tool`."""

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    parameters: dict[str, Any]
    risk: Risk = "read"
    approval: ApprovalPolicy = None
    timeout: float | None = None
    is_async: bool = False
    context_param: str | None = None
    client: bool = False
    """The client runs it: the run pauses until ``run.submit_result(call_id, value)``."""
    idempotent: bool = False
    """The downstream deduplicates by idempotency key, so re-running a call whose outcome is unknown is safe."""
    key_fn: Callable[[dict[str, Any], Any], str] | None = None
    """``(arguments, context) -> str``: the tool's own idempotency key."""
    schema_version: str = ""
    """Short hash of the JSON schema; part of every binding hash."""
    _field_names: tuple[str, ...] = field(default=())
    _renamed: tuple[tuple[str, str], ...] = field(default=())
    """``(field name, parameter name)`` for parameters whose names clash with pydantic (see :func:`tool`)."""

    @property
    def side_effects(self) -> bool:
        """True for ``write`` and ``dangerous`` tools: their effects go through the ledger."""
        return self.risk != "read"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (the decorator keeps functions usable)."""
        return self.fn(*args, **kwargs)

    def needs_approval(self, call: Any = None, context: Any = None) -> bool:
        """Whether a call of this tool waits for a person.

        ``approval=None`` means "by risk": ``write`` and ``dangerous`` tools ask, ``read`` tools do not.
        """
        if self.approval is None:
            return self.risk != "read"
        if isinstance(self.approval, bool):
            return self.approval
        return bool(self.approval(call, context))

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Validate arguments against the schema.

        The value boundary looks first (:func:`agentnb.values.check_arguments`): a lone surrogate, nesting
        deeper than :data:`agentnb.values.MAX_DEPTH` or arguments that contain themselves are refused before
        the schema sees them, and so are NaN and ±Infinity where the schema does not allow them (a ``float``
        parameter allows them only when declared with ``Field(allow_inf_nan=True)``).

        Raises:
            InvalidArguments: the boundary refused the arguments (the engine answers ``invalid_arguments``).
            pydantic.ValidationError: the arguments do not fit the schema.
        """
        values.check_arguments(arguments)
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            if not any(e["type"] == "finite_number" for e in errors):
                raise
            raise InvalidArguments([
                {"loc": _loc(e["loc"]), "type": e["type"],
                 "msg": "NaN and Infinity are not allowed here (a finite number is expected)"
                 if e["type"] == "finite_number" else e["msg"]}
                for e in errors
            ]) from None

    def dump(self, validated: BaseModel) -> dict[str, Any]:
        """Validated arguments as JSON-safe data (defaults filled in, values coerced to their types).

        Raises:
            ValueConversionError: an argument has no JSON form (only possible for arguments given in Python,
                such as an approver's edits; see :mod:`agentnb.values`).

        Keys are the parameter names the user wrote (and the model sees), also where a name had to be
        aliased because it clashes with pydantic (``model_config``, ``json``, ``_private``).
        """
        data = validated.__dict__
        renamed = self._renamed
        for v in data.values():
            if v is not None and type(v) not in _PRIMITIVES:
                # Through the value boundary: an ``Any`` parameter can hold what an approver passed in (a set,
                # a numpy array), and NaN must stay NaN.
                return cast(dict[str, Any], values.to_json_safe(validated.model_dump(by_alias=True)))
        if renamed:
            names = dict(renamed)
            return {names.get(k, k): v for k, v in data.items()}
        return dict(data)  # flat arguments of plain types: the same result as model_dump, several times faster

    def invoke(self, validated: BaseModel, context: ToolContext | None = None, *, timeout: float | None = None) -> Any:
        """Run the tool on validated arguments, honouring its timeout (or ``timeout`` when it has none).

        Raises:
            TimeoutError: when the tool runs past ``timeout`` seconds.
        """
        kwargs = validated.__dict__  # exactly the declared fields (extra="forbid"), nested models kept as models
        if self.context_param is not None:
            kwargs = {**kwargs, self.context_param: context}
        limit = self.timeout if self.timeout is not None else timeout
        if self.is_async:
            return run_coroutine(self.fn(**kwargs), limit)
        if limit is None:
            return self.fn(**kwargs)
        # A thread cannot be killed: on timeout the call is answered and the thread is left to finish.
        future = _executor().submit(self.fn, **kwargs)
        try:
            return future.result(limit)
        except concurrent.futures.TimeoutError:
            raise TimeoutError from None

    def info(self) -> dict[str, Any]:
        """The tool as offered to a model (name, description, JSON schema, risk, approval)."""
        approval: bool | str = "policy" if callable(self.approval) else self.needs_approval()
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "risk": self.risk,
            "approval": approval,
        }

    def __repr__(self) -> str:
        return f"<agentnb.Tool {self.name}({', '.join(self._field_names)})>"


_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="agentnb-tool")
    return _EXECUTOR


def _build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    approval: ApprovalPolicy,
    risk: Risk,
    timeout: float | None,
    client: bool = False,
    idempotent: bool = False,
    idempotency_key: Callable[[dict[str, Any], Any], str] | None = None,
) -> Tool:
    if not callable(fn):
        raise ToolDefinitionError(f"@tool needs a function, got {type(fn).__name__}")
    if risk not in ("read", "write", "dangerous"):
        raise ToolDefinitionError(f"risk must be 'read', 'write' or 'dangerous', got {risk!r}")
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", tool_name):
        raise ToolDefinitionError(
            f"tool name {tool_name!r} must be 1-64 characters of letters, digits, '_', '.' or '-'"
        )
    doc_desc, doc_params = parse_docstring(inspect.getdoc(fn))
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolved forward references and the like
        raise ToolDefinitionError(f"cannot read the type hints of {tool_name!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    context_param: str | None = None
    params = inspect.signature(fn).parameters
    for pname, param in params.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: *{pname} / **{pname} cannot be described to a model; name each parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"tool {tool_name!r}: positional-only parameter {pname!r} is not supported")
        annotation = hints.get(pname, Any)
        if annotation is ToolContext:
            context_param = pname
            continue
        field_name = pname
        if _clashes(pname):
            field_name = _free_name(pname, params)
            renamed[field_name] = pname
        fields[field_name] = _field(annotation, param.default, doc_params.get(pname), pname if renamed.get(
            field_name) else None)
    model_name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]", tool_name) if part) or "Args"
    try:
        args_model = create_model(
            model_name, __config__=ConfigDict(extra="forbid", allow_inf_nan=False), **fields
        )
        schema = args_model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot build a JSON schema: {exc}") from exc
    if renamed:
        fn = _renaming(fn, renamed)
    return Tool(
        name=tool_name,
        description=(description if description is not None else doc_desc) or tool_name,
        fn=fn,
        args_model=args_model,
        parameters=schema,
        risk=risk,
        approval=approval,
        timeout=timeout,
        is_async=inspect.iscoroutinefunction(fn),
        context_param=context_param,
        client=client,
        idempotent=idempotent,
        key_fn=idempotency_key,
        schema_version=hashlib.sha256(
            json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()[:16],
        _field_names=tuple(renamed.get(f, f) for f in fields),
        _renamed=tuple(renamed.items()),
    )


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc) or "(arguments)"


def _clashes(name: str) -> bool:
    """Whether a parameter name cannot be a pydantic field name as it is."""
    return name.startswith(("_", "model_")) or hasattr(BaseModel, name)


def _free_name(name: str, taken: Any) -> str:
    base = "p_" + name.lstrip("_")
    candidate, n = base, 1
    while candidate in taken or _clashes(candidate):
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def _field(annotation: Any, default: Any, doc: str | None, alias: str | None) -> tuple[Any, Any]:
    """One field of the arguments model: what the user wrote wins over the docstring.

    ``Annotated[int, Field(ge=1, description=...)]`` and ``x: int = Field(ge=1, ...)`` keep their
    description, examples and constraints; the docstring's text fills in a description only where none was
    written. A name that clashes with pydantic gets ``alias`` (the user's name, the one the model sees).
    """
    extra: dict[str, Any] = {}
    if doc:
        extra["description"] = doc
    if alias is not None:
        extra["alias"] = alias
    if extra:  # placed first, so the user's own Field metadata (later) overrides it
        if get_origin(annotation) is Annotated:
            base, *meta = get_args(annotation)
            annotation = Annotated[(base, Field(**extra), *meta)]
        else:
            annotation = Annotated[annotation, Field(**extra)]
    if isinstance(default, FieldInfo):
        return annotation, default
    return annotation, Field(default=PydanticUndefined if default is inspect.Parameter.empty else default)


def _renaming(fn: Callable[..., Any], renamed: dict[str, str]) -> Callable[..., Any]:
    """``fn`` taking aliased field names too: the tool gets each argument under the user's parameter name."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return await fn(*args, **{renamed.get(k, k): v for k, v in kwargs.items()})

        return call_async

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **{renamed.get(k, k): v for k, v in kwargs.items()})

    return call


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalPolicy = None,
    risk: Risk = "read",
    timeout: float | None = None,
    client: bool = False,
    idempotent: bool = False,
    idempotency_key: Callable[[dict[str, Any], Any], str] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalPolicy = None,
    risk: Risk = "read",
    timeout: float | None = None,
    client: bool = False,
    idempotent: bool = False,
    idempotency_key: Callable[[dict[str, Any], Any], str] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a tool; use bare or with options.

    The JSON schema comes from the signature (defaults, enums, ``Literal``, nested pydantic models,
    optional fields) and the docstring (the description and the ``Args:`` section).

    Args:
        fn: the function (when used bare, ``@tool``).
        name: the name the model sees (default: the function's name).
        description: the description the model sees (default: the docstring's first part).
        approval: ``True``/``False``, or ``callable(call, context) -> bool``; ``None`` decides by risk.
        risk: ``"read"``, ``"write"`` or ``"dangerous"``.
        timeout: seconds before the call is answered with a ``timeout`` result.
        client: the client executes it; the run pauses for ``run.submit_result(call_id, value)``.
        idempotent: the downstream deduplicates by the idempotency key (``ToolContext.idempotency_key``), so
            a call whose outcome is unknown after a crash may be re-run with the same key.
        idempotency_key: ``(arguments, context) -> str``, the tool's own key for a call's business intent.

    Example:
        >>> @tool
        ... def add(a: int, b: int = 0) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> add.parameters["required"]
        ['a']
        >>> add(2, 3)
        5
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return _build_tool(
            f, name=name, description=description, approval=approval, risk=risk, timeout=timeout, client=client,
            idempotent=idempotent, idempotency_key=idempotency_key,
        )

    return wrap(fn) if fn is not None else wrap


@dataclass(slots=True)
class Outcome:
    """What running a call produced, before it becomes an event."""

    status: ResultStatus
    content: str
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    duration_s: float = 0.0
    truncated: int = 0
    """Characters cut from ``content`` by the result size cap."""


def render_value(value: Any) -> str:
    """The text a model sees for a value: strings as they are, the rest as JSON (see :func:`agentnb.values.render`).

    Raises:
        ValueConversionError: the value cannot enter a run.
    """
    return values.render(value)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a value for the transcript (see :func:`agentnb.values.to_json_safe`).

    Raises:
        ValueConversionError: the value cannot enter a run.
    """
    return values.to_json_safe(value)


def _converted(t: Tool, value: Any, duration: float) -> Outcome:
    """The ok outcome of a tool's return value, or an error outcome when it cannot enter the run.

    Called inside the tool's error boundary: a value that cannot be converted is an error *result*, recorded
    like any other, so the tool is never run again for it.
    """
    try:
        content, audit = values.convert_result(value)
    except Exception as exc:  # a generator that raises while it is consumed lands here too
        problem = str(exc) if isinstance(exc, ValueConversionError) else values.exception_text(exc)
        return Outcome(
            status="error",
            content=f"Tool '{t.name}' returned a value that cannot be recorded: {problem}",
            error_type=type(exc).__name__,
            error_message=problem,
            duration_s=duration,
        )
    return Outcome(status="ok", content=content, value=audit, duration_s=duration)


def describe_errors(tool_name: str, exc: ValidationError) -> tuple[str, list[dict[str, Any]]]:
    """A model-readable message naming each bad field, plus the structured errors."""
    errors: list[dict[str, Any]] = []
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        msg = err["msg"]
        errors.append({"loc": loc, "msg": msg, "type": err["type"]})
        lines.append(f"- {loc}: {msg}")
    return f"Invalid arguments for tool '{tool_name}':\n" + "\n".join(lines), errors


class ToolRegistry:
    """The tools of one loop, looked up by name only.

    Example:
        >>> @tool
        ... def ping() -> str:
        ...     '''Reply pong.'''
        ...     return "pong"
        >>> ToolRegistry([ping]).names
        ['ping']
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            t = t if isinstance(t, Tool) else tool(t)
            if t.name in self._tools:
                raise ToolDefinitionError(f"two tools are named {t.name!r}; give one of them name=...")
            self._tools[t.name] = t
        self._infos = [ToolInfo(**t.info()) for t in self._tools.values()]

    @property
    def infos(self) -> list[ToolInfo]:
        """The tools as offered to a model (built once; the registry does not change)."""
        return self._infos

    @property
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def unknown_message(self, name: str) -> str:
        """The error a model gets for a name that is not registered."""
        available = ", ".join(self._tools) or "(none)"
        return f"Unknown tool '{name}'. Available tools: {available}."

    def run(
        self, t: Tool, validated: BaseModel, context: ToolContext | None, default_timeout: float | None = None
    ) -> Outcome:
        """Run one validated call and turn whatever happens into an :class:`Outcome`."""
        start = time.perf_counter()
        timeout = t.timeout if t.timeout is not None else default_timeout
        try:
            value = t.invoke(validated, context, timeout=timeout)
        except TimeoutError:
            return Outcome(
                status="timeout",
                content=f"Tool '{t.name}' did not finish within {timeout:g} s.",
                error_type="TimeoutError",
                error_message=f"timed out after {timeout:g} s",
                duration_s=time.perf_counter() - start,
            )
        except Exception as exc:  # the tool's own failure is data for the model
            return Outcome(
                status="error",
                content=f"Tool '{t.name}' raised {type(exc).__name__}: {exc}",
                error_type=type(exc).__name__,
                error_message=str(exc),
                duration_s=time.perf_counter() - start,
            )
        duration = time.perf_counter() - start
        return _converted(t, value, duration)


def as_registry(tools: ToolRegistry | Iterable[Tool | Callable[..., Any]]) -> ToolRegistry:
    """A registry from a registry or a list of tools/functions."""
    return tools if isinstance(tools, ToolRegistry) else ToolRegistry(cast(Iterable[Any], tools))
