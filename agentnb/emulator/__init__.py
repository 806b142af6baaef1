"""A local emulator of the four model APIs, for workshops and tests: the real SDK clients, no internet.

Theory of operation. :class:`Emulator` is an HTTP server on 127.0.0.1 (a free port chosen by the OS) in
a daemon thread. It serves

============================ =============================================================================
``url("openai")``            ``POST /chat/completions`` and ``POST /responses`` (OpenAI)
``url("anthropic")``         ``POST /v1/messages`` (Anthropic)
``url("gemini")``            ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``
============================ =============================================================================

and answers every request with the next turn of a :class:`~agentnb.ScriptedModel` script, written the way
that service writes it, whole or streamed (each provider's own SSE event names and framing; see
:mod:`agentnb.emulator._encode`). Script functions receive the conversation the client sent, read back
into canonical messages.

Before answering, it validates the request with :func:`agentnb.lint.validate` -- the same checks as
``agentnb.lint`` -- plus what only the issuer can know (are these the thinking signatures, thought
signatures and encrypted reasoning it issued? was this call preceded by a reasoning item?). The first error
is answered with that service's 400 error body and message, so a client sees what the real service would
say. Faults come from the script (``{"error": {"status": 500}}``, ``{"interrupt": True}`` for a stream cut
in the middle of the arguments) or from :meth:`Emulator.fail` (a status with ``retry-after``, a number of
times). A cut stream sends part of an event and closes the connection without the final chunk of the
chunked body, which the clients report as a broken read.

Use it as a context manager (or :meth:`~Emulator.start` / :meth:`~Emulator.stop`), from a script, a test
or a notebook cell; :attr:`Emulator.requests` logs what came in and what went out.

Example:
    >>> import agentnb as anb, openai
    >>> with Emulator([{"text": "Hello from the emulator."}]) as emu:
    ...     client = openai.OpenAI(base_url=emu.url("openai"), api_key="test")
    ...     client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}]
    ...         ).choices[0].message.content
    'Hello from the emulator.'
"""

from ._server import Emulator, Fault, Logged

__all__ = ["Emulator", "Fault", "Logged"]
