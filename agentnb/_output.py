"""Typed final outputs: ``Loop(output_type=Invoice)`` makes a run end with a validated object, not just text.

The run offers the model one more tool, the **output tool** (``final_result``), whose parameters are the output
type's JSON schema; calling it is how the model answers. Its arguments are validated by pydantic against the
type (a ``BaseModel``, a ``TypedDict``, a dataclass, a list of them, any type pydantic validates) or, for a plain
JSON schema given as a dict, by ``jsonschema``. A valid answer ends the run ``COMPLETED`` with ``run.output`` as
the typed object; an invalid one goes back to the model as an error result carrying the validation errors, for
at most ``output_retries`` correction turns, after which the run ends ``FAILED`` naming the last error. A model
that answers with text instead is held to the same rule: text that parses as JSON and fits counts as the answer;
anything else gets a correction turn. A correction turn is a model request like any other, so the budget checks
it first: a budget that runs out applies its ``on_exhausted`` policy (``finalize`` sends the correction with the
finalization request; if that answer does not fit either, the run ends ``BUDGET_EXHAUSTED`` naming the budget).
Every check is an ``OutputValidated`` event (the last failed one is ``final``).

This mechanism works with every wire API (it is an ordinary tool call), and in streaming mode the debugger shows
the output's JSON growing fragment by fragment; it is validated only once the call is complete.

Example:
    >>> import agentnb as anb, pydantic
    >>> class Weather(pydantic.BaseModel):
    ...     city: str
    ...     temp_c: int
    >>> model = anb.ScriptedModel([
    ...     {"tool_calls": [{"name": "final_result", "arguments": {"city": "Paris", "temp_c": "hot"}}]},
    ...     {"tool_calls": [{"name": "final_result", "arguments": {"city": "Paris", "temp_c": 18}}]},
    ... ])
    >>> run = anb.Loop(model=model, output_type=Weather).start("Weather in Paris?").run()
    >>> run.state.value, run.output
    ('COMPLETED', Weather(city='Paris', temp_c=18))
    >>> [e.ok for e in run.events if e.type == "OutputValidated"]
    [False, True]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ._request import OutputSchema
from ._strict import strict_schema
from .events import ToolInfo
from .exceptions import ToolDefinitionError

OUTPUT_TOOL = "final_result"
"""The output tool's default name."""

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class OutputSpec:
    """How a run's final output is asked for and checked. Build one with :meth:`of`."""

    output_type: Any
    name: str
    description: str
    parameters: dict[str, Any]
    """The output tool's JSON schema (always an object: other types are wrapped in ``{"result": ...}``)."""
    wrapped: bool
    retries: int
    adapter: TypeAdapter[Any] | None
    native: bool = False
    """Asked for with the provider's structured-output mode (the answer is JSON text) instead of the output tool."""
    native_schema: dict[str, Any] | None = None
    """The schema sent in native mode: the strict form where the type allows it (see :mod:`agentnb._strict`)."""
    nullable: tuple[str, ...] = ()
    """Top-level fields that the strict form made nullable (a ``null`` there means "the default")."""

    @classmethod
    def of(cls, output_type: Any, *, retries: int = 2, name: str = OUTPUT_TOOL, native: bool = False,
           strict_only: bool = False) -> OutputSpec:
        """The spec of an output type (a type pydantic validates, or a JSON schema as a dict).

        With ``native``, the schema goes in its strict form where the type allows it; where it does not, the
        plain schema goes without strict mode, or, with ``strict_only`` (an API whose structured-output mode
        takes only the strict form), the spec falls back to the output tool (``native`` False).

        Raises:
            ToolDefinitionError: the type has no JSON schema.
        """
        if retries < 0:
            raise ValueError(f"output_retries must be 0 or more, got {retries}")
        adapter: TypeAdapter[Any] | None = None
        if isinstance(output_type, dict):
            schema = dict(output_type)
        else:
            try:
                adapter = TypeAdapter(output_type)
                schema = adapter.json_schema()
            except Exception as exc:
                raise ToolDefinitionError(f"output_type {output_type!r} has no JSON schema: {exc}") from exc
        wrapped = schema.get("type") != "object"
        if wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"result": schema}, "required": ["result"],
                      **({"$defs": defs} if defs else {})}
        title = getattr(output_type, "__name__", None) or schema.get("title") or "the answer"
        description = (f"Give your final answer ({title}) by calling this tool; the run ends when the arguments fit "
                       "the schema.")
        native_schema: dict[str, Any] = schema
        nullable: tuple[str, ...] = ()
        if native:
            try:
                native_schema, nullable = strict_schema(name, schema)
            except ToolDefinitionError:  # the type cannot be strict: ask for it without strict mode
                native_schema, nullable = schema, ()
                native = not strict_only  # ... or with the output tool, where the API takes only strict form
        return cls(output_type, name, description, schema, wrapped, retries, adapter, native, native_schema,
                   tuple(nullable))

    def output_schema(self) -> OutputSchema:
        """The structured-output request option of native mode (rendered by each wire adapter).

        Strict when the schema sent is the strict form made for it (not the plain schema: a type that cannot
        be strict is asked for without strict mode).
        """
        return OutputSchema(self.name, self.native_schema or self.parameters,
                            strict=self.native_schema is not self.parameters and self.native_schema is not None)

    def info(self) -> ToolInfo:
        """The output tool as offered to the model."""
        return ToolInfo(name=self.name, description=self.description, parameters=self.parameters, risk="read",
                        approval=False)

    def check(self, arguments: dict[str, Any] | None) -> tuple[bool, Any, list[dict[str, Any]]]:
        """Validate the output tool's arguments: ``(ok, output as JSON-safe data, errors)``."""
        if arguments is None:
            return False, None, [{"loc": "", "msg": "the arguments are not a JSON object", "type": "json"}]
        value: Any = arguments
        if self.wrapped:
            if "result" not in arguments:
                return False, None, [{"loc": "result", "msg": "Field required", "type": "missing"}]
            value = arguments["result"]
        return self._validate(value)

    def check_text(self, text: str) -> tuple[bool, Any, list[dict[str, Any]]]:
        """Validate an answer given as text (JSON, optionally in a code fence)."""
        fenced = _FENCE.match(text or "")
        try:
            value = json.loads(fenced.group(1) if fenced else text)
        except ValueError as exc:
            how = ("answer with JSON that fits the schema" if self.native
                   else f"call {self.name} with it")  # native mode offers no output tool to call
            return False, None, [{"loc": "", "msg": f"the answer is not JSON ({exc}); {how}", "type": "json"}]
        if self.wrapped and isinstance(value, dict) and set(value) == {"result"}:
            value = value["result"]
        elif self.nullable and isinstance(value, dict):  # strict form: null stands for "the default"
            value = {k: v for k, v in value.items() if not (v is None and k in self.nullable)}
        return self._validate(value)

    def _validate(self, value: Any) -> tuple[bool, Any, list[dict[str, Any]]]:
        if self.adapter is None:
            return self._validate_schema(value)
        try:
            obj = self.adapter.validate_python(value)
        except ValidationError as exc:
            return False, None, [
                {"loc": ".".join(str(x) for x in e["loc"]), "msg": e["msg"], "type": e["type"]}
                for e in exc.errors(include_url=False)
            ]
        except Exception as exc:  # a validator that raised something else: still the answer's fault
            return False, None, [{"loc": "", "msg": f"{type(exc).__name__}: {exc}", "type": "validator_error"}]
        return True, self.adapter.dump_python(obj, mode="json"), []

    def _validate_schema(self, value: Any) -> tuple[bool, Any, list[dict[str, Any]]]:
        try:
            import jsonschema
        except ImportError as exc:  # pragma: no cover - jsonschema ships with Jupyter
            raise ToolDefinitionError("a JSON-schema output_type needs the jsonschema package") from exc
        schema = self.output_type
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
        if errors:
            return False, None, [{"loc": ".".join(str(p) for p in e.path), "msg": e.message, "type": e.validator}
                                 for e in errors]
        return True, value, []

    def typed(self, value: Any) -> Any:
        """The typed output from its JSON-safe form (what ``run.output`` returns)."""
        return value if self.adapter is None else self.adapter.validate_python(value)
