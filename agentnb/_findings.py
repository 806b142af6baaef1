"""Findings and lint rules: the one record of a problem in a history, and the small rules that find them.

Theory of operation. Every check on a history -- :func:`agentnb.lint` on a provider's wire shape, the
importers on a history they read, the emulator on every request it answers -- reports :class:`Finding`
records with one vocabulary of codes. The checks themselves are :class:`Rule` objects that live with their
wire API (``agentnb/providers/<api>/rules.py``): a code, what it means, a ``check`` over a :class:`View` of
the body (the body normalized by :mod:`agentnb.providers._shapes`, plus whatever that API's rules share, computed once:
its messages reduced to calls and results, their pairing), and an optional ``fix`` used by
``lint(..., fix=True)``.

:func:`run_rules` runs an API's rules in their declared order. A rule marked ``each`` is asked about one
item at a time, and consecutive ``each`` rules share one pass over the items, so their findings interleave
by item, as a service reports them; the emulator answers the first error found, so the order is part of
the behaviour.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["INTERRUPTED", "Change", "Context", "Finding", "Rule", "View", "fix_rules", "run_rule", "run_rules"]

Severity = Literal["error", "warning"]

INTERRUPTED = "interrupted: this call was not run (the conversation was cut before its result)"
"""The result text ``fix=True`` gives an unanswered call."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in a history.

    Attributes:
        code: ``orphan_result``, ``result_before_call``, ``duplicate_result``, ``unanswered_call``,
            ``duplicate_call_id``, ``duplicate_item``, ``results_not_first``, ``tools_undefined``,
            ``tool_choice_without_tools``, ``call_misplaced``, ``missing_signature``, ``invalid_signature``,
            ``missing_reasoning``, ``system_not_first``, ``bad_role``, ``empty_text``,
            ``arguments_not_object``, ``malformed`` (a value of the wrong JSON type), ``unreadable`` (a shape
            no rule expected: reported instead of raised); and from the importers, ``unsupported_part``
            (a part kept as a placeholder or left out), ``invalid_arguments`` (arguments kept as written
            that are not a JSON object) and ``not_a_message``.
        position: where, in the provider's own terms (``messages[3].content[1]``, ``input[4]``,
            ``contents[2].parts[0]``).
        index: the message (item, content) index in the history list (-1: not tied to one item).
        message: what is wrong, in plain words.
        provider_message: what the service answers (the ``message`` of its 400 error), when it refuses it.
        severity: ``error`` (the service refuses the request, or its meaning is lost) or ``warning``.
        call_id: the call concerned, when there is one.
        param: OpenAI's ``param`` field for this error, when it has one.
        part: the part (block, call) index inside the item, when there is one.

    Example:
        >>> f = Finding("orphan_result", "messages[3]", 3, "no call c9")
        >>> print(f), f.path
        error orphan_result at messages[3]: no call c9
        (None, 'messages[3]')
    """

    code: str
    position: str
    index: int
    message: str
    provider_message: str = ""
    severity: Severity = "error"
    call_id: str | None = None
    param: str | None = None
    part: int | None = None

    @property
    def path(self) -> str:
        """The position (the name the importers' findings used for it)."""
        return self.position

    def __str__(self) -> str:
        return f"{self.severity} {self.code} at {self.position}: {self.message}"


@dataclass(frozen=True, slots=True)
class Change:
    """One repair made by ``lint(..., fix=True)``: ``added``, ``dropped``, ``moved`` or ``replaced``, where, what."""

    action: Literal["added", "dropped", "moved", "replaced"]
    position: str
    detail: str

    def __str__(self) -> str:
        return f"{self.action} {self.position}: {self.detail}"


@dataclass(slots=True)
class Context:
    """What a validator knows beyond the request (the emulator fills it in; the linter runs without).

    Attributes:
        verify: ``verify(kind, value, content) -> bool`` checks a signature or encrypted content the caller
            issued (``kind`` is ``thinking``, ``thought`` or ``reasoning``); None skips the check.
        reasoning_for: the reasoning item id that preceded a Responses function-call item id, if issued.
        reasoning_content_for: call ids whose assistant turn came with ``reasoning_content``.
        require_thought_signatures: Gemini: signatures on function calls are required (Gemini 3 models).
    """

    verify: Callable[[str, str, str], bool] | None = None
    reasoning_for: dict[str, str] = field(default_factory=dict)
    reasoning_content_for: set[str] = field(default_factory=set)
    require_thought_signatures: bool | None = None


class View:
    """A request body as the rules read it: normalized, with the shared digests computed once.

    Subclasses (one per wire API) add ``functools.cached_property`` digests (the items reduced to calls and
    results, their pairing), so several rules can read them and none recomputes them.
    """

    list_key = "messages"

    def __init__(self, body: dict[str, Any], ctx: Context | None) -> None:
        self.body = body
        self.ctx = ctx
        items = body.get(self.list_key)
        self.items: list[Any] = items if isinstance(items, list) else []


Check = Callable[[Any], Iterable[Finding]]
ItemCheck = Callable[[Any, int, Any], Iterable[Finding]]
Fix = Callable[[list[Any], list[Finding]], list[Change]]


@dataclass(frozen=True, slots=True)
class Rule:
    """One lint rule of a wire API.

    Attributes:
        code: the finding code it reports (a pairing rule reports its family: ``orphan_result``,
            ``unanswered_call``, ...; ``codes`` lists them).
        doc: what it checks, in a sentence, and the source it follows.
        check: ``check(view)`` yields findings; with ``each=True``, ``check(view, index, item)`` per item.
        each: asked once per item (see :func:`run_rules` for the order this gives).
        fix: ``fix(items, findings) -> changes``, repairing ``items`` in place for ``lint(..., fix=True)``;
            it receives every finding and acts on its own codes.
        codes: every code the rule can report (default: ``(code,)``).
        moves: the fix adds, drops or moves items; such fixes run after those that replace values in place,
            so the positions the in-place fixes read still hold.
        refuses: a request body this rule reports (documentation, and the conformance suite's failing case).
        accepts: the same request made right: this rule reports nothing (the suite's passing case).
        context: the :class:`Context` both examples are checked with (rules that need the emulator's).

    Example:
        >>> rule = Rule("empty_history", "a history must hold a message",
        ...             lambda v: [Finding("empty_history", "messages", -1, "no message")] if not v.items else [])
        >>> [f.code for f in run_rules([rule], View({"messages": []}, None))]
        ['empty_history']
    """

    code: str
    doc: str
    check: Callable[..., Iterable[Finding]]
    each: bool = False
    fix: Fix | None = None
    codes: tuple[str, ...] = ()
    moves: bool = False
    refuses: dict[str, Any] | None = None
    accepts: dict[str, Any] | None = None
    context: Context | None = None

    def reports(self) -> tuple[str, ...]:
        """Every code this rule can report."""
        return self.codes or (self.code,)


def run_rule(rule: Rule, view: View) -> list[Finding]:
    """The findings of one rule on ``view`` (per item for an ``each`` rule)."""
    if not rule.each:
        return list(rule.check(view))
    return [f for i, item in enumerate(view.items) for f in rule.check(view, i, item)]


def run_rules(rules: Sequence[Rule], view: View) -> list[Finding]:
    """The findings of ``rules`` on ``view``, in rule order (consecutive per-item rules share a pass)."""
    out: list[Finding] = []
    k = 0
    while k < len(rules):
        if not rules[k].each:
            out.extend(rules[k].check(view))
            k += 1
            continue
        group = []
        while k < len(rules) and rules[k].each:
            group.append(rules[k])
            k += 1
        for i, item in enumerate(view.items):
            for rule in group:
                out.extend(rule.check(view, i, item))
    return out


def fix_rules(rules: Sequence[Rule], items: list[Any], findings: list[Finding]) -> list[Change]:
    """Apply the rules' fixes, in-place ones first, each group in rule order; the changes, in the order made."""
    changes: list[Change] = []
    for moves in (False, True):
        for rule in rules:
            if rule.fix is not None and rule.moves is moves:
                changes.extend(rule.fix(items, findings))
    return changes


# -- helpers the rules of several APIs share -----------------------------------------------------------------


def short(value: Any) -> str:
    """A JSON excerpt of ``value`` for a message (at most 60 characters)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def not_object(index: int, part: int | None, where: str, value: Any, provider_message: str,
               call_id: str | None, param: str | None = None) -> Finding:
    """A call whose arguments are not a JSON object (the ``arguments_not_object`` finding)."""
    return Finding("arguments_not_object", where, index,
                   f"the call's arguments are not a JSON object ({short(value)}): send {{}} in their place and "
                   "keep the raw text in the result that tells the model what was wrong",
                   provider_message, call_id=call_id, param=param, part=part)


def args_object(raw: Any) -> bool:
    """Whether an argument text (Chat, Responses) is a JSON object (``""`` counts: servers read it as ``{}``)."""
    if raw == "":
        return True
    if not isinstance(raw, str):
        return False
    try:
        return isinstance(json.loads(raw), dict)
    except (ValueError, RecursionError):
        return False


def fix_arguments(locate: Callable[[list[Any], int, int | None], Any], key: str, empty: Any) -> Fix:
    """A fix putting ``empty`` in place of arguments that are not an object (``arguments_not_object``)."""

    def fix(items: list[Any], findings: list[Finding]) -> list[Change]:
        changes = []
        for f in findings:
            if f.code == "arguments_not_object":
                locate(items, f.index, f.part)[key] = copy.copy(empty)
                changes.append(Change("replaced", f.position, f"arguments that are not a JSON object by {empty!r}"))
        return changes

    return fix


def compatible_server_message(raw: Any) -> str:
    """What an OpenAI-compatible server answers for a history call whose arguments are not a JSON object.

    vLLM (and the proxies in front of it) ``json.loads`` the arguments of earlier calls before rendering the
    chat template (``_postprocess_messages`` in ``vllm/entrypoints/chat_utils.py``; an empty string becomes
    ``{}``): invalid JSON fails with the decoder's message, and a value that is not an object fails in the
    chat templates that iterate the arguments' items (Jinja's "Can only get item pairs from a mapping.").
    The OpenAI service itself accepts such histories; ``{}`` is accepted by all.
    """
    if isinstance(raw, str):
        try:
            json.loads(raw)
        except ValueError as exc:
            return str(exc)
        except RecursionError:
            return "maximum recursion depth exceeded while decoding a JSON document"
    return "Can only get item pairs from a mapping."
