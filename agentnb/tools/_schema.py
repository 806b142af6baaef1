"""From a typed function to a :class:`~agentnb.tools.Tool`: the ``@tool`` decorator and the arguments model.

``@tool`` reads a function's signature and Google-style docstring and builds a pydantic model of its
parameters; the JSON schema offered to the model comes from that model, and the same model validates the
arguments the model sends. What the user wrote wins over the docstring: ``Annotated[..., Field(...)]`` and
``Field`` defaults keep their descriptions and constraints. A parameter annotated
:class:`~agentnb.tools.ToolContext` is filled by agentnb and left out of the schema; a parameter whose name
clashes with pydantic gets an alias, so the model and the function both see the name the user wrote; a secret
parameter is marked ``writeOnly`` and gets a second model that accepts the log's mask.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .._redact import secret_names
from .._strict import strict_schema
from ..exceptions import ToolDefinitionError
from ._definition import ApprovalPolicy, Risk, Tool, ToolContext

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
    simulate: Callable[..., Any] | None = None,
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
    if simulate is not None and not callable(simulate):
        raise ToolDefinitionError(f"simulate= needs a function (the tool's fake for forks), got "
                                  f"{type(simulate).__name__}")
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
    fields, renamed, context_param = _fields_of(fn, tool_name, hints, doc_params, secrets, strict)
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
        simulate = _renaming(simulate, renamed) if simulate is not None else None
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
        simulate=simulate,
    )


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
    strict: bool = False,
) -> tuple[dict[str, Any], dict[str, str], str | None]:
    """The arguments model's fields (by field name), the renamed ones (field name -> user's name), the context.

    ``strict``: a parameter of no type (no annotation, or ``Any``) is refused, naming it (strict mode constrains
    every value to a type: see :mod:`agentnb._strict`).
    """
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
        if strict and (pname not in hints or _untyped(annotation)):
            how = "has no type annotation" if pname not in hints else f"is annotated {_named(annotation)}"
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {pname!r} {how}, and strict=True needs a type for every parameter "
                f"(strict mode constrains each value to its type, and 'any value' is none): annotate it, for "
                f"example `{pname}: str` or `{pname}: int | None = None`, or leave strict off"
            )
        field_name = pname
        if _clashes(pname):
            field_name = _free_name(pname, params)
            renamed[field_name] = pname
        kind, info = _field(annotation, param.default, doc_params.get(pname), pname if field_name != pname else None)
        if pname in secrets:  # JSON Schema's mark for a secret input
            kind = Annotated[kind, Field(json_schema_extra=_WRITE_ONLY)]
        fields[field_name] = (kind, info)
    return fields, renamed, context_param


def _untyped(annotation: Any) -> bool:
    """``Any`` or ``object``, possibly inside ``Annotated[...]``: a parameter that takes any value."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation is Any or annotation is object


def _named(annotation: Any) -> str:
    base = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    return "Any" if base is Any else "object"


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
    simulate: Callable[..., Any] | None = None,
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
    simulate: Callable[..., Any] | None = None,
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
            no free keys; see :mod:`agentnb._strict`) and ask wire APIs that have a strict flag to enforce it; a
            signature that cannot be strict is a ``ToolDefinitionError`` naming the field.
        simulate: a fake of a side-effecting tool, called with the same arguments, that a fork with
            ``effects="simulate"`` runs instead of the tool (``run.fork``): what it returns is the call's result,
            marked ``simulated``. Without one, such a fork answers the write with an error result saying so.

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
            strict=strict, simulate=simulate,
        )

    return wrap(fn) if fn is not None else wrap
