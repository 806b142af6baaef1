"""``anb.scanner``: the one name that makes scanners -- the decorator, the question, the built-ins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from ._ask import ask
from ._builtin import builtins, costly_turns, ignored_errors, refusals, repeated_calls, slow_turns, ungrounded_arguments
from ._core import Over, Scanner
from ._injection import injection


class ScannerKit:
    """``anb.scanner``: make a scanner from a function (a decorator), ask a model a question, or take a built-in.

    ``@anb.scanner`` (bare, or with ``name``, ``version``, ``over``) makes a :class:`Scanner`;
    ``anb.scanner.ask(question, model=...)`` asks a model about each run, with a typed answer; the built-ins
    (``ignored_errors()``, ``repeated_calls()``, ``ungrounded_arguments()``, ``injection()``, ``refusals()``,
    ``slow_turns()``, ``costly_turns()``; all of them: ``builtins()``) find what goes wrong in tool loops.

    Example:
        >>> import agentnb as anb
        >>> @anb.scanner(over="call")
        ... def failed(call):
        ...     return call.status == "error" and f"{call.tool} failed"
        >>> failed.name, failed.over
        ('failed', 'call')
    """

    @overload
    def __call__(self, fn: Callable[[Any], Any], /) -> Scanner: ...
    @overload
    def __call__(self, *, name: str | None = None, version: str = "1",
                 over: Over = "run") -> Callable[[Callable[[Any], Any]], Scanner]: ...
    def __call__(self, fn: Callable[[Any], Any] | None = None, *, name: str | None = None, version: str = "1",
                 over: Over = "run") -> Scanner | Callable[[Callable[[Any], Any]], Scanner]:
        """A scanner from ``fn`` (``@anb.scanner``), or a decorator with these settings (``@anb.scanner(...)``)."""

        def make(f: Callable[[Any], Any]) -> Scanner:
            return Scanner(name or str(getattr(f, "__name__", "scanner")), f, over=over, version=version)

        return make if fn is None else make(fn)

    def __repr__(self) -> str:
        return "<agentnb.scanner: @anb.scanner, anb.scanner.ask(...), anb.scanner.builtins()>"

    # The built-ins and the question live in their own modules; the kit only hands them out.

    @staticmethod
    def ask(question: str, *, model: Any, answer: Any = bool, name: str | None = None, version: str | None = None,
            retries: int = 2) -> Scanner:
        """A scanner that asks ``model`` a question about each run (see :func:`agentnb.scanners._ask.ask`)."""
        return ask(question, model=model, answer=answer, name=name, version=version, retries=retries)

    @staticmethod
    def builtins() -> tuple[Scanner, ...]:
        """Every built-in scanner with its default settings."""
        return builtins()

    @staticmethod
    def ignored_errors() -> Scanner:
        """Tool errors the model went past (see :func:`agentnb.scanners._builtin.ignored_errors`)."""
        return ignored_errors()

    @staticmethod
    def repeated_calls() -> Scanner:
        """A call made again after the same call succeeded (see :mod:`agentnb.scanners._builtin`)."""
        return repeated_calls()

    @staticmethod
    def ungrounded_arguments(min_chars: int = 3) -> Scanner:
        """Argument values that appear nowhere earlier in the conversation (see :mod:`agentnb.scanners._builtin`)."""
        return ungrounded_arguments(min_chars=min_chars)

    @staticmethod
    def injection(threshold: float = 2.0) -> Scanner:
        """Instruction-like text inside tool results (see :mod:`agentnb.scanners._injection`)."""
        return injection(threshold=threshold)

    @staticmethod
    def refusals() -> Scanner:
        """Refusals and content-filter stops (see :mod:`agentnb.scanners._builtin`)."""
        return refusals()

    @staticmethod
    def slow_turns(factor: float = 3.0, min_s: float = 0.0, max_s: float | None = None) -> Scanner:
        """Turns slower than ``factor`` times the run's median, or than ``max_s`` (see the builtin module)."""
        return slow_turns(factor=factor, min_s=min_s, max_s=max_s)

    @staticmethod
    def costly_turns(factor: float = 3.0, max_tokens: int | None = None) -> Scanner:
        """Turns using more than ``factor`` times the run's median tokens, or ``max_tokens`` (see the builtins)."""
        return costly_turns(factor=factor, max_tokens=max_tokens)
