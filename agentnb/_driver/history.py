"""What a run is built from and leaves behind, apart from driving it: histories, policy hashes, settings.

- :func:`summary_history` and :func:`summarize` -- tier-1 compression's new history (the driver calls the
  summarizer; the engine decides whether the result is used, :func:`agentnb._engine.summarized`);
- :func:`started` -- a run's first event, with what it records of its loop;
- :func:`complete_history` -- a conversation with every call answered, for a follow-up run or a fork;
- :func:`policy_revision` -- the hash of what decides whether and how calls run, checked on resume;
- :func:`budget_settings`, :func:`native_output` -- what ``Loop`` records and chooses at construction.
"""

from __future__ import annotations

from typing import Any

from .. import _binding as binding
from .._engine import Emit, RunState
from .._engine.actions import EngineConfig
from .._engine.guards import Budget, prune
from .._engine.inputs import run_started
from .._engine.results import Summary
from .._messages import Message, ModelTurn, TextPart, ToolResultPart
from .._pairing import unanswered_calls
from .._request import ModelRequest
from ..events import RunStarted
from ..exceptions import AgentnbError
from ..providers._prices import label
from ..providers._registry import NATIVE_OUTPUT  # the APIs whose structured output "auto" uses
from ..store import home_of
from ..tools import ToolRegistry
from .loopspec import LoopSpec


def native_output(model: Any, mode: str) -> bool:
    """Whether a loop asks ``model`` for typed output in its wire API's structured-output mode (``output_mode``)."""
    if mode not in ("auto", "tool", "native"):
        raise ValueError(f"output_mode must be 'auto', 'tool' or 'native', got {mode!r}")
    provider = getattr(model, "provider", None)
    if mode == "native" and provider not in NATIVE_OUTPUT and provider != "scripted":
        raise ValueError(f"output_mode='native': {provider or type(model).__name__} has no structured-output mode "
                         "agentnb uses; use output_mode='tool' (or 'auto')")
    return mode == "native" or (mode == "auto" and provider in NATIVE_OUTPUT)


def budget_settings(b: Budget) -> dict[str, Any]:
    """The budget's limits as ``RunStarted`` records them, and which price table its costs count by."""
    fields = ("max_turns", "max_tool_calls", "max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost",
              "deadline_s", "max_parallel", "max_result_chars", "max_repeats", "on_repeat", "max_no_progress",
              "context_window", "prices")
    return {**{f: getattr(b, f) for f in fields}, "price_table": label(b.table)}


def summarize(summarizer: Any, messages: list[Message], run_id: str) -> str:
    """A summary of ``messages`` by ``summarizer``: a model (asked once, without tools) or ``callable(messages)``."""
    older = messages
    if callable(getattr(summarizer, "respond", None)):
        text = "\n".join(f"{m.role}: {m.text or [p.kind for p in m.parts]}" for m in older)
        prompt = Message.user(
            "Summarize this conversation for yourself: the user's goal, what the tools returned that matters, "
            "and what is left to do. Be brief and keep every fact needed to finish.\n\n" + text
        )
        items = list(summarizer.respond(ModelRequest(messages=[prompt], tools=[], run_id=f"{run_id}:summary")))
        turn = items[-1]
        assert isinstance(turn, ModelTurn)
        return turn.message.text
    return str(summarizer(messages))


def summary_history(messages: list[Message], summary: str, keep_pairs: int) -> tuple[list[Message], list[int]]:
    """Tier 1: system + the first request (with the summary after it) + the last complete call/result turns."""
    kept, removed = prune(messages, keep_pairs)
    first_user = next((i for i, m in enumerate(kept) if m.role == "user"), None)
    if first_user is not None:
        request = kept[first_user]
        kept[first_user] = Message(role="user", parts=(
            *request.parts, TextPart(text=f"\n\n[Summary of the work so far]\n{summary}"),
        ))
    return kept, removed


def policy_revision(registry: ToolRegistry, approval: Any, headless: bool, override: bool = False) -> str:
    """A short hash of what decides whether and how calls run: tools, schemas, risks and approval rules."""
    def rule(policy: Any) -> str:
        if policy is None or isinstance(policy, bool):
            return repr(policy)
        return f"callable:{getattr(policy, '__qualname__', type(policy).__name__)}"

    parts = [
        [t.name, t.schema_version, t.risk, rule(t.approval), t.client, t.idempotent] for t in registry
    ]
    # the override joins the hash only when set, so revisions recorded before it existed still match
    extra = ["override"] if override else []
    return binding.sha256(binding.canonical([parts, rule(approval), headless, *extra]))[:16]


