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

Streams. A secret can arrive split over fragments (``"sk-ab"`` + ``"cdef..."``), so masking fragment by
fragment would leak it in pieces. :class:`StreamRedactor` holds back the tail of a stream that could still
become a secret (an object key that may still name a secret, the open value of a secret key, ``sk-`` and the
start of its body, a prefix of a registered literal) and releases it, masked or not, once it is decided;
ordinary arguments and text stream through unchanged. A fragment event therefore carries the decided text
(its ``length`` counts what is shown); the text still held when the turn ends is in the turn itself. A held
tail longer than :data:`MAX_HOLD` characters is masked whole and the rest of that value swallowed, so a
hostile 1 MB "key" costs linear time (``bench/redaction.py``).

What tools receive. A tool gets the real values: :class:`RunSecrets` keeps, in memory only, the arguments
each call had before masking and puts them back when the call runs (edits made at approval time win where
they changed a value). A checkpoint never holds them, so a call restored from a store whose arguments hold
the mask where a secret was cannot run: it ends with an error result that says so (the model, or a person,
calls again), instead of running the tool with ``"[REDACTED]"``.

Known limits: a secret that a JSON encoder escaped (``\"``, ``\uXXXX``) is matched by key or shape, not as
a literal; literals shorter than 8 characters are not registered (a 4-digit pin is masked under its key, but
not where a tool echoes it in free text); the idempotency key of a side-effecting call is computed from its
masked arguments, so two calls that differ only in a secret argument share it (give such tools their own
``idempotency_key=``); user prompts and reasoning parts (signed continuation data that must go back byte for
byte) are kept as written.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Protocol, TypeVar, runtime_checkable

MASK = "[REDACTED]"

_O = TypeVar("_O")

_PYDANTIC_MASK = "**********"
"""What pydantic writes for a ``SecretStr`` in JSON mode; a masked secret parameter may show as this."""

MAX_HOLD = 1024
"""The most characters a :class:`StreamRedactor` holds back before it masks them whole."""

_KEY_NAMES = frozenset(
    prefix + base.format(sep)
    for base in ("api{}key", "authorization", "proxy-authorization", "x-goog-api-key", "cookie", "set-cookie",
                 "client{}secret", "access{}token", "refresh{}token", "auth{}token", "password", "passwd", "secret")
    for sep in ("-", "_", "")
    for prefix in ("", "x-")
)
"""Keys whose values are credentials (compared without case)."""
_KEY_WORDS = "(?:" + "|".join(re.escape(k) for k in sorted(_KEY_NAMES, key=len, reverse=True)) + ")"
_SECRET_KEYS = re.compile(f"^{_KEY_WORDS}$", re.IGNORECASE)
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"sk-(?:ant-)?[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"AIza[0-9A-Za-z_\-]{20,}"), MASK),
    (re.compile(r"\b(?i:Bearer)\s+[A-Za-z0-9._~+/\-]+=*"), "Bearer " + MASK),
    (re.compile(r"([?&](?i:(?:api_?)?key)=)[^&\s\"']+"), r"\g<1>" + MASK),
]
_ANY_SHAPE = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _PATTERNS))
"""One search that tells whether any pattern may apply (most strings hold none)."""
# What an unfinished instance of each pattern looks like at the end of a stream (over-approximations: holding
# a character back too long only delays it; letting the start of a key through would leak it).
_OPEN_TAIL = re.compile(
    r"s(?:k(?:-[A-Za-z0-9_\-]*)?)?\Z"
    r"|A(?:I(?:z(?:a[0-9A-Za-z_\-]*)?)?)?\Z"
    r"|(?i:\bb(?:e(?:a(?:r(?:e(?:r(?:\s+[A-Za-z0-9._~+/\-]*=*)?)?)?)?)?)?)\Z"
    r"|(?i:[?&][a-z_]{0,7}(?:=[^&\s\"']*)?)\Z"
)
_KEY_TAIL = re.compile(r'"([A-Za-z0-9_\-]{0,64})("\s*(?::\s*)?)?\Z')
"""An object key still arriving (or just closed) at the end of a stream: held only if it may name a secret."""
_TOKEN_BODY = re.compile(r"[^\s\"'&,}\]]*")
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*')
_literals: set[str] = set()
_literal_re: list[re.Pattern[str] | None] = [None]
"""The registered literals as one alternation (longest first), rebuilt when one is added."""


