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
import hashlib
import inspect
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, get_type_hints, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.config import JsonDict
from pydantic_core import PydanticUndefined, to_jsonable_python

from .events import ToolInfo
from .exceptions import ToolDefinitionError
from .messages import ResultStatus
from .redact import is_mask, reveal, secret_names

Risk = Literal["read", "write", "dangerous"]
ApprovalPolicy = bool | Callable[[Any, Any], bool] | None

_PRIMITIVES = frozenset({str, int, float, bool})
_WRITE_ONLY: JsonDict = {"writeOnly": True}
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_SECTION_HEADER = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_PARAM_LINE = re.compile(r"^(\s*)(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the description and per-parameter texts.

    Example:
        >>> parse_docstring('''Add two numbers.
        ...
        ... Args:
        ...     a: the first.
        ...     b: the second.
        ... ''')
        ('Add two numbers.', {'a': 'the first.', 'b': 'the second.'})
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _ARGS_HEADER.match(lines[i]) and not _SECTION_HEADER.match(lines[i]):
        desc.append(lines[i])
        i += 1
    current: str | None = None
    indent = None
    in_args = False
    for line in lines[i:]:
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if _SECTION_HEADER.match(line) and not line.startswith((" ", "\t")):
            in_args, current = False, None
            continue
        if not in_args:
            continue
        m = _PARAM_LINE.match(line)
        if m and (indent is None or len(m.group(1)) <= indent):
            indent = len(m.group(1))
            current = m.group(2).lstrip("*")
            params[current] = m.group(4).strip()
        elif current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(desc).strip(), params


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
    _field_names: tuple[str, ...] = field(default=())

    @property
    def side_effects(self) -> bool:
        """True for ``write`` and ``dangerous`` tools: their effects go through the ledger."""
        return self.risk != "read"

    def key_for(self, arguments: dict[str, Any]) -> str:
        """The tool's own idempotency key for these arguments (``key_fn``); raises what ``key_fn`` raises."""
        assert self.key_fn is not None
        try:
            takes_context = len(inspect.signature(self.key_fn).parameters) >= 2
        except (TypeError, ValueError):  # a builtin or a C callable: call it with the arguments only
            takes_context = False
        key = self.key_fn(arguments, None) if takes_context else self.key_fn(arguments)
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
        """Validate arguments against the schema; raises pydantic's ``ValidationError``.

        A secret parameter that holds the mask (``[REDACTED]``: what the log keeps) is not checked against
        its type here; the call is checked again with the real value when it runs.
        """
        if self.masked_model is not None and any(is_mask(arguments.get(n)) for n in self.secret):
            return self.masked_model.model_validate(arguments)
        return self.args_model.model_validate(arguments)

    def dump(self, validated: BaseModel) -> dict[str, Any]:
        """Validated arguments as JSON-safe data (defaults filled in, values coerced to their types)."""
        if self.secret:  # written out whole: events mask secret values before they exist (agentnb.redact)
            return cast(dict[str, Any], reveal(validated.model_dump()))
        data = validated.__dict__
        for v in data.values():
            if v is not None and type(v) not in _PRIMITIVES:
                return validated.model_dump(mode="json")
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
        return out

    def __repr__(self) -> str:
        return f"<agentnb.Tool {self.name}({', '.join(self._field_names)})>"


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
    fields: dict[str, Any] = {}
    context_param: str | None = None
    secrets = {secret} if isinstance(secret, str) else set(secret)
    for pname, param in inspect.signature(fn).parameters.items():
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
        default = PydanticUndefined if param.default is param.empty else param.default
        extra = _WRITE_ONLY if pname in secrets else None  # JSON Schema's mark for a secret input
        fields[pname] = (annotation, Field(default=default, description=doc_params.get(pname), json_schema_extra=extra))
    if secrets - fields.keys():
        raise ToolDefinitionError(f"tool {tool_name!r}: secret={sorted(secrets)} names no parameter "
                                  f"{sorted(secrets - fields.keys())}; the parameters are {sorted(fields)}")
    model_name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]", tool_name) if part) or "Args"
    try:
        args_model = create_model(
            model_name, __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = args_model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot build a JSON schema: {exc}") from exc
    secret_fields = secrets | (secret_names(schema) & fields.keys())
    masked_model = None
    if secret_fields:  # the same fields; a secret one takes any value (the mask, in the log's copy)
        relaxed: dict[str, Any] = {n: (Any, Field(default=f[1].default)) if n in secret_fields else f
                                   for n, f in fields.items()}
        masked_model = create_model(f"{model_name}Masked", __config__=ConfigDict(extra="forbid"), **relaxed)
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
        schema_version=hashlib.sha256(
            json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()[:16],
        _field_names=tuple(fields),
        secret=tuple(sorted(secrets | secret_names(schema))),
        masked_model=masked_model,
    )


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
    """The text a model sees for a tool's return value: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a value for the transcript (unknown objects become their repr)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return to_jsonable_python(value, fallback=repr)


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
        return Outcome(status="ok", content=render_value(value), value=jsonable(value), duration_s=duration)


def as_registry(tools: ToolRegistry | Iterable[Tool | ToolSource | Callable[..., Any]]) -> ToolRegistry:
    """A registry from a registry or a list of tools/functions."""
    return tools if isinstance(tools, ToolRegistry) else ToolRegistry(cast(Iterable[Any], tools))
