"""What a tool is: :class:`Tool`, the record every way of defining a tool ends in, and :class:`ToolContext`.

A :class:`Tool` carries the function, the pydantic model of its arguments and the JSON schema offered to the
model, its risk and approval policy, its idempotency rules and its secret parameters. It owns the three steps
between the model's arguments and the function: :meth:`Tool.validate` (the value boundary, then the schema),
:meth:`Tool.dump` (validated arguments as the JSON the log keeps) and :meth:`Tool.invoke` (the call itself, an
async tool on an event loop of its own). How a tool is built from a function is :mod:`agentnb.tools._schema`;
how its calls are looked up and turned into results is :mod:`agentnb.tools._registry`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

from pydantic import BaseModel, ValidationError

from .. import _values as values
from .._redact import is_mask, reveal
from ..exceptions import InvalidArguments

Risk = Literal["read", "write", "dangerous"]
ApprovalPolicy = bool | Callable[[Any, Any], bool] | None

_PRIMITIVES = frozenset({str, int, float, bool})


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
    max_timeout: float | None = None
    """Seconds no call may run past, whatever ``timeout`` or the loop's ``tool_timeout`` say (the smaller wins):
    an MCP server's ``call_timeout``. None: no ceiling."""
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
    real value, every event, artifact, card and frame shows ``[REDACTED]`` (see :mod:`agentnb._redact`)."""
    server: str | None = None
    """The name of the MCP server that runs the tool (None for a local function)."""
    strict: bool = False
    """The schema follows strict mode's rules (see :mod:`agentnb._strict`), and wire APIs that have a strict flag
    get it for this tool."""
    simulate: Callable[..., Any] | None = None
    """A fake a fork with ``effects="simulate"`` runs instead of the tool (same arguments; see ``@tool``)."""
    nullable: tuple[str, ...] = ()
    """For a strict tool: parameters that were optional, where the model's ``null`` means "use the default"."""
    _field_names: tuple[str, ...] = field(default=())
    _renamed: tuple[tuple[str, str], ...] = field(default=())
    """``(field name, parameter name)`` for parameters whose names clash with pydantic (see :func:`tool`)."""
    _dumped: tuple[dict[str, Any], dict[str, Any], BaseModel] | None = field(default=None, init=False, compare=False,
                                                                              repr=False)
    """The last :meth:`dump` (the dict, a copy of it, the object it was made from): validating that very dict
    again, unchanged, returns the object."""

    cancellable: ClassVar[bool] = False
    """Whether a call in flight can be let go when the run is cancelled (``run.cancel()``): the run ends at once,
    a read's task is cancelled and a write is left to finish (its outcome unknown). False for local functions:
    a thread cannot be stopped, so a cancelled run waits for them. An MCP tool says True."""

    def current(self) -> Tool:
        """The tool as it stands now: itself, for a local function.

        The registry asks every time it hands a tool out, so a tool whose rules can change while a loop holds it
        (an MCP server that lists a tool anew with riskier annotations) answers with its latest form.
        """
        return self

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

        The value boundary looks first (:func:`agentnb._values.check_arguments`): a lone surrogate, nesting
        deeper than :data:`agentnb._values.MAX_DEPTH` or arguments that contain themselves are refused before
        the schema sees them, and so are NaN and ±Infinity where the schema does not allow them (a ``float``
        parameter allows them only when declared with ``Field(allow_inf_nan=True)``). A secret parameter that
        holds the mask (``[REDACTED]``: what the log keeps) is not checked against its type here; the call is
        checked again with the real value when it runs.

        Raises:
            InvalidArguments: the boundary refused the arguments (the engine answers ``invalid_arguments``).
            pydantic.ValidationError: the arguments do not fit the schema.
        """
        dumped = self._dumped
        if dumped is not None and dumped[0] is arguments and arguments == dumped[1] and not self.secret:
            # the dict the engine made from this validated object (CallValidated.arguments), unchanged since:
            # the tool port validates what the log recorded, and gets the same answer without asking pydantic
            return dumped[2]
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
                such as an approver's edits; see :mod:`agentnb._values`).

        Keys are the parameter names the user wrote (and the model sees), also where a name had to be
        aliased because it clashes with pydantic (``model_config``, ``json``, ``_private``). Secret values are
        written out whole: events mask them before they exist (:mod:`agentnb._redact`).
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
        out = dict(data)  # flat arguments of plain types: the same result as model_dump, several times faster
        object.__setattr__(self, "_dumped", (out, dict(out), validated))  # one slot: another dump only costs a miss
        return out

    def invoke(self, validated: BaseModel, context: ToolContext | None = None,
               on_loop: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = None,
               *, simulated: bool = False) -> Any:
        """Run the tool on validated arguments in the calling thread (timeouts are the caller's: see ``Run``).

        An async tool runs on an event loop of its own in this thread, so a tool that blocks its loop cannot
        hold up any other tool; ``on_loop(loop, task)`` receives the loop and task so the caller can cancel it.
        ``simulated``: run the tool's simulator instead (``@tool(simulate=...)``), with the same arguments.
        """
        fn = self.fn
        kwargs = validated.__dict__  # exactly the declared fields (extra="forbid"), nested models kept as models
        if simulated:
            assert self.simulate is not None
            fn = self.simulate
            if self.context_param is not None and _takes_param(fn, self.context_param):
                kwargs = {**kwargs, self.context_param: context}
        elif self.context_param is not None:
            kwargs = {**kwargs, self.context_param: context}
        if not (inspect.iscoroutinefunction(fn) if simulated else self.is_async):
            return fn(**kwargs)
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(fn(**kwargs))
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


def _takes_param(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` has a parameter ``name`` (or takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc) or "(arguments)"
