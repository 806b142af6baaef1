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

Tools need not be Python functions: a :class:`ToolSource` (an MCP server, see :mod:`agentnb.mcp`) hands the
registry several :class:`Tool` objects at once, and from then on they are ordinary tools.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import (
    Annotated,
    Any,
    Literal,
    Protocol,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    overload,
    runtime_checkable,
)

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from . import values
from .events import ToolInfo
from .exceptions import InvalidArguments, ToolDefinitionError, ValueConversionError
from .messages import ResultStatus
from .redact import is_mask, reveal, secret_names
from .strict import strict_schema

Risk = Literal["read", "write", "dangerous"]
ApprovalPolicy = bool | Callable[[Any, Any], bool] | None

_PRIMITIVES = frozenset({str, int, float, bool})
_WRITE_ONLY: JsonDict = {"writeOnly": True}


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
    key_fn: Callable[..., str] | None = None
    """``(arguments) -> str`` (or ``(arguments, context) -> str``): the tool's own idempotency key."""
    idempotency: Literal["intent", "call"] = "intent"
    """``intent``: identical calls are one effect (keyed by arguments or ``key_fn``); ``call``: every call is its
    own effect (keyed by the call's identity)."""
    schema_version: str = ""
    """Short hash of the JSON schema; part of every binding hash."""
    masked_model: type[BaseModel] | None = None
    """``args_model`` with the top-level secret parameters accepting the mask (see :meth:`validate`)."""
    secret: tuple[str, ...] = ()
    """Names of secret parameters (``secret=[...]``, and ``SecretStr`` fields at any depth): the tool gets the
    real value, every event, artifact, card and frame shows ``[REDACTED]`` (see :mod:`agentnb.redact`)."""
    server: str | None = None
    """The name of the MCP server that runs the tool (None for a local function)."""
    strict: bool = False
    """The schema follows strict mode's rules (see :mod:`agentnb.strict`), and wire APIs that have a strict flag
    get it for this tool."""
    nullable: tuple[str, ...] = ()
    """For a strict tool: parameters that were optional, where the model's ``null`` means "use the default"."""
    _field_names: tuple[str, ...] = field(default=())
    _renamed: tuple[tuple[str, str], ...] = field(default=())
    """``(field name, parameter name)`` for parameters whose names clash with pydantic (see :func:`tool`)."""

    @property
    def side_effects(self) -> bool:
        """True for ``write`` and ``dangerous`` tools: their effects go through the ledger."""
        return self.risk != "read"

    def key_for(self, arguments: dict[str, Any]) -> str:
        """The tool's own idempotency key for these arguments (``key_fn``); raises what ``key_fn`` raises."""
        assert self.key_fn is not None
        key = self.key_fn(arguments, None) if _takes_context(self.key_fn) else self.key_fn(arguments)
        if not isinstance(key, str | int) or isinstance(key, bool) or key == "":
            raise TypeError(f"the idempotency key must be a non-empty str, got {key!r}")
        return str(key)

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
        parameter allows them only when declared with ``Field(allow_inf_nan=True)``). A secret parameter that
        holds the mask (``[REDACTED]``: what the log keeps) is not checked against its type here; the call is
        checked again with the real value when it runs.

        Raises:
            InvalidArguments: the boundary refused the arguments (the engine answers ``invalid_arguments``).
            pydantic.ValidationError: the arguments do not fit the schema.
        """
        values.check_arguments(arguments)
        if self.nullable:  # strict mode has no optional properties: null stands for "use the default"
            arguments = {k: v for k, v in arguments.items() if not (v is None and k in self.nullable)}
        model = self.args_model
        if self.masked_model is not None and any(is_mask(arguments.get(n)) for n in self.secret):
            model = self.masked_model
        try:
            return model.model_validate(arguments)
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
        aliased because it clashes with pydantic (``model_config``, ``json``, ``_private``). Secret values are
        written out whole: events mask them before they exist (:mod:`agentnb.redact`).
        """
        if self.secret:
            return cast(dict[str, Any], values.to_json_safe(reveal(validated.model_dump(by_alias=True))))
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

    def invoke(self, validated: BaseModel, context: ToolContext | None = None,
               on_loop: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = None) -> Any:
        """Run the tool on validated arguments in the calling thread (timeouts are the caller's: see ``Run``).

        An async tool runs on an event loop of its own in this thread, so a tool that blocks its loop cannot
        hold up any other tool; ``on_loop(loop, task)`` receives the loop and task so the caller can cancel it.
        """
        kwargs = validated.__dict__  # exactly the declared fields (extra="forbid"), nested models kept as models
        if self.context_param is not None:
            kwargs = {**kwargs, self.context_param: context}
        if not self.is_async:
            return self.fn(**kwargs)
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(self.fn(**kwargs))
            if on_loop is not None:
                on_loop(loop, task)
            return loop.run_until_complete(task)
        finally:
            loop.close()

    def info(self) -> dict[str, Any]:
        """The tool as offered to a model (name, description, JSON schema, risk, approval; an MCP tool's server)."""
        approval: bool | str = "policy" if callable(self.approval) else self.needs_approval()
        out = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "risk": self.risk,
            "approval": approval,
        }
        if self.server is not None:
            out["server"] = self.server
        if self.strict:
            out["strict"] = True
        return out

    def __repr__(self) -> str:
        return f"<agentnb.Tool {self.name}({', '.join(self._field_names)})>"


