"""What a secret looks like, and :func:`redact_text`, which masks every one of them in a string.

Three recognizers, shared by every masking function of :mod:`agentnb._redact`:

- **key names** that name credentials (``api_key``, ``authorization``, ``x-api-key``, ``password``, ...),
  compared without case, with or without an ``x-`` prefix and with ``-``, ``_`` or nothing between words;
- **shapes** of provider keys and bearer tokens (``sk-...``, ``AIza...``, ``Bearer ...``, ``key=...`` in URLs),
  tried only when one search over all of them finds a candidate (most strings hold none);
- **registered literals**: any string given to :func:`register_secret` (8 characters or more), whatever its
  shape -- the usual provider environment variables when this module loads, the credentials a model declares
  (:class:`HoldsCredentials`, :func:`register_credentials`), and what :func:`client_credentials` finds on an
  SDK client. They are kept as one alternation, longest first, rebuilt when one is added.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

MASK = "[REDACTED]"

PYDANTIC_MASK = "**********"
"""What pydantic writes for a ``SecretStr`` in JSON mode; a masked secret parameter may show as this."""

KEY_NAMES = frozenset(
    prefix + base.format(sep)
    for base in ("api{}key", "authorization", "proxy-authorization", "x-goog-api-key", "cookie", "set-cookie",
                 "client{}secret", "access{}token", "refresh{}token", "auth{}token", "password", "passwd", "secret")
    for sep in ("-", "_", "")
    for prefix in ("", "x-")
)
"""Keys whose values are credentials (compared without case)."""
KEY_WORDS = "(?:" + "|".join(re.escape(k) for k in sorted(KEY_NAMES, key=len, reverse=True)) + ")"
SECRET_KEYS = re.compile(f"^{KEY_WORDS}$", re.IGNORECASE)
PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"sk-(?:ant-)?[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"AIza[0-9A-Za-z_\-]{20,}"), MASK),
    (re.compile(r"\b(?i:Bearer)\s+[A-Za-z0-9._~+/\-]+=*"), "Bearer " + MASK),
    (re.compile(r"([?&](?i:(?:api_?)?key)=)[^&\s\"']+"), r"\g<1>" + MASK),
]
_HINTS = (("sk-", False), ("AIza", False), ("bearer", True), ("key=", True))
"""What each of :data:`PATTERNS` cannot match without: as written, or (True) in ``text.lower()``.

A substring test is a memchr-fast scan, where one regex search over every shape tried each pattern at each
position (8 s for a 50 MB tool result). Exact: a case-insensitive ``Bearer`` or ``key`` matches only ASCII
letters and the Kelvin sign, and ``lower()`` maps each of them to the hint's letters.
"""
registered_literals: set[str] = set()
_literal_re: list[re.Pattern[str] | None] = [None]
"""The registered literals as one alternation (longest first), rebuilt when one is added."""
_literal_texts: list[tuple[str, ...]] = [()]
"""The same literals as a tuple (replaced whole, so a reader never iterates a set that grows)."""


def is_mask(value: object) -> bool:
    """Whether ``value`` is what a masked secret reads (``[REDACTED]``, or pydantic's ``**********``)."""
    return value == MASK or value == PYDANTIC_MASK


def register_secret(value: str | None) -> None:
    """Redact this exact string wherever it appears (ignored when empty or very short).

    Example:
        >>> register_secret("zq9-plain-credential-0001")
        >>> redact_text("401: invalid key zq9-plain-credential-0001")
        '401: invalid key [REDACTED]'
    """
    if value and len(value) >= 8 and value not in registered_literals:
        registered_literals.add(value)
        ordered = tuple(sorted(registered_literals, key=len, reverse=True))
        _literal_re[0] = re.compile("|".join(re.escape(v) for v in ordered))
        _literal_texts[0] = ordered


for _name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AGENTNB_CHECKPOINT_KEY"):
    register_secret(os.environ.get(_name))


@runtime_checkable
class HoldsCredentials(Protocol):
    """A model that declares the credentials it holds, so a run can mask them wherever they are echoed.

    Every model agentnb ships implements it (SDK models return their client's key; wrappers return their
    models' keys; offline models return nothing). Implement it on a model of your own that holds a key.
    """

    def credentials(self) -> list[str]:
        """The literal secrets this model holds (API keys, tokens)."""
        ...


def register_credentials(model: object) -> list[str]:
    """Register every credential ``model`` declares (see :class:`HoldsCredentials`); returns them.

    Example:
        >>> class Model:
        ...     def credentials(self) -> list[str]:
        ...         return ["zq9-plain-credential-0002"]
        >>> register_credentials(Model())
        ['zq9-plain-credential-0002']
        >>> redact_text("echo: zq9-plain-credential-0002")
        'echo: [REDACTED]'
    """
    if not isinstance(model, HoldsCredentials):
        return []
    found = [c for c in model.credentials() if isinstance(c, str) and c]
    for value in found:
        register_secret(value)
    return found


def client_credentials(client: object) -> list[str]:
    """The credentials an SDK client holds: its API key or token, and credential headers it sends.

    Covers ``openai`` (``api_key``), ``anthropic`` (``api_key``, ``auth_token``) and ``google-genai``
    (``client._api_client.api_key``; the ``.aio`` client keeps the same object), sync or async.

    Example:
        >>> class Client:
        ...     api_key = "zq9-plain-credential-0003"
        ...     default_headers = {"Authorization": "Bearer zq9-token-0004", "X-Title": "demo"}
        >>> client_credentials(Client())
        ['zq9-plain-credential-0003', 'Bearer zq9-token-0004', 'zq9-token-0004']
    """
    found: list[str] = []
    holders = [client, getattr(client, "_api_client", None)]  # google-genai keeps its key one level down
    for holder in holders:
        if holder is None:
            continue
        for attr in ("api_key", "auth_token", "_api_key"):
            value = getattr(holder, attr, None)
            if isinstance(value, str) and value:
                found.append(value)
        for attr in ("default_headers", "_custom_headers", "headers"):
            headers = getattr(holder, attr, None)
            if isinstance(headers, Mapping):
                for key, value in headers.items():
                    if isinstance(key, str) and isinstance(value, str) and SECRET_KEYS.match(key):
                        found.append(value)
                        scheme, _, token = value.partition(" ")
                        if token and scheme.lower() in ("bearer", "basic", "token"):
                            found.append(token)
    return list(dict.fromkeys(found))


def redact_text(text: str) -> str:
    """Mask secrets inside a string.

    Example:
        >>> redact_text("401: Incorrect API key provided: sk-proj-abcdefgh12345678")
        '401: Incorrect API key provided: [REDACTED]'
        >>> redact_text("GET /v1beta/models/x:generateContent?key=AIzaSyA-1234567890abcdefghij&alt=sse")
        'GET /v1beta/models/x:generateContent?key=[REDACTED]&alt=sse'
    """
    literals = _literal_re[0]
    if literals is not None and any(v in text for v in _literal_texts[0]):  # a substring test before the alternation
        text = literals.sub(MASK, text)
    low: str | None = None
    for (pattern, replacement), (hint, folded) in zip(PATTERNS, _HINTS, strict=True):
        if folded:
            low = text.lower() if low is None else low
            if hint not in low:
                continue
        elif hint not in text:
            continue
        text = pattern.sub(replacement, text)
        low = None  # the text changed
    return text
