"""Masking values: JSON text, nested data, tool outcomes, and the pieces of a split stream event.

Each function builds on :func:`~agentnb._redact.patterns.redact_text`. JSON text (call arguments as the model
wrote them) is masked in place, keeping its layout, under credential-named keys and a tool's **secret
parameters** -- the names :func:`secret_names` reads from its JSON schema (``writeOnly`` or
``format: password``); nested data is copied with the scalar values under such keys masked. An event an SDK
streamed (a raw chunk) may hold only part of a secret, so :func:`mask_pieces` also masks the start, the end or
a middle piece of a known secret. :func:`reveal` goes the other way: it writes ``SecretStr`` values out whole,
for the driver's own copy of the arguments a tool runs with.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from .patterns import KEY_WORDS, MASK, PATTERNS, SECRET_KEYS, redact_text, registered_literals

_O = TypeVar("_O")


@lru_cache(maxsize=256)
def field_pattern(names: frozenset[str]) -> re.Pattern[str]:
    """``"<secret key>": <string, number or boolean>`` in JSON text, for credential-named keys and ``names``."""
    extra = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    keys = f"{KEY_WORDS}|{extra}" if extra else KEY_WORDS
    return re.compile(rf'("(?i:{keys})"\s*:\s*)("(?:[^"\\]|\\.)*"|-?\d[\d.eE+\-]*|true|false)')


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
        text = field_pattern(names).sub(_mask_field, text)
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
            k: (MASK if isinstance(k, str) and is_secret_key(k, names) and v not in (None, "")
                and not isinstance(v, dict | list | tuple) else redact(v, names))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact(v, names) for v in value)
    return value


def is_secret_key(key: str, names: frozenset[str]) -> bool:
    return key in names or _credential_key(key)


@lru_cache(maxsize=4096)
def _credential_key(key: str) -> bool:
    return bool(SECRET_KEYS.match(key))


def secret_values(value: Any, names: frozenset[str]) -> list[str]:
    """The string values under secret keys anywhere in ``value`` (what a call's secret arguments were).

    Example:
        >>> secret_values({"q": "x", "auth": {"token": "abc"}}, frozenset({"token"}))
        ['abc']
    """
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and is_secret_key(k, names) and isinstance(v, str):
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
    for pattern, _ in PATTERNS:
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
    known = sorted({*registered_literals, *secrets}, key=len, reverse=True)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return mask_pieces(redact_text(v), known)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return type(v)(walk(x) for x in v)
        return v

    return walk(value)


def redact_wire(wire: dict[str, Any], names: frozenset[str] = frozenset(), texts: Iterable[str] = (), *,
                split: bool = True) -> dict[str, Any]:
    """A copy of a turn's HTTP capture (``ModelTurn.wire``) with secrets masked, the stream's pieces included.

    Everything goes through :func:`redact` (credential keys, ``names``, shapes, registered literals). When the
    turn held a secret (``split``: masking its message changed it, or ``texts`` -- the turn's text and
    arguments, whole -- hold a key-shaped value), each JSON string of each stream frame, which may hold only a
    piece of it, also goes through :func:`mask_pieces` (the registered literals and those shaped values).

    Example:
        >>> wire = {"frames": [[1.0, 'data: {"d": "key sk-live-9f8e7"}'], [2.0, 'data: {"d": "d6c5b4a3"}']]}
        >>> redact_wire(wire, texts=["key sk-live-9f8e7d6c5b4a3"])["frames"]
        [[1.0, 'data: {"d": "key [REDACTED]"}'], [2.0, 'data: {"d": "[REDACTED]"}']]
    """
    out: dict[str, Any] = redact(wire, names)
    for key in ("request_headers", "response_headers"):  # "Bearer [REDACTED]" keeps its scheme (for curl)
        headers = wire.get(key)
        if isinstance(headers, dict):
            out[key] = {h: v if isinstance(v, str) and v.endswith(" " + MASK) else m
                        for (h, v), m in zip(headers.items(), out[key].values(), strict=True)}
    frames = out.get("frames")
    shaped = [v for t in texts for v in shaped_values(t)]
    if frames and (split or shaped):
        known = sorted({*registered_literals, *shaped}, key=len, reverse=True)

        def pieces(m: re.Match[str]) -> str:
            return '"' + mask_pieces(m.group(1), known) + '"'

        # a frame is SSE or JSON-lines text: each JSON string in it may be a fragment of a split secret
        out["frames"] = [[ms, _JSON_STRING.sub(pieces, str(text))] for ms, text in frames]
    return out


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


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