def policy_diff(first: RunStarted, registry: ToolRegistry) -> str:
    """What changed between the tools a run started with and ``registry``, in words (for ``ResumeError``)."""
    then = {t.name: t for t in first.tools}
    now = {t.name: t for t in registry.infos}
    changes = [f"tool {n!r} was removed" for n in then.keys() - now.keys()]
    changes += [f"tool {n!r} was added" for n in now.keys() - then.keys()]
    for name in then.keys() & now.keys():
        a, b = then[name], now[name]
        if a.parameters != b.parameters:
            changes.append(f"the schema of {name!r} changed")
        if (a.risk, a.approval) != (b.risk, b.approval):
            changes.append(f"the risk or approval rule of {name!r} changed")
    return "; ".join(sorted(changes)) or "the approval rules or headless mode changed"


def run_tags(tags: Any) -> tuple[str, ...]:
    """``tags=`` of a run or a batch, checked: a tuple (or list) of non-blank strings; repeats dropped, in order.

    Example:
        >>> run_tags(("vip", "refunds", "vip"))
        ('vip', 'refunds')

    Raises:
        AgentnbError: one string given for the tuple, an item that is not a string, or a blank one.
    """
    if isinstance(tags, str) or not isinstance(tags, tuple | list):
        hint = f"tags=({tags!r},)" if isinstance(tags, str) else "tags=('vip', 'refunds')"
        raise AgentnbError(f"tags= takes a tuple of strings, e.g. {hint}, not {type(tags).__name__} {tags!r:.60}")
    for i, tag in enumerate(tags):
        if not isinstance(tag, str) or not tag.strip():
            raise AgentnbError(f"tags[{i}] is {tag!r:.60}: each tag is a non-blank string")
    return tuple(dict.fromkeys(tags))


def started(run_id: str, initial: list[Message], loop: LoopSpec, operation_id: str,
            fork: dict[str, Any] | None, store: object, tags: tuple[str, ...] = ()) -> Emit:
    """A run's first event: its messages, model, tools and every setting a resume or a fork checks again.

    A durable ``store`` is named too (its id): a copy of the run in another store is then known for one; the
    run's ``tags`` (what an inbox groups and filters by) are ``settings["tags"]``.
    """
    cfg = loop.config
    model = f"{getattr(loop.model, 'provider', '?')}:{getattr(loop.model, 'name', '?')}"
    return Emit(run_started(run_id, initial, model, loop.tool_infos, {
        "max_turns": cfg.max_turns, "on_max_turns": cfg.budget.on_exhausted, "budget": budget_settings(cfg.budget),
        "request": cfg.settings, "operation_id": operation_id, "policy_revision": loop.policy_revision,
        "headless": cfg.headless, **home_of(store), **({"fork": fork} if fork else {}),
        **({"tags": list(tags)} if tags else {})}))


def complete_history(messages: list[Message], system: str | None = None) -> list[Message]:
    """The messages with every call answered: calls left without a result get a "skipped" result.

    With the loop's ``system`` prompt given, a leading system message is left out (the new run adds its own).
    """
    out = list(messages)
    at, missing = unanswered_calls(out)
    if missing:
        out.insert(at + 1, Message(role="tool", parts=tuple(
            ToolResultPart(call_id=c.call_id, name=c.name, status="skipped",
                           content="Skipped: the run was stopped before this call ran.") for c in missing)))
    return out[1:] if system and out and out[0].role == "system" else out


def summary(rs: RunState, cfg: EngineConfig, run_id: str, tokens: int) -> Summary:
    """Tier 1: the older history summarized by the loop's summarizer (a failing one means: prune instead)."""
    try:
        kept, removed = summary_history(rs.messages, summarize(cfg.summarizer, rs.messages, run_id),
                                        cfg.budget.keep_pairs)
    except Exception:  # a failing summarizer must not end the run
        return Summary(tokens, None, [])
    return Summary(tokens, kept, removed)
