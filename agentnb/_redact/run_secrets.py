"""What one run masked, kept in memory only: the real values its tools run with.

What tools receive. A tool gets the real values: :class:`RunSecrets` keeps, in memory only, the arguments
each call had before masking and puts them back when the call runs (edits made at approval time win where
they changed a value). A checkpoint never holds them, so a call restored from a store whose arguments hold
the mask where a secret was cannot run: it ends with an error result that says so (the model, or a person,
calls again), instead of running the tool with ``"[REDACTED]"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from .mask import is_secret_key, redact, redact_json_text, secret_names, secret_values
from .patterns import MASK, PYDANTIC_MASK, redact_text, register_secret
from .stream import StreamRedactor

_SCALARS = frozenset({int, float, bool, type(None)})


def _plain(arguments: dict[str, Any], names: frozenset[str]) -> bool:
    """True when no value of ``arguments`` can hold a secret (masking them would change nothing).

    That is: flat numbers, booleans and nulls under keys that name neither a secret parameter nor a credential.
    """
    for k, v in arguments.items():
        if type(v) not in _SCALARS or not isinstance(k, str) or is_secret_key(k, names):
            return False
    return True


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

        ``message`` is an :class:`agentnb._messages.Message`; the parts that can carry secrets (text, calls,
        refusals) are masked, continuation data is left byte for byte.
        """
        for p in message.parts:
            if getattr(p, "kind", "") == "tool_call" and p.arguments and not _plain(p.arguments, self.names(p.name)):
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
                if p.arguments is not None and _plain(p.arguments, names):
                    raw = redact_text(p.arguments_raw)  # no value can hold a secret: only the text is read
                    if raw != p.arguments_raw:
                        new = dataclasses.replace(p, arguments_raw=raw)
                    changed = changed or new is not p
                    parts.append(new)
                    continue
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
            if value not in (MASK, PYDANTIC_MASK):
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
        return {k: (MASK if v == PYDANTIC_MASK and isinstance(k, str) and is_secret_key(k, names)
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
            if isinstance(v, str) and (v in (MASK, PYDANTIC_MASK) and (k in names or restored)):
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
