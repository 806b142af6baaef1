"""``agentnb runs``, ``approve`` and ``deny``: the approvals inbox of a store, from a terminal.

A decision goes through the API a notebook uses, with its fail-closed rules: :meth:`agentnb.Run.resume` with
the loop the run started with (``--loop MODULE:NAME``: its tools and approval policy are checked against the
log again, as they are for any resume), then :meth:`~agentnb.Run.approve` or :meth:`~agentnb.Run.deny`. Each
refusal has its own exit code (:class:`~._common.Exit`). When the decision leaves nothing waiting, the run is
driven on in this process (``--no-run`` to only record it: the lease is let go at once, so a worker may
resume it right away).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from .._driver.loopspec import LoopSpec
from .._loop import Loop
from .._run import Run
from .._states import LoopState
from ._common import (
    EXIT_CODES_HELP,
    Exit,
    close,
    emit_json,
    not_blank,
    open_store,
    refusal,
    reports,
    say,
    shown,
    summary,
)

STATES = [s.value for s in LoopState if s is not LoopState.NEW]

key_file_option = click.option("--key-file", type=click.Path(dir_okay=False), default=None,
                               help="The store's checkpoint key file (default: AGENTNB_CHECKPOINT_KEY, or "
                                    "~/.agentnb/checkpoint.key).")


def _cost(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


@click.command(epilog=EXIT_CODES_HELP, short_help="List a store's runs and the calls waiting.")
@click.argument("store", callback=not_blank)
@click.option("--state", type=click.Choice(STATES, case_sensitive=False), default=None,
              help="Only the runs in this state (WAITING_APPROVAL: the approvals inbox).")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list.")
@key_file_option
@reports
def runs(store: str, state: str | None, as_json: bool, key_file: str | None) -> None:
    """List the runs of STORE, most recent first: state, model, tokens, cost, start, and the calls waiting.

    STORE is a SQLite file or a PostgreSQL DSN (postgresql://...). Every run is read back with its seals
    checked; a run that cannot be trusted is listed with its error and the exit code is 8.

    \b
    Examples:
      agentnb runs runs.db
      agentnb runs runs.db --state WAITING_APPROVAL
      agentnb runs postgresql://agentnb@db/agentnb --json | jq '.[].run_id'
    """
    st = open_store(store, key_file=key_file, readonly=True)
    rows: list[dict[str, Any]] = []
    broken = 0
    try:
        for run_id, stored_state in st.runs(state=state.upper() if state else None):
            try:
                rows.append(summary(st.load(run_id), run_id).as_dict())
            except Exception as exc:  # one bad run does not hide the others: listed with its error
                broken += 1
                rows.append({"run_id": run_id, "state": stored_state, "error": str(exc)})
    finally:
        close(st)
    if as_json:
        emit_json(rows)
    else:
        _print_runs(rows, shown(store))
    if broken:
        raise refusal(f"{broken} run(s) of {shown(store)} cannot be read (see their error)", Exit.UNTRUSTED)


def _print_runs(rows: list[dict[str, Any]], store: str) -> None:
    if not rows:
        say(f"no runs in {store}")
        return
    header = ("RUN", "STATE", "MODEL", "TOKENS", "COST", "STARTED")
    table = [header] + [
        (r["run_id"], r["state"], r.get("model", ""), f"{r.get('input_tokens', 0) + r.get('output_tokens', 0):,}",
         _cost(r.get("cost_usd")), (r.get("started") or "")[:19]) if "error" not in r
        else (r["run_id"], r["state"], "", "", "", f"error: {r['error']}") for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    for row, r in zip(table, [None, *rows], strict=True):
        say("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=False)) + "  " + str(row[-1]))
        for p in (r or {}).get("pending", []):
            digest = f" digest {p['digest'][:12]}" if p.get("digest") else ""
            expires = f" expires {p['expires_at'][:19]}" if p.get("expires_at") else ""
            flag = " (contains invisible or direction-changing characters)" if p.get("hides") else ""
            say(f"    waiting: {p['call_id']} {p['tool']}({_short(p['arguments'])}) [{p['kind']}]"
                f"{digest}{expires}{flag}")


def _short(arguments: Any, limit: int = 80) -> str:
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items())
    else:
        text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- approve and deny ----------------------------------------------------------------------------------------


def import_loop(spec: str) -> LoopSpec:
    """The loop named by ``MODULE:NAME`` or ``path/to/file.py:NAME`` (a Loop, or a function returning one)."""
    where, _, name = spec.partition(":")
    if not where.strip() or not name.strip():
        raise refusal(f"--loop {spec!r}: give MODULE:NAME or path/to/file.py:NAME (e.g. shop.agent:loop)", Exit.USAGE)
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise refusal(f"--loop {spec}: no such file {path}", Exit.NOT_FOUND)
            found = importlib.util.spec_from_file_location(path.stem, path)
            assert found is not None and found.loader is not None
            module = importlib.util.module_from_spec(found)
            sys.modules[path.stem] = module
            found.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())  # as `python -m` does: modules of the current directory
            module = importlib.import_module(where)
    except click.ClickException:
        raise
    except ModuleNotFoundError as exc:
        raise refusal(f"--loop {spec}: no module {exc.name!r} (run from the directory that holds it, or give "
                      "path/to/file.py:NAME)", Exit.NOT_FOUND) from exc
    except Exception as exc:
        raise refusal(f"--loop {spec}: importing {where} raised {type(exc).__name__}: {exc}", Exit.FAILURE) from exc
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise refusal(f"--loop {spec}: {where} has no {part!r}", Exit.NOT_FOUND)
        obj = getattr(obj, part)
    if not isinstance(obj, Loop) and callable(obj):
        obj = obj()
    if not isinstance(obj, Loop):
        raise refusal(f"--loop {spec}: {name} is a {type(obj).__name__}, not an agentnb Loop", Exit.USAGE)
    return obj


def _decide(store: str, run_id: str, call_id: str, loop_spec: str, key_file: str | None, take_over: bool,
            go_on: bool, as_json: bool, decide: Any, verb: str) -> None:
    loop = import_loop(loop_spec)
    st = open_store(store, key_file=key_file, readonly=False)
    try:
        run = Run.resume(run_id, loop=loop, store=st, take_over=take_over)
        waiting = {c.call_id: c for c in run.pending_approvals()}
        if call_id not in waiting:
            known = any(getattr(e, "call_id", None) == call_id for e in run.events)
            if not known:
                listed = ", ".join(waiting) or "none"
                raise refusal(f"run {run_id!r} has no call {call_id!r} (calls waiting: {listed})", Exit.NOT_FOUND)
        tool = waiting[call_id].name if call_id in waiting else "?"
        decide(run, call_id)
        still = [c.call_id for c in run.pending_approvals()]
        if go_on and not still and not run.done:
            run.run()
        run.release()  # deciding (or a run that paused again) leaves the run free for whoever drives it next
        result = {"run_id": run_id, "call_id": call_id, "tool": tool, "decision": verb, "state": run.state.value,
                  "waiting": [c.call_id for c in run.pending_approvals()], "output": run.output if run.done else None}
    finally:
        close(st)
    if as_json:
        emit_json(result)
        return
    say(f"{verb} {call_id} ({tool}) of {run_id}: the run is {result['state']}")
    if result["waiting"]:
        say(f"still waiting: {', '.join(result['waiting'])}")
    if result["output"] is not None:
        say(f"output: {result['output']}")


def _decision_options(fn: Any) -> Any:
    for option in reversed([
        click.argument("store", callback=not_blank),
        click.argument("run_id", metavar="RUN", callback=not_blank),
        click.argument("call_id", metavar="CALL", callback=not_blank),
        click.option("--loop", "loop_spec", required=True, envvar="AGENTNB_LOOP", metavar="MODULE:NAME",
                     help="The loop the run started with (MODULE:NAME or path/to/file.py:NAME; env AGENTNB_LOOP): "
                          "its tools and approval policy are checked against the log, as Run.resume does."),
        click.option("--by", default=None, help="Who decides (recorded in the event)."),
        click.option("--run/--no-run", "go_on", default=True, show_default=True,
                     help="Drive the run on once nothing waits for a person."),
        click.option("--take-over", is_flag=True, help="Take the run from a driver whose lease expired."),
        click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON."),
        key_file_option,
    ]):
        fn = option(fn)
    return fn


@click.command(epilog=EXIT_CODES_HELP, short_help="Approve a waiting call, then drive the run on.")
@_decision_options
@click.option("--reason", default=None, help="A note recorded with the approval.")
@click.option("--digest", default=None, callback=not_blank,
              help="The arguments_digest you saw (from `agentnb runs --json`): refused if the arguments differ.")
@reports
def approve(store: str, run_id: str, call_id: str, loop_spec: str, by: str | None, go_on: bool, take_over: bool,
            as_json: bool, key_file: str | None, reason: str | None, digest: str | None) -> None:
    """Approve the call CALL that waits in the run RUN of STORE, then drive the run on.

    Refused (nothing recorded) when the run is not paused, the call does not wait (exit 4), the approval
    expired (5), the arguments are not the ones --digest names (6), another driver holds the run (7), or the
    stored run or the loop do not check out (8).

    \b
    Examples:
      agentnb approve runs.db refund-42 call_1 --loop shop:loop --by ana
      agentnb approve runs.db refund-42 call_1 --loop shop.py:loop --digest 3f2a... --no-run
    """
    _decide(store, run_id, call_id, loop_spec, key_file, take_over, go_on, as_json,
            lambda run, call: run.approve(call, by=by, note=reason, digest=digest), "approved")


@click.command(epilog=EXIT_CODES_HELP, short_help="Deny a waiting call, then drive the run on.")
@_decision_options
@click.option("--reason", default=None, help="Why: the model reads 'Denied by the user: <reason>'.")
@reports
def deny(store: str, run_id: str, call_id: str, loop_spec: str, by: str | None, go_on: bool, take_over: bool,
         as_json: bool, key_file: str | None, reason: str | None) -> None:
    """Deny the call CALL that waits in the run RUN of STORE, then drive the run on.

    The model gets "Denied by the user: <reason>" as the call's result. Refused as approve is (exit codes
    below); an expired approval can still be denied.

    \b
    Examples:
      agentnb deny runs.db refund-42 call_1 --loop shop:loop --reason "over the limit" --by ana
    """
    _decide(store, run_id, call_id, loop_spec, key_file, take_over, go_on, as_json,
            lambda run, call: run.deny(call, reason, by=by), "denied")