def is_mask(value: object) -> bool:
    """Whether ``value`` is what a masked secret reads (``[REDACTED]``, or pydantic's ``**********``)."""
    return value == MASK or value == _PYDANTIC_MASK


def register_secret(value: str | None) -> None:
    """Redact this exact string wherever it appears (ignored when empty or very short).

    Example:
        >>> register_secret("zq9-plain-credential-0001")
        >>> redact_text("401: invalid key zq9-plain-credential-0001")
        '401: invalid key [REDACTED]'
    """
    if value and len(value) >= 8 and value not in _literals:
        _literals.add(value)
        _literal_re[0] = re.compile("|".join(re.escape(v) for v in sorted(_literals, key=len, reverse=True)))


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
                    if isinstance(key, str) and isinstance(value, str) and _SECRET_KEYS.match(key):
                        found.append(value)
                        scheme, _, token = value.partition(" ")
                        if token and scheme.lower() in ("bearer", "basic", "token"):
                            found.append(token)
    return list(dict.fromkeys(found))


# -- masking values ---------------------------------------------------------------------------------------


def redact_text(text: str) -> str:
    """Mask secrets inside a string.

    Example:
        >>> redact_text("401: Incorrect API key provided: sk-proj-abcdefgh12345678")
        '401: Incorrect API key provided: [REDACTED]'
        >>> redact_text("GET /v1beta/models/x:generateContent?key=AIzaSyA-1234567890abcdefghij&alt=sse")
        'GET /v1beta/models/x:generateContent?key=[REDACTED]&alt=sse'
    """
    literals = _literal_re[0]
    if literals is not None:
        text = literals.sub(MASK, text)
    if _ANY_SHAPE.search(text) is None:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@lru_cache(maxsize=256)
def _field_pattern(names: frozenset[str]) -> re.Pattern[str]:
    """``"<secret key>": <string, number or boolean>`` in JSON text, for credential-named keys and ``names``."""
    extra = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    keys = f"{_KEY_WORDS}|{extra}" if extra else _KEY_WORDS
    return re.compile(rf'("(?i:{keys})"\s*:\s*)("(?:[^"\\]|\\.)*"|-?\d[\d.eE+\-]*|true|false)')