@functools.lru_cache(maxsize=256)
def _takes_context(fn: Callable[..., Any]) -> bool:
    """Whether an idempotency-key function takes ``(arguments, context)`` (read once per function)."""
    try:
        return len(inspect.signature(fn).parameters) >= 2
    except (TypeError, ValueError):  # a builtin or a C callable: call it with the arguments only
        return False


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
    idempotency_key: Callable[..., str] | None = None,
    idempotency: Literal["intent", "call"] = "intent",
    secret: Iterable[str] = (),
    strict: bool = False,
) -> Tool:
    if not callable(fn):
        raise ToolDefinitionError(f"@tool needs a function, got {type(fn).__name__}")
    if idempotency not in ("intent", "call"):
        raise ToolDefinitionError(f"idempotency must be 'intent' or 'call', got {idempotency!r}")
    if idempotency == "call" and idempotency_key is not None:
        raise ToolDefinitionError("give idempotency_key= or idempotency='call', not both: they name the effect "
                                  "two different ways")
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
    secrets = {secret} if isinstance(secret, str) else set(secret)
    fields, renamed, context_param = _fields_of(fn, tool_name, hints, doc_params, secrets)
    named = {renamed.get(f, f) for f in fields}
    if secrets - named:
        raise ToolDefinitionError(f"tool {tool_name!r}: secret={sorted(secrets)} names no parameter "
                                  f"{sorted(secrets - named)}; the parameters are {sorted(named)}")
    model_name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]", tool_name) if part) or "Args"
    try:
        args_model = create_model(
            model_name, __config__=ConfigDict(extra="forbid", allow_inf_nan=False), **fields
        )
        schema = args_model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot build a JSON schema: {exc}") from exc
    masked_model = _masked_model(model_name, fields, renamed, secrets | (secret_names(schema) & named))
    nullable: tuple[str, ...] = ()
    if strict:
        schema, nullable = strict_schema(tool_name, schema)
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
        idempotency=idempotency,
        strict=strict,
        nullable=nullable,
        schema_version=hashlib.sha256(
            json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()[:16],
        _field_names=tuple(renamed.get(f, f) for f in fields),
        _renamed=tuple(renamed.items()),
        secret=tuple(sorted(secrets | secret_names(schema))),
        masked_model=masked_model,
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


def _fields_of(
    fn: Callable[..., Any], tool_name: str, hints: dict[str, Any], doc_params: dict[str, str], secrets: set[str],
) -> tuple[dict[str, Any], dict[str, str], str | None]:
    """The arguments model's fields (by field name), the renamed ones (field name -> user's name), the context."""
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
        kind, info = _field(annotation, param.default, doc_params.get(pname), pname if field_name != pname else None)
        if pname in secrets:  # JSON Schema's mark for a secret input
            kind = Annotated[kind, Field(json_schema_extra=_WRITE_ONLY)]
        fields[field_name] = (kind, info)
    return fields, renamed, context_param


def _masked_model(
    model_name: str, fields: dict[str, Any], renamed: dict[str, str], secret: set[str]
) -> type[BaseModel] | None:
    """The arguments model with the secret fields taking any value (the mask, in the log's copy), or None."""
    if not secret:
        return None
    relaxed: dict[str, Any] = {
        n: (Any, Field(default=f[1].default, alias=renamed.get(n))) if renamed.get(n, n) in secret else f
        for n, f in fields.items()
    }
    return create_model(f"{model_name}Masked", __config__=ConfigDict(extra="forbid"), **relaxed)


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
    idempotency_key: Callable[..., str] | None = None,
    idempotency: Literal["intent", "call"] = "intent",
    secret: Iterable[str] = (),
    strict: bool = False,
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
    idempotency_key: Callable[..., str] | None = None,
    idempotency: Literal["intent", "call"] = "intent",
    secret: Iterable[str] = (),
    strict: bool = False,
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
        idempotency_key: ``(arguments) -> str``, the tool's own key for a call's business intent (e.g.
            ``lambda args: args["order_id"]``): an effect runs at most once per key, and every later call with the
            same key gets a ``duplicate`` result naming the call that did it.
        idempotency: ``"intent"`` (default: identical calls of one operation are one effect, keyed by the
            canonical arguments) or ``"call"`` (identical calls are distinct effects, keyed by the call).
        secret: parameters whose values are secret (as a ``pydantic.SecretStr`` parameter is): the tool gets
            the real value; events, artifacts and the debugger show ``[REDACTED]``.
        strict: make the schema follow strict mode's rules (every property required, optional ones nullable,
            no free keys; see :mod:`agentnb.strict`) and ask wire APIs that have a strict flag to enforce it; a
            signature that cannot be strict is a ``ToolDefinitionError`` naming the field.

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
            idempotent=idempotent, idempotency_key=idempotency_key, idempotency=idempotency, secret=secret,
            strict=strict,
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


