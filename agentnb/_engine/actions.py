"""What :func:`~agentnb._engine.decide` can ask of the driver: the actions, and the engine's configuration.

- :class:`Emit` -- a decision that needs no I/O: the engine built the event (see :mod:`.build` for its
  header), the driver stamps and appends it;
- :class:`PullModel` -- read the next item of the model's answer (a fragment or the whole turn);
- :class:`RunTool` -- execute one validated call;
- :class:`Compress` -- summarize the older history with the summarizer (tier 1);
- :class:`Wait` -- a person has to approve or deny something; nothing happens until they do;
- :class:`Done` -- the run is in a terminal state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from .._outcomes import EffectDone
from .._output import OutputSpec
from .._request import RequestOptions, split_options
from .._states import LoopState
from ..events import BaseEvent
from .fold import FINALIZE_PROMPT, RunState
from .guards import Budget


@dataclass(slots=True)
class Emit:
    """Append this event (no I/O was needed to decide it).

    Example:
        >>> from agentnb._engine import finished
        >>> from agentnb._states import S
        >>> action = Emit(finished(S.COMPLETED, "the model answered", "hi"))
        >>> action.state, action.event.reason
        (<LoopState.COMPLETED: 'COMPLETED'>, 'the model answered')
    """

    event: BaseEvent
    """The event, complete but for its header (the driver stamps it with :func:`~agentnb._engine.stamp`)."""
    effect: EffectDone | None = None
    """The effect ledger's outcome to record in the same write as the event (a side-effecting call's result)."""

    @property
    def state(self) -> LoopState:
        """The loop state after the event."""
        return self.event.state


@dataclass(frozen=True)
class PullModel:
    """Read the next item of the model's answer (start the request if none is open)."""


@dataclass(slots=True)
class RunTool:
    """Execute this validated call (not frozen: a frozen dataclass costs more to build, one per call)."""

    call_id: str


@dataclass(frozen=True)
class Wait:
    """Nothing to do until a person resolves the pending approvals."""


@dataclass(frozen=True)
class Done:
    """The run is over."""


@dataclass(frozen=True, slots=True)
class Compress:
    """Rebuild the history shorter with the summarizer (tier 1); the driver calls it."""

    tokens: int


Action = Emit | PullModel | RunTool | Wait | Done | Compress

DONE, PULL, WAIT = Done(), PullModel(), Wait()


@runtime_checkable
class ToolSpec(Protocol):
    """What the engine reads of a tool: its rules, its schema, its key. :class:`~agentnb.Tool` is one.

    The engine decides with these and never runs anything: execution (and the thread pool) is the driver's.
    """

    @property
    def name(self) -> str:
        """The tool's name."""

    @property
    def risk(self) -> str:
        """``read``, ``write`` or ``dangerous``."""

    @property
    def approval(self) -> Any:
        """The tool's own approval rule (True, False, a callable, or None: by risk)."""

    @property
    def client(self) -> bool:
        """The client runs the tool and submits its result."""

    @property
    def side_effects(self) -> bool:
        """Calls change something outside the run (they go through the effect ledger)."""

    @property
    def context_param(self) -> str | None:
        """The parameter that receives a :class:`~agentnb.tools.ToolContext`, if any."""

    @property
    def simulate(self) -> Any:
        """The tool's fake for forks that simulate writes (None: it has none)."""

    @property
    def key_fn(self) -> Any:
        """The tool's own idempotency-key function, if any."""

    @property
    def idempotency(self) -> str:
        """``intent`` or ``call``."""

    @property
    def timeout(self) -> float | None:
        """Seconds a call may run (None: the loop's ``tool_timeout``)."""

    @property
    def max_timeout(self) -> float | None:
        """Seconds no call may run past, whatever the timeouts say (None: no ceiling)."""

    @property
    def schema_version(self) -> str:
        """A hash of the tool's schema (part of each call's request hash)."""

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """The validated arguments object (raises pydantic's ``ValidationError`` when they do not fit)."""

    def dump(self, validated: BaseModel) -> dict[str, Any]:
        """The validated arguments as JSON data."""

    def key_for(self, arguments: dict[str, Any]) -> str:
        """The tool's own idempotency key for these arguments."""


@runtime_checkable
class ToolSpecs(Protocol):
    """The tools the engine decides about, by name. :class:`~agentnb.tools.ToolRegistry` is one.

    The engine depends on this, not on the registry, which also owns the execution of tools.
    """

    def get(self, name: str) -> ToolSpec | None:
        """The tool named ``name``, or None."""

    def unknown_message(self, name: str) -> str:
        """What the model reads when it calls a tool that does not exist."""


@dataclass(frozen=True)
class RetryPolicy:
    """When a failed model request is asked again (see :func:`~agentnb._engine.model_failed`)."""

    max_retries: int = 2
    """Attempts after the first for retryable errors (429, 5xx, connection errors)."""
    base_delay: float = 0.5
    """Seconds before the first retry; doubled each time, with jitter, capped at :attr:`max_delay`."""
    max_time: float | None = 120.0
    """Seconds a request may spend retrying in all (None: bounded by ``max_retries`` only)."""
    max_delay: float = 30.0


@dataclass(frozen=True)
class EngineConfig:
    """What the engine needs to know about the loop."""

    registry: ToolSpecs
    """The tools by name (the engine reads their rules; it never runs them)."""
    budget: Budget = field(default_factory=Budget)
    settings: dict[str, Any] = field(default_factory=dict)
    finalize_prompt: str = FINALIZE_PROMPT
    headless: bool = False
    """Nobody can approve: calls that need a person are denied (each denial an event)."""
    approval: bool | Callable[[Any, Any], bool] | None = None
    """A loop-wide approval policy: it may ask for approval of any call, never waive a tool's own (None: each
    tool decides)."""
    override_tool_approval: bool = False
    """Let the loop-wide policy waive a tool's own approval (each waiver is an ``approval_override`` event)."""
    approval_ttl: float | None = None
    """Seconds an approval request stays valid (None: no expiry)."""
    summarizer: Any = None
    """A model (or ``callable(messages) -> str``) for tier-1 compression; None: prune only."""
    output: OutputSpec | None = None
    """The typed final output the run must end with (``Loop(output_type=...)``), or None for plain text."""
    tool_choice: Callable[[RunState], Any] | None = None
    """A per-turn tool-choice policy (``Loop(tool_choice=callable)``; it gets a read-only view of the state); a
    fixed choice lives in ``settings``."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """When failed model requests are asked again."""

    @property
    def max_turns(self) -> int:
        """The turn budget."""
        return self.budget.max_turns

    @cached_property
    def request_split(self) -> tuple[RequestOptions, dict[str, Any]]:
        """The fixed options ``settings`` carry, and the pass-through rest (split once: see ``request_for``)."""
        return split_options(self.settings)


__all__ = ["DONE", "PULL", "WAIT", "Action", "Compress", "Done", "Emit", "EngineConfig", "PullModel", "RetryPolicy",
           "RunTool", "ToolSpec", "ToolSpecs", "Wait"]
