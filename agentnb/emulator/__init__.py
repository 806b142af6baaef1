"""A local emulator of the four model APIs, for workshops and tests: the real SDK clients, no internet.

Theory of operation. :class:`Emulator` is an HTTP server on 127.0.0.1 (a free port chosen by the OS) in
a daemon thread, with room for 1,024 connections waiting to be accepted (so a test's 64 clients connecting at
once are all accepted at once, none reset or made to wait) and a pool of worker threads that grows to one per
open connection and reuses the idle ones. Requests are answered in parallel: a lock guards only what they
share (the faults, the script's position, the ids and signatures issued), never a script function or a wait,
so a classroom of notebooks or a batch at concurrency 64 is answered at once (:mod:`agentnb.emulator._server`).
It serves

============================ =============================================================================
``url("openai")``            ``POST /chat/completions`` and ``POST /responses`` (OpenAI)
``url("anthropic")``         ``POST /v1/messages`` (Anthropic)
``url("gemini")``            ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``
``url("ollama")``            ``POST /api/chat`` (Ollama; streams JSON lines unless ``stream: false``)
============================ =============================================================================

and answers every request with the next turn of a :class:`~agentnb.ScriptedModel` script, written the way
that service writes it, whole or streamed (each provider's own SSE event names and framing, Ollama's JSON
lines). A stream is sent as the script plays it: the headers at once, the script's ``latency`` before the first
frame and its ``chunk_delay`` before each frame, each frame flushed as one HTTP chunk, so a live view through
the official SDKs moves fragment by fragment (and a Pause acts mid-turn). A whole answer waits as the script
does when it answers whole. ``Logged.finished_at`` says when each answer's last byte left. Everything
per API comes from its ``emulator`` field (an :class:`~agentnb.providers._wireapi.Endpoint`) in
:data:`agentnb.providers.WIRE_APIS`: the routes, how a request says it streams, the encoder
(``agentnb/providers/<api>/encode.py``), the error body. Script functions receive the conversation the
client sent, read back by that API's ``parse_history`` (the importers' reader).

Before answering, it validates the request with :func:`agentnb._lint.validate` -- the same checks as
``anb.lint`` -- plus what only the issuer can know (are these the thinking signatures, thought
signatures and encrypted reasoning it issued? was this call preceded by a reasoning item?). The first error
is answered with that service's 400 error body and message, so a client sees what the real service would
say. Faults come from the script (``{"error": {"status": 500}}``, ``{"interrupt": True}`` for a stream cut
in the middle of the arguments) or from :meth:`Emulator.fail` (a status with ``retry-after``, a number of
times). A cut stream sends part of an event and closes the connection without the final chunk of the
chunked body, which the clients report as a broken read.

Whatever arrives is answered in the service's own error shape, never with a dropped connection or a 5xx
it would not send: a body that is not JSON, or of the wrong shape anywhere, is a 400 (the validator turns
any JSON value into findings; a malformed ``tool_choice`` or ``toolConfig`` gets the service's own message,
from each API's ``check_request``); an invalid ``Content-Length`` is a 400; a body over ``MAX_BODY_BYTES``
(32 MiB) is a 413 sent before reading it, and the connection is closed; a client silent for
``READ_TIMEOUT`` seconds is answered 408 (or dropped, before its request line); a wrong path is a 404 and
a wrong method a 405. The shapes the services tolerate are accepted (Gemini's ``tools`` as one object,
snake_case or camelCase names, unknown fields). Continuation data it did not issue (a real
service's signatures and encrypted reasoning, which only that service can verify) is accepted, so traffic
recorded from the real services replays (see ``tests/test_conformance.py``); what it issued is verified
against the content it was issued for. ``Emulator(strict_signatures=True)`` refuses what it did not issue
too (Gemini's placeholders excepted); ``verify_signatures=False`` checks nothing.

Use it as a context manager (or :meth:`~Emulator.start` / :meth:`~Emulator.stop`), from a script, a test
or a notebook cell; :attr:`Emulator.requests` logs what came in and what went out (the last ``log_size``
requests, 1,000 by default).

Example:
    >>> import agentnb as anb, openai
    >>> with Emulator([{"text": "Hello from the emulator."}]) as emu:
    ...     client = openai.OpenAI(base_url=emu.url("openai"), api_key="test")
    ...     client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}]
    ...         ).choices[0].message.content
    'Hello from the emulator.'
"""

from ._records import Fault, Logged
from ._server import Emulator

__all__ = ["Emulator", "Fault", "Logged"]
