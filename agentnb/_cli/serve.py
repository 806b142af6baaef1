"""``agentnb emulator``: the local emulator of the model APIs as a foreground server.

It prints each wire API's base URL and the environment variable its official SDK reads it from, then
serves until SIGINT or SIGTERM, when it closes its port and exits 0. :class:`StopSignals` is the foreground
loop ``agentnb view`` uses too: the signals are caught before the URLs are printed, the server runs in its
thread and the main thread waits for a signal, so a signal never lands in the middle of a request's handler.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import click

from ..emulator import Emulator
from ..providers._scripted import ScriptedModel
from ..stories import names as story_names
from ._common import EXIT_CODES_HELP, Exit, emit_json, refusal, reports, say, stderr

SDK_ENV = (
    # (Emulator.url name, wire APIs served there, the variable the official SDK reads its base URL from)
    ("openai", "openai_chat, openai_responses", "OPENAI_BASE_URL"),
    ("anthropic", "anthropic", "ANTHROPIC_BASE_URL"),
    ("gemini", "gemini", "GOOGLE_GEMINI_BASE_URL"),
    ("ollama", "ollama", "OLLAMA_HOST"),
)
"""Where each SDK looks: openai and anthropic read ``*_BASE_URL``; google-genai ``GOOGLE_GEMINI_BASE_URL``
(google/genai/_base_url.py); ollama ``OLLAMA_HOST`` (ollama/_client.py)."""


class StopSignals:
    """SIGINT and SIGTERM, caught from now on (before the URL is printed, so none can be missed)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.previous = {s: signal.signal(s, self._caught) for s in (signal.SIGINT, signal.SIGTERM)}

    def _caught(self, signum: int, frame: FrameType | None) -> None:
        self.done.set()

    def wait_then(self, stop: Callable[[], None]) -> None:
        """Wait for a signal (the server serves in its own thread), then call ``stop`` and restore the handlers."""
        try:
            while not self.done.wait(0.5):
                pass
        finally:
            stop()
            self.restore()

    def restore(self) -> None:
        """Put the previous handlers back."""
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def _model(script: str | None, story: str | None) -> ScriptedModel | None:
    if script is not None and story is not None:
        raise refusal("give --script or --story, not both", Exit.USAGE)
    if story is not None:
        return ScriptedModel.story(story)
    if script is None:
        return None
    path = Path(script)
    if not path.is_file():
        raise refusal(f"{script}: no such script file", Exit.NOT_FOUND)
    try:
        return ScriptedModel.from_json(path)
    except ValueError as exc:  # JSON errors are ValueErrors too
        raise refusal(f"{script}: not a script (a JSON list of turns, or {{\"script\": [...]}}): {exc}",
                      Exit.USAGE) from exc
    except (KeyError, TypeError) as exc:
        raise refusal(f"{script}: not a script (a JSON list of turns, or {{\"script\": [...]}}): {exc!r}",
                      Exit.USAGE) from exc


@click.command(epilog=EXIT_CODES_HELP, short_help="Serve the model APIs on 127.0.0.1 for the SDKs.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="The port on 127.0.0.1 (0: a free one).")
@click.option("--script", type=click.Path(dir_okay=False), default=None,
              help="The turns to answer with: a JSON list, as ScriptedModel.from_json reads.")
@click.option("--story", type=click.Choice(story_names()), default=None, help="A story's script instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the URLs as one JSON object (then serve).")
@reports
def emulator(port: int, script: str | None, story: str | None, as_json: bool) -> None:
    """Serve the model APIs on 127.0.0.1 for the official SDKs, until Ctrl-C or SIGTERM (then exit 0).

    Each request is answered with the next turn of the script, as that service writes it (whole or
    streamed), after validating it as the service would (a 400 in its shape). Without a script, every
    request is answered with an error saying the script has no turn.

    \b
    Examples:
      agentnb emulator --story weather
      agentnb emulator --port 8765 --script turns.json
      eval "$(agentnb emulator --port 8765 | grep ^export)"   # in another shell, with the same port
    """
    model = _model(script, story)
    emu = Emulator(model if model is not None else (), port=port)
    signals = StopSignals()
    try:
        emu.start()
    except OSError as exc:
        signals.restore()
        raise refusal(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", Exit.FAILURE) from exc
    try:
        urls = {name: emu.url(name) for name, _, _ in SDK_ENV}
        if as_json:
            emit_json({"port": emu.port, "urls": urls, "env": {env: urls[name]
                                                               for name, _, env in SDK_ENV}})
        else:
            say(f"agentnb emulator on http://127.0.0.1:{emu.port} ({_what(model)}); Ctrl-C stops it")
            for name, apis, _ in SDK_ENV:
                say(f"  {apis:<32} {urls[name]}")
            for name, _, env in SDK_ENV:
                say(f"export {env}={urls[name]}")
        sys.stdout.flush()
    except BaseException:
        emu.stop()
        signals.restore()
        raise
    signals.wait_then(emu.stop)
    stderr(f"stopped after {len(emu.requests)} request(s)")


def _what(model: ScriptedModel | None) -> str:
    return "no script" if model is None else f"{model.name}, {len(model.script)} turn(s)"
