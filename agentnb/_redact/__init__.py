r"""Secrets never reach a transcript, a checkpoint, a cassette, a DataFrame, the debugger or a log.

Theory of operation. Redaction happens at the source: the driver passes the fields of an event through this
module *before* the event exists, so the in-memory transcript, the store, the frames and the debugger all
hold the same masked text (``[REDACTED]``). Three kinds of value are masked:

- values under keys that name credentials (``api_key``, ``authorization``, ``x-api-key``, ``password``,
  ``cookie``, ...), and under the **secret parameters** of a tool -- parameters typed
  ``pydantic.SecretStr``/``SecretBytes`` or listed in ``@anb.tool(secret=[...])``; both show in the tool's
  JSON schema as ``"writeOnly": true`` (:func:`secret_names` reads them from there);
- strings that look like provider keys or bearer tokens (``sk-...``, ``sk-ant-...``, ``AIza...``,
  ``Bearer ...``, ``key=...`` in URLs);
- any literal registered with :func:`register_secret`, whatever its shape. Every model agentnb ships declares
  the credentials it holds (:class:`HoldsCredentials`: ``model.credentials()``), and ``Loop`` registers them;
  the usual environment variables (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``,
  ``GOOGLE_API_KEY``) are registered when this module loads; the value of every secret argument a model sends
  is registered too, so a tool that echoes it back is masked as well.

Where each kind is masked: request settings, provider errors and reasons, the provider's raw response, the
assistant message of every turn (text, call arguments -- parsed and raw --), validated and edited arguments,
tool results (content and audit value, ``ok`` or not, before they are hashed and written to the effect
ledger), and streamed fragments.

Streams (:mod:`agentnb._redact.stream`): a secret can arrive split over fragments, so :class:`StreamRedactor`
holds back the tail of a stream that could still become one. What tools receive
(:mod:`agentnb._redact.run_secrets`): the real values, which :class:`RunSecrets` keeps in memory only.

Known limits: a secret that a JSON encoder escaped (``\"``, ``\uXXXX``) is matched by key or shape, not as
a literal; literals shorter than 8 characters are not registered (a 4-digit pin is masked under its key, but
not where a tool echoes it in free text); the idempotency key of a side-effecting call is computed from its
masked arguments, so two calls that differ only in a secret argument share it (give such tools their own
``idempotency_key=``); user prompts and reasoning parts (signed continuation data that must go back byte for
byte) are kept as written.

The package, by responsibility:

- :mod:`agentnb._redact.patterns`: what a secret looks like -- credential key names, provider-key shapes, the
  registered literals and the credentials models declare -- and :func:`redact_text`, which masks them in a string;
- :mod:`agentnb._redact.mask`: masking values -- JSON text, nested data, tool outcomes, the pieces of a split
  stream event -- and reading a tool's secret parameters from its schema;
- :mod:`agentnb._redact.stream`: :class:`StreamRedactor`, for text that arrives in fragments;
- :mod:`agentnb._redact.run_secrets`: :class:`RunSecrets`, what one run masked and the real values its tools get.
"""

from __future__ import annotations

from .mask import (
    mask_pieces,
    redact,
    redact_json_text,
    redact_outcome,
    redact_pieces,
    redact_wire,
    reveal,
    secret_names,
    secret_values,
    shaped_values,
)
from .patterns import (
    MASK,
    HoldsCredentials,
    client_credentials,
    is_mask,
    redact_text,
    register_credentials,
    register_secret,
)
from .run_secrets import RunSecrets
from .stream import MAX_HOLD, StreamRedactor

__all__ = [
    "MASK",
    "MAX_HOLD",
    "HoldsCredentials",
    "RunSecrets",
    "StreamRedactor",
    "client_credentials",
    "is_mask",
    "mask_pieces",
    "redact",
    "redact_json_text",
    "redact_outcome",
    "redact_pieces",
    "redact_text",
    "redact_wire",
    "register_credentials",
    "register_secret",
    "reveal",
    "secret_names",
    "secret_values",
    "shaped_values",
]