@lru_cache(maxsize=256)
def _key_prefixes(names: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """Secret key names (lower case) and every prefix of them."""
    full = frozenset({*_KEY_NAMES, *(n.lower() for n in names)})
    return full, frozenset(n[:i] for n in full for i in range(len(n) + 1))


@lru_cache(maxsize=256)
def _open_field(names: frozenset[str]) -> re.Pattern[str]:
    """An unfinished value of a secret key at the end of a stream (a string, a number, ``true``/``false``)."""
    extra = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    keys = f"{_KEY_WORDS}|{extra}" if extra else _KEY_WORDS
    return re.compile(rf'"(?i:{keys})"\s*:\s*(?:"(?:[^"\\]|\\.)*\\?|-?[\d.eE+\-]*|[a-z]*)\Z')


def redact_json_text(text: str, names: frozenset[str] = frozenset()) -> str:
    """Mask secrets inside JSON text (call arguments as the model wrote them), keeping its layout.

    Besides :func:`redact_text`, the value (a string, number or boolean) of every credential-named key and every
    key in ``names`` is masked, as the string ``"[REDACTED]"``; the text stays as close to what was received as
    masking allows (malformed JSON included).

    Example:
        >>> redact_json_text('{"user": "ann", "api_key": "zq9 plain", "pin": 4821}', frozenset({"pin"}))
        '{"user": "ann", "api_key": "[REDACTED]", "pin": "[REDACTED]"}'
    """
    if '"' in text:
        text = _field_pattern(names).sub(_mask_field, text)
    return redact_text(text)


def _mask_field(m: re.Match[str]) -> str:
    return m.group(0) if m.group(2) == '""' else f'{m.group(1)}"{MASK}"'


def redact(value: Any, names: frozenset[str] = frozenset()) -> Any:
    """A copy of ``value`` (dicts, lists, strings) with secrets masked; other values are returned as they are.

    ``names`` are more keys whose values are secret (a tool's secret parameters), besides the keys that name
    credentials.

    Example:
        >>> redact({"extra_headers": {"Authorization": "Bearer abc.def"}, "temperature": 0})
        {'extra_headers': {'Authorization': '[REDACTED]'}, 'temperature': 0}
        >>> redact({"user": "ann", "token": "t0p"}, frozenset({"token"}))
        {'user': 'ann', 'token': '[REDACTED]'}
    """
    if isinstance(value, str):
        return redact_json_text(value, names) if names and '"' in value else redact_text(value)
    if isinstance(value, dict):  # a secret key's scalar value is masked; a container under it (a schema) is read
        return {
            k: (MASK if isinstance(k, str) and _is_secret_key(k, names) and v not in (None, "")
                and not isinstance(v, dict | list | tuple) else redact(v, names))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact(v, names) for v in value)
    return value


def _is_secret_key(key: str, names: frozenset[str]) -> bool:
    return key in names or _credential_key(key)


@lru_cache(maxsize=4096)
def _credential_key(key: str) -> bool:
    return bool(_SECRET_KEYS.match(key))


def secret_values(value: Any, names: frozenset[str]) -> list[str]:
    """The string values under secret keys anywhere in ``value`` (what a call's secret arguments were).

    Example:
        >>> secret_values({"q": "x", "auth": {"token": "abc"}}, frozenset({"token"}))
        ['abc']
    """
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and _is_secret_key(k, names) and isinstance(v, str):
                found.append(v)
            else:
                found.extend(secret_values(v, names))
    elif isinstance(value, list | tuple):
        for v in value:
            found.extend(secret_values(v, names))
    return found


def secret_names(schema: Mapping[str, Any]) -> frozenset[str]:
    """The property names a JSON schema marks secret (``writeOnly``, or ``format: password``), at any depth.

    pydantic writes both for ``SecretStr``; ``@anb.tool(secret=[...])`` marks its parameters ``writeOnly``.

    Example:
        >>> import pydantic
        >>> Args = pydantic.create_model("Args", user=(str, ...), api_key=(pydantic.SecretStr, ...))
        >>> sorted(secret_names(Args.model_json_schema()))
        ['api_key']
    """
    found: set[str] = set()
    defs = schema.get("$defs") or {}

    def walk(node: Any, seen: frozenset[str]) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, seen)
            return
        if not isinstance(node, Mapping):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen and name in defs:
                walk(defs[name], seen | {name})
        props = node.get("properties")
        if isinstance(props, Mapping):
            for pname, sub in props.items():
                if isinstance(sub, Mapping) and _is_secret_schema(sub, defs):
                    found.add(pname)
        for key in ("properties", "items", "anyOf", "oneOf", "allOf", "additionalProperties", "prefixItems"):
            child = node.get(key)
            if isinstance(child, Mapping) and key == "properties":
                for sub in child.values():
                    walk(sub, seen)
            elif child is not None:
                walk(child, seen)

    walk(schema, frozenset())
    return frozenset(found)


def _is_secret_schema(node: Mapping[str, Any], defs: Mapping[str, Any]) -> bool:
    if node.get("writeOnly") is True or node.get("format") == "password":
        return True
    for key in ("anyOf", "oneOf", "allOf"):  # Optional[SecretStr] and friends
        options = node.get(key)
        if isinstance(options, list) and any(isinstance(o, Mapping) and _is_secret_schema(o, defs) for o in options):
            return True
    return False


