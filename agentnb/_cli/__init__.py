"""The ``agentnb`` command (and ``python -m agentnb``): stores, approvals, exports, lint, import, emulator, viewer.

Theory of operation. Each verb is a :mod:`click` command in the module of its concern -- :mod:`.runs`
(``runs``, ``approve``, ``deny``), :mod:`.files` (``export``, ``lint``, ``import``), :mod:`.serve`
(``emulator``), :mod:`.view` (``view``) -- and calls the public API a notebook calls, so a decision taken
from a terminal passes the same checks (``Run.resume``, ``run.approve``/``deny``) and a file is read by the
same readers (``Transcript.load``, ``lint``, ``import_history``, ``import_trace``). :mod:`._common` holds
what they share: the exit codes (:class:`~._common.Exit`, printed under every ``--help`` and in
``docs/command.md``), errors turned into one line on stderr (never a traceback), stores opened after a
read-only look (a path that is not an agentnb store is never written to), and the list row of a run.

Verbs that list or report take ``--json`` (one JSON document on stdout; messages go to stderr).

Example:
    >>> from click.testing import CliRunner
    >>> CliRunner().invoke(cli, ["--version"]).output.startswith("agentnb ")
    True
"""

from __future__ import annotations

import click

from .._version import __version__
from ._common import EXIT_CODES_HELP
from .files import export, import_, lint
from .runs import approve, deny, runs
from .serve import emulator
from .view import view


@click.group(epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="agentnb", message="%(prog)s %(version)s")
def cli() -> None:
    """See, step through and analyse LLM tool-calling loops: stores, approvals, exports, lint, import, emulator.

    \b
    Examples:
      agentnb runs runs.db --state WAITING_APPROVAL
      agentnb approve runs.db refund-42 call_1 --loop shop:loop --by ana
      agentnb export run.jsonl -o run.html
      agentnb lint history.json --format anthropic
      agentnb import traces.json -o runs/
      agentnb emulator --story weather
      agentnb view runs.db --follow

    Each verb has --help with examples. Docs: docs/command.md.
    """


for _verb in (runs, approve, deny, export, lint, import_, emulator, view):
    cli.add_command(_verb)


def main() -> None:
    """The console script: run the command line, exit with its code."""
    cli(prog_name="agentnb")


__all__ = ["cli", "main"]
