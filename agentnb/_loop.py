"""A tool-calling loop: the model, the tools and the rules a run is driven by (see :mod:`agentnb._run`).

:class:`Loop` is configuration: it checks what it is given once, builds the engine's configuration
(:class:`~agentnb._engine.EngineConfig`) and starts runs. Everything that happens in a run is in
:class:`~agentnb.Run` (the driver) and :mod:`agentnb._engine` (the decisions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from ._driver.history import native_output, policy_revision, run_tags
from ._engine import FINALIZE_PROMPT, EngineConfig, RetryPolicy, check_tool_choice
from ._engine.guards import Budget
from ._messages import Message, coerce_messages
from ._output import OUTPUT_TOOL, OutputSpec
from ._redact import redact, register_credentials
from ._request import split_options
from ._run import Run
from .events import ToolInfo
from .providers._base import Model
from .providers._prices import price_table
from .providers._registry import NATIVE_OUTPUT_STRICT_ONLY
from .store import LEASE_TTL, Store, as_store
from .tools import Tool, ToolRegistry, ToolSource, as_registry


class Loop:
    """A tool-calling loop: a model, tools, and the rules of the run.

    Args:
        model: anything with ``respond(request)`` -- :class:`~agentnb.ScriptedModel` offline, or a provider model.
        tools: functions decorated with :func:`~agentnb.tool` (plain functions are wrapped).
        system: an optional system prompt placed first in every run.
        max_turns: model turns allowed before the cap policy applies.
        on_max_turns: ``"finalize"`` (one more, tools-free call asking for an answer from what the model
            has) or ``"stop"`` (end in ``BUDGET_EXHAUSTED``).
        settings: request settings passed to the model on every turn (temperature, max_tokens, ...).
        max_retries: attempts after the first for retryable model errors (429, 5xx, connection errors).
        retry_base_delay: seconds before the first retry; doubled each time, with jitter, capped at 30 s; a
            longer ``retry-after`` from the provider wins.
        max_retry_time: seconds a request may spend retrying in all (None: bounded by ``max_retries`` only).
        finalize_prompt: the instruction of the finalization call.
        store: where events and the effect ledger go: an :class:`~agentnb.SqliteStore` (or a path to one) for
            runs that survive the process; default an in-memory store.
        headless: nobody can approve: calls that need a person get a "denied (headless)" result.
        approval: a loop-wide approval policy (``True``, ``False`` or ``callable(call, state) -> bool``). It can
            ask for approval of any call; it never waives a tool's own approval (``approval=True``, or a
            ``write``/``dangerous`` risk) unless ``override_tool_approval=True``. A policy that raises means "a
            person must decide" (headless: denied), with its error in the approval event. It receives a copy of
            the call and a read-only view of the state: it judges the call, it cannot change it or the budgets.
        override_tool_approval: let ``approval`` decide alone, waiving tools' own approvals; every waiver is
            recorded as an ``approval_override`` guard event.
        approval_ttl: seconds an approval request stays valid (default: no expiry).
        lease_ttl: seconds the run's lease lasts without renewal (one driver at a time; see :class:`Run`).
        output_type: the type the final answer must have (a pydantic model, a TypedDict, a dataclass, a list of
            them, or a JSON schema as a dict); the model answers by calling the output tool ``final_result``,
            ``run.output`` is then the typed object (see :mod:`agentnb._output`).
        output_retries: correction turns allowed for final answers that do not fit ``output_type`` (each one is a
            model request like any other: the budget counts it and may end the run first).
        output_mode: ``"native"`` asks for the output with the provider's structured-output mode (Chat Completions
            ``response_format``, Responses ``text.format``, Gemini ``responseJsonSchema``; the answer is JSON
            text), ``"tool"`` with the output tool; ``"auto"`` (default) takes native where the model's wire API
            has it and the tool elsewhere (Anthropic, scripted and fallback models).
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or ``{"name": "tool"}``, rendered as each wire API
            expects; or a per-turn policy ``callable(state) -> choice`` (e.g. force ``lookup_order`` on the first
            turn, then ``"auto"``), recorded on every ``ModelRequested`` event; it gets a read-only view of the
            state.
        parallel_tool_calls: False asks the model for at most one call per turn (None: the provider's default).
        budget: an :class:`~agentnb.Budget` (turns, tool calls, tokens, cost, deadline, parallelism, result
            size, repetition, context window); ``max_turns``/``on_max_turns`` are shortcuts for its first fields.
        summarizer: a model (or ``callable(messages) -> str``) that summarizes older history when the context
            passes its threshold (tier 1); without one, compression prunes (tier 2).
        tracer_provider: an OpenTelemetry tracer provider (or an :class:`agentnb.otel.Tracing`): every run
            is written as GenAI spans as it happens.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = loop.start("What's the weather in Paris?").run()
        >>> run.state, run.output
        (<LoopState.COMPLETED: 'COMPLETED'>, 'It is 18 °C and sunny in Paris.')
    """

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | Sequence[Tool | ToolSource | Callable[..., Any]] = (),
        *,
        system: str | None = None,
        max_turns: int = 25,
        on_max_turns: Literal["finalize", "stop"] = "finalize",
        settings: dict[str, Any] | None = None,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        max_retry_time: float | None = 120.0,
        finalize_prompt: str = FINALIZE_PROMPT,
        store: Store | str | Path | None = None,
        headless: bool = False,
        approval: bool | Callable[[Any, Any], bool] | None = None,
        override_tool_approval: bool = False,
        approval_ttl: float | None = None,
        budget: Budget | None = None,
        summarizer: Any = None,
        lease_ttl: float = LEASE_TTL,
        output_type: Any = None,
        output_retries: int = 2,
        output_mode: Literal["auto", "tool", "native"] = "auto",
        tool_choice: Any = None,
        parallel_tool_calls: bool | None = None,
        tracer_provider: Any = None,
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise TypeError(f"model must have a respond(request) method, got {type(model).__name__}")
        if on_max_turns not in ("finalize", "stop"):
            raise ValueError(f"on_max_turns must be 'finalize' or 'stop', got {on_max_turns!r}")
        settings = dict(settings or {})
        policy: Callable[[Any], Any] | None = None
        if callable(tool_choice):
            policy = tool_choice
        elif tool_choice is not None:
            if "tool_choice" in settings:
                raise ValueError("give tool_choice= or settings['tool_choice'], not both")
            names = [*as_registry(tools).names, *([OUTPUT_TOOL] if output_type is not None else [])]
            settings["tool_choice"] = check_tool_choice(tool_choice, names)
        if parallel_tool_calls is not None:
            settings["parallel_tool_calls"] = bool(parallel_tool_calls)
        # The settings keep the options under their setting names (the events record them so); the engine
        # makes them typed for each request. Reading them once here refuses a bad value now, not mid-run.
        split_options(settings)
        if budget is None:
            budget = Budget(max_turns=max_turns, on_exhausted=on_max_turns)
        elif (max_turns, on_max_turns) != (25, "finalize"):
            raise ValueError("give max_turns and on_max_turns inside the Budget when you pass one")
        # the engine prices turns through the budget: put the table its setting names in it (the maintained
        # one by default), so the cost limit, the port's warning and the frames read the same prices
        budget = replace(budget, price_table=price_table(budget.price_table))
        self.model = model
        self.registry = as_registry(tools)
        self.system = system
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.max_retry_time = max_retry_time
        self.config = EngineConfig(
            registry=self.registry,
            budget=budget,
            settings=settings,
            finalize_prompt=finalize_prompt,
            headless=headless,
            approval=approval,
            override_tool_approval=override_tool_approval,
            approval_ttl=approval_ttl,
            summarizer=summarizer,
            output=None if output_type is None else OutputSpec.of(
                output_type, retries=output_retries, native=native_output(model, output_mode),
                strict_only=getattr(model, "provider", None) in NATIVE_OUTPUT_STRICT_ONLY),
            tool_choice=policy,
            retry=RetryPolicy(max_retries, retry_base_delay, max_retry_time),
        )
        if output_mode == "native" and self.config.output is not None and not self.config.output.native:
            raise ValueError(f"output_mode='native': {output_type!r} cannot be written in strict form, the only "
                             "form this wire API's structured-output mode takes; use output_mode='auto' or 'tool'")
        if self.config.output is not None and self.registry.get(self.config.output.name) is not None:
            raise ValueError(f"a tool is named {self.config.output.name!r}, the output tool's name; rename it")
        self.lease_ttl = lease_ttl
        self.store = as_store(store)
        self.event_settings = redact(self.config.settings)
        register_credentials(model)  # every key the model (or the models it wraps) holds, whatever its shape
        self.policy_revision = policy_revision(self.registry, approval, headless, override_tool_approval)
        self.tracer_provider = tracer_provider  # OpenTelemetry export of every run: agentnb.otel.Tracing

    @property
    def tools(self) -> list[Tool]:
        """The loop's tools."""
        return list(self.registry)

    @property
    def tool_infos(self) -> list[ToolInfo]:
        """The tools as offered to the model: the registry's, plus the output tool of an ``output_type`` loop."""
        output = self.config.output
        return self.registry.infos if output is None or output.native else [*self.registry.infos, output.info()]

    def start(
        self, prompt: str | Message | list[Message] | list[dict[str, Any]], *, run_id: str | None = None,
        operation_id: str | None = None, store: Store | None = None, tags: tuple[str, ...] | list[str] = (),
    ) -> Run:
        """Begin a run from a prompt (or a prior message list). Nothing is sent until you step or run it.

        ``operation_id`` names the business operation the run serves (default: the run id); idempotency keys
        derive from it, so two runs of one operation never repeat each other's writes. ``store`` is where this
        run's events, effects and lease go (default: the loop's store); the run holds it from its first event,
        so give it here rather than setting ``run.store`` afterwards. ``tags``: non-blank strings stored with the
        run (``RunStarted.settings["tags"]``), which the approvals inbox groups and filters by.

        Raises:
            AgentnbError: ``tags`` that are not a tuple of non-blank strings.
        """
        run = Run(self, coerce_messages(prompt), run_id=run_id, operation_id=operation_id, store=store,
                  tags=run_tags(tags))
        if self.tracer_provider is not None:  # an event listener writes the spans (agentnb.otel)
            from .otel._export import as_tracing

            as_tracing(self.tracer_provider).attach(run)
        return run

    def __repr__(self) -> str:
        model = f"{getattr(self.model, 'provider', '?')}:{getattr(self.model, 'name', '?')}"
        return f"<agentnb.Loop model={model} tools={self.registry.names} max_turns={self.config.max_turns}>"