def reveal(value: Any) -> Any:
    """JSON-safe data with ``SecretStr``/``SecretBytes`` values written out whole (pydantic writes ``**********``).

    For the driver's own copies of validated arguments: events mask them again before they exist, while the
    copy a tool runs with needs the value.

    Example:
        >>> from pydantic import SecretStr
        >>> reveal({"pin": SecretStr("1234"), "n": [1, SecretStr("x")]})
        {'pin': '1234', 'n': [1, 'x']}
    """
    from pydantic import SecretBytes, SecretStr
    from pydantic_core import to_jsonable_python

    def walk(v: Any) -> Any:
        if isinstance(v, SecretStr):
            return v.get_secret_value()
        if isinstance(v, SecretBytes):
            return v.get_secret_value().decode("utf-8", "replace")
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple | set | frozenset):
            return [walk(x) for x in v]
        return v

    return to_jsonable_python(walk(value), fallback=repr)


def redact_outcome(outcome: _O) -> _O:
    """A tool's outcome with secrets masked in its content, audit value and error message (any status).

    ``outcome`` is a dataclass with ``content``, ``value`` and ``error_message`` fields
    (:class:`agentnb.tools.Outcome`).
    """
    out: Any = outcome
    content = redact_text(out.content)
    value = redact(out.value)
    message = redact_text(out.error_message) if out.error_message else out.error_message
    if content == out.content and value == out.value and message == out.error_message:
        return outcome
    replaced: _O = dataclasses.replace(out, content=content, value=value, error_message=message)
    return replaced


def mask_pieces(text: str, secrets: Iterable[str], min_length: int = 4) -> str:
    """Mask whole secrets and the pieces of them a split stream event can hold.

    A streamed event (an SDK's raw chunk) can hold only part of a secret: the end of the event may be the
    start of a secret, its start the end of one, or the whole event a piece from the middle. Each such piece
    of ``min_length`` characters or more is masked.

    Example:
        >>> mask_pieces('{"api_key": "zq9-pla', ["zq9-plain-credential-7731"])
        '{"api_key": "[REDACTED]'
        >>> mask_pieces('in-credential-7731"}', ["zq9-plain-credential-7731"])
        '[REDACTED]"}'
    """
    for secret in secrets:
        if len(secret) < min_length:
            continue
        if secret in text:
            text = text.replace(secret, MASK)
            continue
        if len(text) >= min_length and text in secret:
            return MASK
        tail = _overlap(text, secret)
        if tail >= min_length:
            text = text[: len(text) - tail] + MASK
        head = _overlap(secret, text)
        if head >= min_length:
            text = MASK + text[head:]
    return text


def shaped_values(text: str) -> list[str]:
    """The secrets in ``text`` found by their shape (keys, tokens), as they appear.

    Example:
        >>> shaped_values("call https://x.test/?key=AIzaSyA-1234567890abcdefghij with Bearer abc.def")
        ['AIzaSyA-1234567890abcdefghij', 'abc.def']
    """
    found: list[str] = []
    for pattern, _ in _PATTERNS:
        for m in pattern.finditer(text):
            value = m.group(0)[len(m.group(1)):] if pattern.groups else m.group(0)
            if value.lower().startswith("bearer"):
                value = value[6:].strip()
            found.append(value)
    return list(dict.fromkeys(v for v in found if v))


