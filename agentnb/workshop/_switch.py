"""The provider switch of the course: offline by default, a real model with one line when a key is there.

``course_model(offline)`` returns the offline model unless a provider is chosen, either by the
``AGENTNB_PROVIDER`` environment variable (set it before starting Jupyter) or by ``provider=`` in the call:

- ``""``, ``"offline"``, ``"scripted"``: the offline model (the default);
- ``"openai:gpt-4o-mini"``, ``"anthropic:claude-3-5-haiku-latest"``, ``"gemini:gemini-2.5-flash"`` (any
  ``provider:model`` that :func:`agentnb.model` understands): the real model, when its key is in the
  environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``);
- ``"replay:path/to/cassette.jsonl"``: a cassette recorded earlier, played back offline.

Whenever the choice cannot be honoured (no key, no SDK, no such provider) the switch says why in one line
and falls back to the offline model, so a notebook never stops on it. With ``AGENTNB_RECORD=<folder>`` (or
``record=``), a real model is wrapped in a :class:`~agentnb.Recorder` that writes a cassette there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..providers._factory import model
from ..providers._registry import WIRE_APIS
from ..providers._scripted import ScriptedModel
from ._report import describe_exception

__all__ = ["KEY_VARIABLES", "course_model"]

KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    prefix: api.api_key_env if api.needs_key else () for api in WIRE_APIS.values() for prefix in api.prefixes}
"""The environment variables that hold the key, for each prefix of :func:`agentnb.model` (from the registry);
empty for a provider that needs none (a local Ollama server)."""

_OFFLINE = ("", "offline", "scripted")


def course_model(
    offline: ScriptedModel | str,
    *,
    provider: str | None = None,
    record: str | Path | None = None,
    name: str | None = None,
    quiet: bool = False,
    **options: Any,
) -> Any:
    """The model a course notebook uses: ``offline`` unless a real provider (or a cassette) is chosen.

    Args:
        offline: the offline model, or the name of a story (``"weather"``, ``"refund"``, ...).
        provider: ``"openai:gpt-4o-mini"``, ``"replay:cassette.jsonl"``, ``"offline"``; default: the
            ``AGENTNB_PROVIDER`` environment variable.
        record: a folder: record the real model's answers into ``<folder>/<name>.jsonl``; default: the
            ``AGENTNB_RECORD`` environment variable.
        name: the cassette's file name when recording (default: the story name, or ``"run"``).
        quiet: do not print the one line that says which model is used.
        options: passed to the offline story (``stream=True``, ...) or to :func:`agentnb.model`.

    Example:
        >>> course_model("weather", provider="offline")
        model: offline ScriptedModel ('weather' story). For a real model: AGENTNB_PROVIDER=openai:gpt-4o-mini
        ScriptedModel(2 turns, stream=False)
    """
    spec = (provider if provider is not None else os.environ.get("AGENTNB_PROVIDER", "")).strip()
    story = offline if isinstance(offline, str) else None
    label = f"offline ScriptedModel ({story!r} story)" if story else "offline ScriptedModel"

    def fallback(why: str | None) -> ScriptedModel:
        model = ScriptedModel.story(offline, **options) if isinstance(offline, str) else offline
        if not quiet:
            tail = "For a real model: AGENTNB_PROVIDER=openai:gpt-4o-mini" if why is None else why
            print(f"model: {label}. {tail}")
        return model

    if spec.lower() in _OFFLINE:
        return fallback(None)
    kind, sep, rest = spec.partition(":")
    kind = kind.lower()
    if not sep or not rest:
        return fallback(f"AGENTNB_PROVIDER={spec!r} is not 'provider:model' (e.g. 'openai:gpt-4o-mini'): "
                        "using the offline model")
    if kind == "replay":
        path = Path(rest).expanduser()
        try:
            replayed = ScriptedModel.replay(path)
        except (OSError, ValueError) as exc:
            return fallback(f"cannot replay {path} ({describe_exception(exc)}): using the offline model")
        if not quiet:
            turns = len(getattr(replayed, "recorded", []))
            print(f"model: replaying {path.name} offline ({replayed.provider}:{replayed.name}, {turns} turns)")
        return replayed
    real, why = _real_model(spec, kind, options)
    if real is None:
        return fallback(why)
    folder = record if record is not None else os.environ.get("AGENTNB_RECORD") or None
    if folder is not None:
        from .._recorder import Recorder

        path = Path(folder) / f"{name or story or 'run'}.jsonl"
        real = Recorder(real, path)
        why = f"recording into {path}"
    if not quiet:
        print(f"model: {spec} ({why})")
    return real


def _real_model(spec: str, kind: str, options: dict[str, Any]) -> tuple[Any, str]:
    """The provider model for ``spec`` and a few words about it, or None and why it cannot be made."""
    keys = KEY_VARIABLES.get(kind)
    if keys is None:
        known = ", ".join([*KEY_VARIABLES, "replay"])
        return None, f"unknown provider {kind!r} (known: {known}): using the offline model"
    if keys and not any(os.environ.get(k) for k in keys):
        return None, f"no {' or '.join(keys)} in the environment: using the offline model"
    try:
        return model(spec, **options), "a real model: answers will differ from the offline script"
    except Exception as exc:  # a missing SDK, a bad model name: say it, stay usable
        return None, f"could not make {spec} ({describe_exception(exc)}): using the offline model"
