"""``agentnb export``, ``lint`` and ``import``: runs and histories in and out of files.

``export`` writes the one-file HTML debugger of :mod:`agentnb._debugger.export` (the transcript is embedded
too, so ``Transcript.load("run.html")`` reads it back); ``lint`` runs :func:`agentnb.lint` on a history in a
wire format and ``--fix`` writes the repaired copy; ``import`` turns an OTLP/JSON trace
(:func:`agentnb.import_trace`) or a wire-format or framework history (:func:`agentnb.import_history`) into
transcripts, one JSONL file per run.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import click

from .._debugger.export import write_html
from .._findings import Finding
from .._lint import lint as lint_history
from .._transcript import Transcript
from ..importers import FRAMEWORKS, import_history
from ..otel._importer import import_trace
from ..providers._registry import WIRE_APIS
from ._common import (
    EXIT_CODES_HELP,
    Exit,
    Found,
    emit_json,
    find_runs,
    not_blank,
    open_store,
    refusal,
    reports,
    say,
    shown,
    stderr,
)
from .runs import key_file_option

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_name(run_id: str, suffix: str) -> str:
    """A file name for a run id: characters a file system or a URL could misread become ``_``."""
    stem = _UNSAFE.sub("_", run_id).strip("._")[:120] or "run"
    return f"{stem}{suffix}"


def _read_json(path: str) -> Any:
    p = Path(path)
    if not p.exists():
        raise refusal(f"{path}: no such file", Exit.NOT_FOUND)
    if p.is_dir():
        raise refusal(f"{path} is a directory; give a JSON file", Exit.USAGE)
    try:
        return json.loads(p.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise refusal(f"{path}: not UTF-8 text (byte {exc.start})", Exit.UNTRUSTED) from exc
    except json.JSONDecodeError as exc:
        raise refusal(f"{path}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", Exit.UNTRUSTED) from exc
    except RecursionError as exc:
        raise refusal(f"{path}: JSON nested too deeply to read", Exit.UNTRUSTED) from exc


# -- export --------------------------------------------------------------------------------------------------


@click.command(epilog=EXIT_CODES_HELP, short_help="Write runs as one-file HTML debuggers.")
@click.argument("sources", nargs=-1, required=True, metavar="RUN_OR_PATH...", callback=not_blank)
@click.option("-o", "--output", required=True, type=click.Path(), help="The HTML file (one run) or a directory.")
@click.option("--store", default=None, help="Read the runs named by RUN_OR_PATH from this store (SQLite or DSN).")
@click.option("--title", default=None, help="The page's title.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@key_file_option
@reports
def export(sources: tuple[str, ...], output: str, store: str | None, title: str | None, as_json: bool,
           key_file: str | None) -> None:
    """Write runs as one-file HTML debuggers (read-only, no kernel, no network).

    RUN_OR_PATH is a transcript (JSONL, or an HTML export), a directory of transcripts, a Parquet dataset, a
    SQLite store (all its runs), or with --store a run id. One run goes to the file -o names; several go to the
    directory -o names, one file each. The transcript is embedded losslessly: Transcript.load("run.html") reads
    it back.

    \b
    Examples:
      agentnb export run.jsonl -o run.html
      agentnb export refund-42 --store runs.db -o refund-42.html
      agentnb export runs.db -o site/
    """
    found: list[Found] = []
    if store is not None:
        st = open_store(store, key_file=key_file, readonly=not store.startswith(("postgres://", "postgresql://")))
        found = [Found(shown(store), run_id, lambda run_id=run_id: st.load(run_id))  # type: ignore[misc]
                 for run_id in sources]
    else:
        for spec in sources:
            found.extend(find_runs(spec, key_file=key_file))
    out = Path(output)
    many = len(found) > 1 or out.is_dir() or output.endswith(("/", "\\"))
    if many:
        out.mkdir(parents=True, exist_ok=True)
    elif not out.parent.exists():
        raise refusal(f"{out.parent}: no such directory to write {out.name} in", Exit.NOT_FOUND)
    written: list[dict[str, Any]] = []
    taken: set[str] = set()
    for f in found:
        events = f.read()
        if not events:
            raise refusal(f"{f.source}: the run {f.run_id!r} has no events", Exit.UNTRUSTED)
        run_id = events[0].run_id or f.run_id
        target = out / _unique(file_name(run_id, ""), ".html", taken) if many else out
        write_html(events, target, title=title)
        written.append({"run_id": run_id, "source": f.source, "path": str(target), "events": len(events)})
    if as_json:
        emit_json(written)
    else:
        for w in written:
            say(f"wrote {w['path']} ({w['events']} events of {w['run_id']})")


def _unique(stem: str, suffix: str, taken: set[str]) -> str:
    """``stem + suffix``, or ``stem-2 + suffix`` (and so on) when an earlier run of this call took it."""
    name, n = stem + suffix, 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}{suffix}"
    taken.add(name)
    return name


# -- lint ----------------------------------------------------------------------------------------------------


def _finding(f: Finding) -> dict[str, Any]:
    return dataclasses.asdict(f)


@click.command(epilog=EXIT_CODES_HELP, short_help="Check a history as its provider would.")
@click.argument("file", callback=not_blank)
@click.option("--format", "fmt", required=True, type=click.Choice(list(WIRE_APIS)),
              help="The wire format of the history.")
@click.option("--model", default=None, help="The model name, for rules that depend on it (Gemini 3 signatures).")
@click.option("--fix", is_flag=True, help="Repair a copy (unanswered calls answered, orphans dropped, ...).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Where --fix writes the copy.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings (and changes) as JSON.")
@reports
def lint(file: str, fmt: str, model: str | None, fix: bool, output: str | None, as_json: bool) -> None:
    """Check a history (FILE: a JSON message list or a whole request body) as FORMAT's service would.

    Exit 0 when nothing would be refused (warnings may be printed), 1 when a finding is an error; with
    --fix, 1 when the repaired copy still has one (a missing signature cannot be repaired).

    \b
    Examples:
      agentnb lint history.json --format anthropic
      agentnb lint request.json --format openai_chat --json
      agentnb lint history.json --format openai_chat --fix -o fixed.json
    """
    if fix and output is None:
        raise refusal("--fix needs -o OUT: the file to write the repaired copy to", Exit.USAGE)
    if output is not None and not fix:
        raise refusal("-o is where --fix writes its copy: add --fix", Exit.USAGE)
    history = _read_json(file)
    if not isinstance(history, list | dict):
        raise refusal(f"{file}: a history is a JSON list (or a request body object), not a {type(history).__name__}",
                      Exit.USAGE)
    findings = lint_history(history, fmt, model=model)
    changes: list[str] = []
    left = findings
    if fix:
        assert output is not None
        items, made = lint_history(history, fmt, fix=True, model=model)
        changes = [str(c) for c in made]
        api = WIRE_APIS[fmt]
        fixed: Any = {**history, api.list_key: items} if isinstance(history, dict) else items
        Path(output).write_text(json.dumps(fixed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        left = lint_history(fixed, fmt, model=model)
    errors = [f for f in left if f.severity == "error"]
    if as_json:
        report: dict[str, Any] = {"file": file, "format": fmt, "findings": [_finding(f) for f in findings],
                                  "errors": len([f for f in findings if f.severity == "error"])}
        if fix:
            report |= {"output": output, "changes": changes, "remaining": [_finding(f) for f in left]}
        emit_json(report)
    else:
        for f in findings:
            say(str(f))
        for c in changes:
            say(f"fixed: {c}")
        if fix:
            say(f"wrote {output}" + (f"; {len(errors)} error(s) remain" if errors else ", clean"))
        elif not findings:
            say(f"{file}: no findings ({fmt})")
    if errors:
        raise click.exceptions.Exit(int(Exit.FAILURE))


# -- import --------------------------------------------------------------------------------------------------


def is_trace(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    return b'"resourceSpans"' in head or b'"resource_spans"' in head


@click.command("import", epilog=EXIT_CODES_HELP, short_help="Turn a trace or a history into transcripts.")
@click.argument("source", metavar="TRACE_OR_HISTORY", callback=not_blank)
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="The directory to write to.")
@click.option("--format", "fmt", type=click.Choice([*WIRE_APIS, *FRAMEWORKS]), default=None,
              help="The history's format (not needed for an OTLP/JSON trace).")
@click.option("--run-id", default=None, callback=not_blank, help="The run id of an imported history (default: the "
              "file's name).")
@click.option("--model", default=None, help="The model name to record for a history.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written, with the findings, as JSON.")
@reports
def import_(source: str, output: str, fmt: str | None, run_id: str | None, model: str | None,
            as_json: bool) -> None:
    """Turn an OTLP/JSON trace or a history into transcripts, one JSONL file per run in -o DIR.

    A trace (GenAI semantic conventions: PydanticAI, Logfire, Langfuse, Phoenix, agentnb's own) gives one
    run per agent invocation. A history (a JSON list, or a request body) needs --format: a wire format or
    pydantic_ai, openai_agents, langchain. Exit 1 when a history has findings of severity error (the
    transcript is written all the same).

    \b
    Examples:
      agentnb import traces.json -o runs/
      agentnb import messages.json --format anthropic -o runs/
      agentnb import all_messages.json --format pydantic_ai --run-id support-7 -o runs/
    """
    path = Path(source)
    if not path.exists():
        raise refusal(f"{source}: no such file", Exit.NOT_FOUND)
    if path.is_dir():
        raise refusal(f"{source} is a directory; give a trace or history file", Exit.USAGE)
    out = Path(output)
    findings: list[Finding] = []
    if fmt is None:
        if not is_trace(path):
            raise refusal(f"{source} is not an OTLP/JSON trace (no resourceSpans); a history needs --format "
                          f"({', '.join([*WIRE_APIS, *FRAMEWORKS])})", Exit.USAGE)
        transcripts = import_trace(path)
    else:
        transcripts = [_history(path, fmt, run_id or path.stem, model, findings)]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    taken: set[str] = set()
    for t in transcripts:
        target = out / _unique(file_name(t.run_id or path.stem, ""), ".jsonl", taken)
        t.save(target)
        written.append({"run_id": t.run_id, "path": str(target), "state": t.state.value, "events": len(t)})
    errors = [f for f in findings if f.severity == "error"]
    if as_json:
        emit_json({"source": source, "written": written, "findings": [_finding(f) for f in findings]})
    else:
        for w in written:
            say(f"wrote {w['path']} ({w['run_id']}: {w['state']}, {w['events']} events)")
        for f in findings:
            say(str(f))
        if not transcripts:
            stderr(f"{source}: no agent run in this trace")
    if errors:
        raise click.exceptions.Exit(int(Exit.FAILURE))


def _history(path: Path, fmt: str, run_id: str, model: str | None, findings: list[Finding]) -> Transcript:
    data = _read_json(str(path))
    options: dict[str, Any] = {"run_id": run_id, "model": model}
    api = WIRE_APIS.get(fmt)
    if api is not None and isinstance(data, dict):  # a whole request body: its list and its system prompt
        if api.list_key not in data:
            raise refusal(f"{path}: a {fmt} request body holds its history under {api.list_key!r}", Exit.USAGE)
        if api.system_key and data.get(api.system_key) is not None:
            options["system"] = data[api.system_key]
        data = data[api.list_key]
    if api is not None and not isinstance(data, list):
        raise refusal(f"{path}: a {fmt} history is a JSON list, not a {type(data).__name__}", Exit.USAGE)
    imported = import_history(data, fmt, **options)
    findings.extend(imported.findings)
    return imported.transcript