def redact_pieces(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with every string passed through :func:`mask_pieces` (registered secrets and ``secrets``).

    For events a stream was cut into (an SDK's raw chunks), where one string may hold only part of a secret.
    """
    known = sorted({*_literals, *secrets}, key=len, reverse=True)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return mask_pieces(redact_text(v), known)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return type(v)(walk(x) for x in v)
        return v

    return walk(value)


def _overlap(a: str, b: str) -> int:
    """The length of the longest suffix of ``a`` that is a prefix of ``b`` (shorter than ``b``)."""
    if not a or not b:
        return 0
    first = b[0]
    i = a.find(first, max(0, len(a) - len(b) + 1))
    while i != -1:  # the earliest start is the longest overlap
        if b.startswith(a[i:]):
            return len(a) - i
        i = a.find(first, i + 1)
    return 0


# -- streams ------------------------------------------------------------------------------------------------


class StreamRedactor:
    """Masks secrets in a stream of text fragments, holding back what could still become one.

    Args:
        names: keys whose JSON string values are secret (a tool's secret parameters), besides the keys that
            name credentials.

    Example:
        >>> r = StreamRedactor(frozenset({"token"}))
        >>> [r.feed(f) for f in ['{"q": "hi", "tok', 'en": "abc', 'def", "n": 1}']]
        ['{"q": "hi", ', '', '"token": "[REDACTED]", "n": 1}']
        >>> r = StreamRedactor()
        >>> "".join(r.feed(f) for f in ["use sk-ab", "cdefgh1234", " now"])
        'use [REDACTED] now'
    """

    __slots__ = ("_held", "_names", "_prev", "_swallow")

    def __init__(self, names: frozenset[str] = frozenset()) -> None:
        self._held = ""
        self._prev = ""
        """The last non-blank character released (tells a key's quote from a value's)."""
        self._names = names
        self._swallow: str | None = None
        """``"string"`` or ``"token"`` while the rest of an over-long secret is dropped."""

    @property
    def held(self) -> str:
        """The text received but not released yet (it may still become a secret)."""
        return self._held

    def _key_cut(self, text: str, cut: int) -> int:
        """Hold an object key at the end of the stream while it may still be a secret key."""
        m = _KEY_TAIL.search(text)
        if m is None or m.start() >= cut:
            return cut
        before = text[: m.start()].rstrip()
        prev = before[-1] if before else self._prev
        if prev not in ("{", ",", ""):  # after ':' or '[' the quote opens a value, not a key
            return cut
        names, prefixes = _key_prefixes(self._names)
        name = m.group(1).lower()
        if (name in names) if m.group(2) else (name in prefixes):
            return m.start()
        return cut

    def feed(self, fragment: str) -> str:
        """Take the next fragment; return the text now decided, masked (possibly empty)."""
        text = self._held + fragment
        if self._swallow is not None:
            text = self._skip(text)
            if self._swallow is not None:
                return ""
        cut = self._cut(text)
        if len(text) - cut > MAX_HOLD:
            return self._overflow(text, cut)
        ready, self._held = text[:cut], text[cut:]
        if not ready:
            return ""
        last = ready.rstrip()
        if last:
            self._prev = last[-1]
        return redact_json_text(ready, self._names)

    def _cut(self, text: str) -> int:
        """Where the undecided tail of ``text`` begins (``len(text)`` when all of it is decided)."""
        cut = len(text)
        m = _OPEN_TAIL.search(text)
        if m is not None:
            cut = m.start()
        if '"' in text:
            cut = self._key_cut(text, cut)
        if '"' in text:
            m = _open_field(self._names).search(text)
            if m is not None:
                cut = min(cut, m.start())
        for literal in _literals:
            start = max(0, len(text) - len(literal) + 1)
            pos = text.find(literal[0], start)
            while pos != -1 and pos < cut:
                if literal.startswith(text[pos:]):
                    cut = pos
                    break
                pos = text.find(literal[0], pos + 1)
        # A complete match that crosses the cut must stay whole: hold it back from its start.
        head = text[:cut]
        if cut < len(text):
            for pattern, _ in _PATTERNS:
                for m in pattern.finditer(text, max(0, cut - 512)):
                    if m.start() < cut < m.end():
                        cut = m.start()
            if '"' in head:
                for m in _field_pattern(self._names).finditer(text, max(0, cut - MAX_HOLD)):
                    if m.start() < cut < m.end():
                        cut = m.start()
        return cut

    def _overflow(self, text: str, cut: int) -> str:
        """The held tail grew past MAX_HOLD: release what is decided, mask the tail, drop the rest of it."""
        tail = text[cut:]
        field = _open_field(self._names).match(tail)
        prefix = redact_json_text(text[:cut], self._names)
        opener = re.match(r'"[^"]*"\s*:\s*"', tail) if field is not None else None
        if opener is not None:
            self._held, self._swallow = "", "string"
            return prefix + opener.group(0) + MASK
        self._held, self._swallow = "", "token"
        return prefix + MASK

    def _skip(self, text: str) -> str:
        """Drop the rest of a swallowed value; what follows it is processed as usual."""
        if self._swallow == "string":
            end = _STRING_BODY.match(text)
            assert end is not None
            stop = end.end()
            if stop >= len(text) or text[stop] == "\\":
                self._held = text[stop:]  # a trailing backslash escapes the next fragment's first character
                return ""
        else:
            end = _TOKEN_BODY.match(text)
            assert end is not None
            stop = end.end()
            if stop >= len(text):
                self._held = ""
                return ""
        self._swallow = None
        self._held = ""
        return text[stop:]


# -- what a run keeps --------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Masked:
    masked: dict[str, Any]
    real: dict[str, Any]


class RunSecrets:
    """What one run masked, kept in memory only, so that its tools get the real values.

    The driver hands it each event's fields before the event is made (:meth:`turn`, :meth:`fragment`,
    :meth:`arguments`) and asks it for a call's real arguments when the call runs (:meth:`unmask`).

    Args:
        tools: ``{tool name: secret parameter names}`` (see :func:`secret_names`).
    """

    def __init__(self, tools: Mapping[str, frozenset[str]]) -> None:
        self.tools = dict(tools)
        self._all = frozenset().union(*self.tools.values()) if self.tools else frozenset()
        self._calls: dict[str, _Masked] = {}
        self._seen: set[str] = set()
        self._streams: dict[object, StreamRedactor] = {}

    @classmethod
    def for_tools(cls, tools: Iterable[Any]) -> RunSecrets:
        """From tools that have ``name`` and ``parameters`` (a JSON schema)."""
        return cls({t.name: secret_names(t.parameters) for t in tools})

    def names(self, tool: str | None) -> frozenset[str]:
        """The secret parameter names of ``tool`` (all tools' when unknown: the name may be wrong)."""
        found = self.tools.get(tool or "")
        return self._all if found is None else found

    # -- events -----------------------------------------------------------------------------------------

    def restart_streams(self) -> None:
        """A new request (or a retry) begins: fragments start again."""
        self._streams.clear()

    def fragment(self, key: object, tool: str | None, fragment: str) -> str:
        """A streamed fragment (of a call's arguments, or of the text), masked as decided so far."""
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = StreamRedactor(self.names(tool) if tool is not None else self._all)
        return stream.feed(fragment)

    def turn(self, message: Any) -> Any:
        """The assistant message with secrets masked; the real arguments of each call are kept here.

        ``message`` is an :class:`agentnb.messages.Message`; the parts that can carry secrets (text, calls,
        refusals) are masked, continuation data is left byte for byte.
        """
        for p in message.parts:
            if getattr(p, "kind", "") == "tool_call" and p.arguments:
                for value in secret_values(p.arguments, self.names(p.name)):
                    register_secret(value)
        parts = []
        changed = False
        for p in message.parts:
            kind = getattr(p, "kind", "")
            new = p
            if kind in ("text", "refusal"):
                text = redact_text(p.text)
                if text != p.text:
                    new = dataclasses.replace(p, text=text)
            elif kind == "tool_call":
                self._seen.add(p.call_id)
                names = self.names(p.name)
                args = redact(p.arguments, names) if p.arguments is not None else None
                # parsed arguments with nothing under a secret key: the raw text can hold a secret only by shape
                plain = args is not None and args == p.arguments
                raw = redact_text(p.arguments_raw) if plain else redact_json_text(p.arguments_raw, names)
                if raw != p.arguments_raw or args != p.arguments:
                    new = dataclasses.replace(p, arguments_raw=raw, arguments=args)
                    if args is not None and args != p.arguments:
                        self._calls[p.call_id] = _Masked(masked=args, real=p.arguments)
            changed = changed or new is not p
            parts.append(new)
        return dataclasses.replace(message, parts=tuple(parts)) if changed else message

    def arguments(self, call_id: str, tool: str, arguments: dict[str, Any] | None, *,
                  edited: bool = True) -> dict[str, Any] | None:
        """Validated or edited arguments as an event keeps them: secret parameters read ``[REDACTED]``.

        What the call will run with is kept here: the values a person typed at approval time, and, where the
        arguments still hold the mask, the real values the model sent. ``edited=False`` says the arguments were
        derived from the call's masked ones (validation), so they hold nothing new.
        """
        if arguments is None:
            return None
        names = self.names(tool)
        kept = self._calls.get(call_id)
        if kept is None and not names:  # the common case: nothing of this call was masked, no secret parameter
            plain: dict[str, Any] = redact(arguments) if edited else arguments
            return plain
        now = _normalize(arguments, names)
        real = _restore(now, kept.masked, kept.real) if kept is not None else now
        for value in secret_values(real, names):
            if value not in (MASK, _PYDANTIC_MASK):
                register_secret(value)
        masked: dict[str, Any] = redact(real, names)
        if masked != real:
            self._calls[call_id] = _Masked(masked=masked, real=real)
        else:
            self._calls.pop(call_id, None)
        return masked

    # -- execution --------------------------------------------------------------------------------------

    def unmask(self, call_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | str:
        """The arguments a call runs with: its real secrets put back, or why they cannot be.

        Where the current (masked) arguments still hold what was masked, the real value comes back; where a
        person edited a value at approval time, the edit wins. A string is returned when a secret parameter
        holds the mask and its real value is not known here (the run was resumed from a store, which never
        holds secrets): the call must not run with the mask in place of the secret.
        """
        kept = self._calls.get(call_id)
        names = self.names(tool)
        if kept is None and not names and call_id in self._seen:
            return arguments  # seen whole in this process, nothing masked: nothing to put back
        real = _restore(arguments, kept.masked, kept.real) if kept is not None else arguments
        masked = _masked_paths(real, names, call_id not in self._seen)
        if masked:
            where = ", ".join(masked)
            return (f"The secret argument(s) {where} of this call are not available: secrets are never written to "
                    "the run's store, and this call was restored from it (or edited to the masked value). "
                    f"Call '{tool}' again with the value(s).")
        return real


def _restore(now: Any, masked: Any, real: Any) -> Any:
    """``now`` with every part still equal to its masked form replaced by the real value."""
    if now == masked:
        return real
    if isinstance(now, dict) and isinstance(masked, dict) and isinstance(real, dict):
        return {k: (_restore(v, masked[k], real[k]) if k in masked and k in real else v) for k, v in now.items()}
    if isinstance(now, list) and isinstance(masked, list) and isinstance(real, list):
        return [_restore(v, masked[i], real[i]) if i < len(masked) and i < len(real) else v for i, v in enumerate(now)]
    return now


def _normalize(value: Any, names: frozenset[str]) -> Any:
    """A ``SecretStr`` dumped by pydantic reads ``**********``: take it for the mask, which it stands for."""
    if isinstance(value, dict):
        return {k: (MASK if v == _PYDANTIC_MASK and isinstance(k, str) and _is_secret_key(k, names)
                    else _normalize(v, names)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v, names) for v in value]
    return value


def _masked_paths(value: Any, names: frozenset[str], restored: bool, path: str = "") -> list[str]:
    """Where ``value`` still holds a mask that stands for a secret it no longer has."""
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            if isinstance(v, str) and (v in (MASK, _PYDANTIC_MASK) and (k in names or restored)):
                found.append(repr(where))
            elif restored and isinstance(v, str) and MASK in v:
                found.append(repr(where))
            else:
                found.extend(_masked_paths(v, names, restored, where))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if restored and isinstance(v, str) and MASK in v:
                found.append(repr(f"{path}[{i}]"))
            else:
                found.extend(_masked_paths(v, names, restored, f"{path}[{i}]"))
    return found
