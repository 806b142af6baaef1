"""Secrets never reach a transcript, a checkpoint, a cassette, a DataFrame or a log.

Redaction happens at the source: when the driver makes an event, the fields that can carry provider
credentials (request settings and extra headers, the raw provider response, error messages, reasons) pass
through :func:`redact`. It removes

- values under keys that name credentials (``api_key``, ``authorization``, ``x-api-key``, ``x-goog-api-key``,
  ``proxy-authorization``, ``cookie``, ...);
- strings that look like provider keys or bearer tokens (``sk-...``, ``sk-ant-...``, ``AIza...``,
  ``Bearer ...``, ``key=...`` in URLs);
- any literal secret registered with :func:`register_secret` -- the model wrappers register their client's
  key, and the usual environment variables (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``,
  ``GOOGLE_API_KEY``) are registered when this module loads -- whatever its format.
"""

from __future__ import annotations

import os
import re
from typing import Any

MASK = "[REDACTED]"

_SECRET_KEYS = re.compile(
    r"^(x-)?(api[-_]?key|authorization|proxy-authorization|x-goog-api-key|cookie|set-cookie|client[-_]?secret|"
    r"access[-_]?token|refresh[-_]?token|password|secret)$",
    re.IGNORECASE,
)
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"sk-(?:ant-)?[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"AIza[0-9A-Za-z_\-]{20,}"), MASK),
    (re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/\-]+=*"), "Bearer " + MASK),
    (re.compile(r"(?i)([?&](?:api_?)?key=)[^&\s\"']+"), r"\g<1>" + MASK),
]
_literals: set[str] = set()


def register_secret(value: str | None) -> None:
    """Redact this exact string wherever it appears (ignored when empty or very short)."""
    if value and len(value) >= 8:
        _literals.add(value)


for _name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AGENTNB_CHECKPOINT_KEY"):
    register_secret(os.environ.get(_name))


def redact_text(text: str) -> str:
    """Mask secrets inside a string.

    Example:
        >>> redact_text("401: Incorrect API key provided: sk-proj-abcdefgh12345678")
        '401: Incorrect API key provided: [REDACTED]'
        >>> redact_text("GET /v1beta/models/x:generateContent?key=AIzaSyA-1234567890abcdefghij&alt=sse")
        'GET /v1beta/models/x:generateContent?key=[REDACTED]&alt=sse'
    """
    for literal in _literals:
        if literal in text:
            text = text.replace(literal, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, strings) with secrets masked; other values are returned as they are.

    Example:
        >>> redact({"extra_headers": {"Authorization": "Bearer abc.def"}, "temperature": 0})
        {'extra_headers': {'Authorization': '[REDACTED]'}, 'temperature': 0}
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and _SECRET_KEYS.match(k) and v else redact(v)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value