def timeout_outcome(tool_name: str, limit: float, duration_s: float, *, deadline: bool = False) -> Outcome:
    """The result of a call that ran past its time limit (the tool's timeout or what was left of the deadline)."""
    why = "the run's deadline" if deadline else "its timeout"
    return Outcome(
        status="timeout",
        content=f"Tool '{tool_name}' did not finish within {limit:g} s ({why}).",
        error_type="TimeoutError",
        error_message=f"timed out after {limit:g} s ({why})",
        duration_s=duration_s,
    )


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


@runtime_checkable
class ToolSource(Protocol):
    """Something that provides several tools at once, such as an :class:`agentnb.MCPServer`.

    ``Loop(tools=[source, my_tool])`` registers every tool of the source.
    """

    def as_tools(self) -> list[Tool]:
        """The tools to register."""
        ...


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

    def __init__(self, tools: Iterable[Tool | ToolSource | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            for t in item.as_tools() if isinstance(item, ToolSource) else [item]:
                t = t if isinstance(t, Tool) else tool(t)
                if t.name in self._tools:
                    hint = "give one of the servers prefix=..." if t.server else "give one of them name=..."
                    raise ToolDefinitionError(f"two tools are named {t.name!r}; {hint}")
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
        self, t: Tool, validated: BaseModel, context: ToolContext | None,
        on_loop: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = None,
    ) -> Outcome:
        """Run one validated call in this thread and turn whatever happens into an :class:`Outcome`.

        ``KeyboardInterrupt`` propagates (the driver pauses the run cleanly); any other exception, ``SystemExit``
        and ``CancelledError`` included, is an error result for this call.
        """
        start = time.perf_counter()
        try:
            value = t.invoke(validated, context, on_loop)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the tool's own failure is data for the model
            return Outcome(
                status="error",
                content=f"Tool '{t.name}' raised {type(exc).__name__}: {exc}",
                error_type=type(exc).__name__,
                error_message=str(exc),
                duration_s=time.perf_counter() - start,
            )
        duration = time.perf_counter() - start
        return _converted(t, value, duration)


def as_registry(tools: ToolRegistry | Iterable[Tool | ToolSource | Callable[..., Any]]) -> ToolRegistry:
    """A registry from a registry or a list of tools/functions."""
    return tools if isinstance(tools, ToolRegistry) else ToolRegistry(cast(Iterable[Any], tools))
