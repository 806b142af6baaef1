"""Idempotency keys and call/result binding hashes.

**Idempotency key**: the business intent of a call, the same however often the call is retried, replayed,
resumed or proposed again by the model: ``sha256(operation id, tool name, canonical arguments)`` unless the
tool supplies its own key function. The effect ledger (:mod:`agentnb.store`) is keyed by it.

**Binding**: three hashes over canonical JSON (sorted keys, no spaces, UTF-8):

- ``request_sha256`` of what was asked: provider, API family, response id, call id, operation id,
  idempotency key, tool name and schema version, policy revision, adapter revision, arguments;
- ``result_sha256`` of what came back: call id, status, the model-facing content;
- ``call_binding_sha256`` of the two together.

They are computed when a tool finishes and recomputed from trusted state (the model's turn, the validated
arguments, the loop's tools) before results go back to the model: a result recorded for another call, or
changed after it was recorded, no longer matches, and the run refuses to send it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

ADAPTER_REVISION = "1"
"""Changes when the mapping of results to a provider's wire shape changes."""


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
# The C encoder behind json.dumps, called directly: the same output as _ENCODER.encode without its
# Python-level wrapper, which costs as much as the encoding itself for the small values hashed per call.
_make = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = _make(None, repr, json.encoder.encode_basestring, None, ":", ",", True, False, True) if _make else None


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 text (numbers as JSON writes them).

    Example:
        >>> canonical({"b": [1, 2.5], "a": "é"})
        '{"a":"é","b":[1,2.5]}'
    """
    if _C_ENCODE is not None and not isinstance(value, str):
        return "".join(_C_ENCODE(value, 0))
    return _ENCODER.encode(value)


def sha256(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate hashes too


def idempotency_key(operation_id: str, tool: str, arguments: dict[str, Any] | None) -> str:
    """The default idempotency key of a call.

    Example:
        >>> idempotency_key("op1", "refund", {"b": 2, "a": 1}) == idempotency_key("op1", "refund", {"a": 1, "b": 2})
        True
    """
    return "idem_" + sha256(canonical([operation_id, tool, arguments]))[:40]


def request_sha256(
    *, provider: str, response_id: str | None, call_id: str, operation_id: str, idempotency_key: str | None,
    tool: str, schema_version: str, policy_revision: str, arguments: dict[str, Any] | None,
    api: str | None = None, adapter_revision: str = ADAPTER_REVISION,
) -> str:
    """Hash of everything that defines what a call asked for.

    The canonical JSON is an array in this fixed order: provider, API family, response id, call id, operation
    id, idempotency key, tool, schema version, policy revision, adapter revision, arguments (an array is a
    few times cheaper to encode than the same fields as an object, and just as unambiguous).
    """
    return sha256(canonical([
        provider, api or provider, response_id, call_id, operation_id, idempotency_key, tool, schema_version,
        policy_revision, adapter_revision, arguments,
    ]))


def result_sha256(call_id: str, status: str, content: str) -> str:
    """Hash of a result as the model will see it (canonical JSON array: call id, status, content)."""
    return sha256(canonical([call_id, status, content]))


def binding_sha256(request: str, result: str) -> str:
    """Hash binding one result to one request."""
    return sha256(request + ":" + result)
