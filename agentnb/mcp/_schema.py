"""An MCP tool's arguments: checked against the server's ``inputSchema`` and kept exactly as sent.

The schema the model sees is the server's ``inputSchema``, verbatim, and the arguments the model sends are
validated against that same schema (JSON Schema, with ``jsonschema``): a bad call is a ``schema`` rejection the
model reads, exactly as for a local tool, and never reaches the server. :func:`schema_arguments` binds a
:class:`SchemaArguments` subclass to one schema, so the registry treats it like a local tool's pydantic model.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..exceptions import ToolDefinitionError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator


class SchemaArguments(BaseModel):
    """Arguments checked against a JSON schema (an MCP tool's ``inputSchema``) and kept exactly as sent.

    Each MCP tool gets a subclass bound to its schema (see :func:`schema_arguments`); ``model_validate`` runs
    JSON-schema validation and raises pydantic's ``ValidationError`` with one entry per violation, so the
    registry reports it to the model like any other schema error.
    """

    model_config = ConfigDict(frozen=True)

    arguments: dict[str, Any]
    """The arguments, unchanged (JSON-schema validation does not coerce or fill in defaults: the server does)."""

    json_schema: ClassVar[dict[str, Any]] = {}
    """The schema the arguments are checked against."""
    json_schema_validator: ClassVar[Validator | None] = None

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        validator = cls.json_schema_validator
        if validator is None:
            raise TypeError(f"{cls.__name__} is not bound to a schema; build it with schema_arguments()")
        if not isinstance(data, dict):
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                type=PydanticCustomError("json_schema", "{reason}", {"reason": "the arguments must be a JSON object"}),
                loc=(), input=data)])
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, [_error_details(e) for e in errors])
        return {"arguments": data}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The bound JSON schema itself (the server's), not a schema of this wrapper."""
        schema: dict[str, Any] = json.loads(json.dumps(cls.json_schema))  # a copy the caller may change
        return schema


def _error_details(err: Any) -> InitErrorDetails:
    """One jsonschema error as a pydantic error entry: where (the path into the arguments) and what."""
    loc: tuple[int | str, ...] = tuple(err.absolute_path)
    message = str(err.message)
    if len(message) > 300:  # jsonschema quotes the offending value, which can be a whole document
        message = message[:300] + "…"
    if err.validator == "required" and isinstance(err.instance, dict):
        # jsonschema reports a missing property at its parent; name the property itself, as pydantic does
        for prop in err.validator_value:
            if prop not in err.instance and message.startswith(repr(prop)):
                loc, message = (*loc, prop), "Field required"
                break
    return InitErrorDetails(type=PydanticCustomError("json_schema", "{reason}", {"reason": message}),
                            loc=loc, input=err.instance)


def schema_arguments(name: str, schema: dict[str, Any]) -> type[SchemaArguments]:
    """A :class:`SchemaArguments` subclass that validates against ``schema``.

    Raises:
        ToolDefinitionError: the schema itself is not valid JSON Schema.

    Example:
        >>> Args = schema_arguments("Add", {"type": "object", "properties": {"a": {"type": "integer"}},
        ...                                  "required": ["a"]})
        >>> Args.model_validate({"a": 2}).arguments
        {'a': 2}
        >>> Args.model_validate({"a": "2"})
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Add
        a
          '2' is not of type 'integer' ...
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    validator_cls = validator_for(schema, default=Draft202012Validator)
    try:
        validator_cls.check_schema(schema)
    except SchemaError as exc:
        raise ToolDefinitionError(f"{name}: the input schema is not valid JSON Schema: {exc.message}") from exc
    namespace = {"json_schema": schema, "json_schema_validator": validator_cls(schema), "__module__": __name__}
    return cast(type[SchemaArguments], type(name, (SchemaArguments,), namespace))
