"""Notebook 10's exercise: from an MCP server you do not control, keep only the tools that cannot change anything.

Theory of operation. An MCP server's tools become ordinary agentnb tools whose ``risk`` comes from the server's
annotations (``readOnlyHint`` -> ``read``; ``destructiveHint`` -> ``dangerous``; anything else, and a tool
with no annotations at all, -> ``write``). A read-only assistant is a loop given the ``read`` tools only:
the model cannot even name the others, since a tool that was not offered is an unknown tool.

The check starts a server whose tools are drawn at random every check (:mod:`.mcp_shop`: names that lie
about what the tool does, and a tool without annotations), calls the student's ``read_only(server)`` with it
and compares what it returns with the server's own annotations. Then it runs the answer: a scripted model
calls every tool kept (each must answer ``ok``) and one tool left out (it must be refused as unknown).
``read_only`` gets the server with its tools as fresh copies, and every call of a tool it makes is recorded: a
tool run to find out what it does has done it. The loop runs the check's own tools of the names kept.
"""

from __future__ import annotations

import copy
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._loop import Loop
from .._states import LoopState
from ..events import CallRejected, ToolFinished
from ..exceptions import CheckTimeout
from ..mcp import MCPServer, MCPTool
from ..providers._scripted import ScriptedModel, ScriptStep
from ..tools import Tool
from ..tools._definition import Risk
from ._common import TIMEOUT_HINTS, Hints, calls, is_placeholder, reply, safe_run, shown
from ._guard import Leash
from ._mcp_shop import sounds_like_read
from ._report import Report, describe_exception

__all__ = ["check_mcp"]


def check_mcp(report: Report, read_only: Any = None, *, rng: random.Random, leash: Leash) -> None:
    """Notebook 10: ``read_only(server) -> list of tools``: exactly the server's read-only tools."""
    if is_placeholder(read_only) or not callable(read_only):
        got = "not written yet" if is_placeholder(read_only) else f"got {shown(read_only)}"
        report.fix("a function", got, "write `def read_only(server): return [...]`", kind="missing")
        return
    from ._exercises import takes  # the arity check every exercise shares

    if not takes(read_only, 1, report, "a function", "def read_only(server)", "the MCP server"):
        return
    seed = rng.randint(1, 10**6)
    # the server must import this very agentnb (a checkout, a worktree), and the MCP SDK starts it with a bare
    # environment: hand it the folder this package was imported from
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    server = MCPServer.stdio(sys.executable, ["-m", "agentnb.workshop._mcp_shop", str(seed)], name="shop",
                             env={"PYTHONPATH": path})
    try:
        try:
            everything = server.tools()  # connect and list before the student's code runs: that is not timed
        except Exception as exc:  # the check's own server: say so plainly
            report.fix("the check's MCP server", f"did not start ({describe_exception(exc)})",
                       "run the cell again; if it keeps failing, tell your teacher", kind="server")
            return
        _judge(report, read_only, server, everything, leash)
    finally:
        server.close()


class _Watch:
    """The server as the tools handed to the student reach it: every call is recorded, then passed on.

    It is a :class:`~agentnb.mcp._tool.Caller`, the protocol an MCP tool calls its server through.
    """

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.generation = server.generation
        self.called: list[str] = []

    async def _call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None,
                    checked: Risk | None = None) -> Any:
        self.called.append(tool)
        return await self.server._call(tool, arguments, meta, checked)

    def _current(self, tool: MCPTool) -> MCPTool:
        return tool


class _Handed:
    """What ``read_only`` is given: the check's server, whose tools come as fresh copies on every listing.

    A student may change what it is given (a tool's annotations, its schema): the copies keep the check's own
    tools, which it judges by, as the server listed them. A call of a tool, through the tool or through
    ``server.call``, is recorded: finding out what a tool does by running it runs it.
    """

    def __init__(self, server: MCPServer, watch: _Watch) -> None:
        self._server = server
        self._watch = watch

    @property
    def name(self) -> str:
        """The server's name."""
        return self._server.name

    @property
    def tool_names(self) -> list[str]:
        """The names of the server's tools."""
        return list(self._server.tool_names)

    def tools(self, include: Sequence[str] | None = None, exclude: Sequence[str] = ()) -> list[MCPTool]:
        """The server's tools, as copies (see :meth:`agentnb.MCPServer.tools`)."""
        return [replace(t, source=self._watch, annotations=copy.deepcopy(t.annotations),
                        parameters=copy.deepcopy(t.parameters)) for t in self._server.tools(include, exclude)]

    def as_tools(self) -> list[Tool]:
        """All the server's tools, as copies."""
        return list(self.tools())

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call a tool on the server (recorded)."""
        self._watch.called.append(tool)
        return self._server.call(tool, arguments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def __repr__(self) -> str:
        return repr(self._server)


def _judge(report: Report, read_only: Any, server: MCPServer, everything: list[Any], leash: Leash) -> None:
    watch = _Watch(server)
    handed = _Handed(server, watch)
    try:
        got = leash.call(read_only, (handed,))
    except CheckTimeout as exc:
        report.fix("read_only(server)", f"your function {exc}", TIMEOUT_HINTS, kind="timeout")
        return
    except Exception as exc:
        report.fix("read_only(server)", f"it raised {describe_exception(exc)}",
                   ("a name the server does not have, or a tool read wrongly: read the message",
                    "ask the server for its tools (server.tools()) and look at what each one says about itself"),
                   kind="crash")
        return
    called = list(watch.called)  # what read_only ran; the loop below runs the kept tools on purpose
    if isinstance(got, MCPServer | _Handed) or not isinstance(got, (list, tuple)):
        report.fix("it returns a list of tools", f"got {shown(got)}",
                   ("Loop(tools=...) takes a list of tools: what does your function return?",
                    "return a list of the tool objects server.tools() gives you, keeping some of them"), kind="type")
        return
    if got and all(isinstance(t, str) for t in got):
        report.fix("it returns a list of tools", f"got names: {shown(list(got), 60)}",
                   ("a name is not a tool: the loop needs the tool objects",
                    "keep the objects of server.tools() themselves (each has .name and .risk)"), kind="names")
        return
    if not all(isinstance(t, Tool) for t in got):
        report.fix("it returns a list of tools", f"an item is {shown(next(t for t in got if not isinstance(t, Tool)))}",
                   "return the tool objects of server.tools()", kind="type")
        return
    names = {t.name for t in everything}
    own = [t for t in got if t.name not in names or getattr(t, "server", None) != server.name]
    if own:
        t = own[0]
        report.fix("it returns tools of the server only", f"{t.name} is not one of the server's tools"
                   f"{' (it is a tool of your own)' if t.name not in names else ' (a tool of your own by that name)'}",
                   ("read_only chooses among the server's tools: where does this one come from?",
                    "return some of the tools server.tools() gives, and nothing else"), kind="own-tool")
        return
    report.ok("it returns a list of tools", f"{len(got)} of the server's {len(everything)}")
    by_name = {t.name: t for t in everything}
    if called:
        risky = [n for n in called if by_name.get(n) is not None and by_name[n].risk != "read"]
        report.fix("it decides without calling the tools", f"read_only called {', '.join(dict.fromkeys(called))}"
                   + (f": {risky[0]} (risk={by_name[risky[0]].risk}) really ran on the server" if risky else ""),
                   ("to find out what a tool does, did you run it? A delete that runs to see what it does deletes",
                    "decide from what the server says about each tool (its annotations, made into its risk), "
                    "without calling any"), kind="calls-tools")
    else:
        report.ok("it decides without calling the tools")
    kept = {t.name for t in got}
    reads = [t for t in everything if t.risk == "read"]
    others = [t for t in everything if t.risk != "read"]
    wrong = [t for t in others if t.name in kept]
    lost = [t for t in reads if t.name not in kept]
    if wrong:
        t = wrong[0]
        notes = t.annotations or {}
        hints, kind = _kept_hints(t.name, notes)
        report.fix("it keeps no tool that can change something",
                   f"it keeps {t.name} (risk={t.risk}; annotations {notes or 'none'})", hints, kind=kind)
    else:
        report.ok("it keeps no tool that can change something", f"{len(others)} left out")
    if lost:
        t = lost[0]
        named = not sounds_like_read(t.name)
        report.fix("it keeps every read-only tool", f"it leaves out {t.name} (risk=read: readOnlyHint is true)",
                   ("which tools did your rule drop, and why? look at what the server says about this one",
                    "a name can sound like a write and still only read: the annotations are what the server "
                    "claims, and the tool's risk is made from them") if named else
                   ("which tools did your rule drop, and why?", "keep every tool whose risk is 'read'"),
                   kind="by-name" if named else "missing-read")
    else:
        report.ok("it keeps every read-only tool", f"{len(reads)} kept")
    if not wrong and not lost:  # the check's own tools of the names kept: what was handed over may be changed
        _run(report, [by_name[t.name] for t in got], others[0].name)


def _kept_hints(name: str, notes: dict[str, Any]) -> tuple[Hints, str]:
    if not notes:
        return (("this tool says nothing about itself: what does MCP assume then?",
                 "a tool without annotations may do anything (the spec's defaults are not read-only): agentnb "
                 "makes it a write, so its risk is not 'read'"), "unannotated")
    if sounds_like_read(name):
        return (("the name sounds like a read; what does the server say the tool does?",
                 "names can lie: read the tool's risk (made from readOnlyHint), not its name"), "by-name")
    return (("this tool changes something: how can you tell from the tool object?",
             "each tool has a risk: 'read', 'write' or 'dangerous'; keep only 'read'"), "includes-write")


def _run(report: Report, tools: list[Tool], left_out: str) -> None:
    what = "the kept tools run in a loop; a tool left out cannot be called"
    script: list[ScriptStep] = [calls(t.name, {"item_id": str(i + 1)}) for i, t in enumerate(tools)]
    script += [calls(left_out, {"item_id": "9"}), reply]
    run = safe_run(report, what, Loop(model=ScriptedModel(script), tools=tools), "Tell me about item 1")
    if run is None:
        return
    ok = [e for e in run.events if isinstance(e, ToolFinished) and e.status == "ok"]
    refused = [e for e in run.events if isinstance(e, CallRejected) and e.name == left_out]
    if run.state is LoopState.COMPLETED and len(ok) == len(tools) and refused:
        report.ok(what, "every kept tool answered; the tool left out was refused as unknown")
    else:
        report.fix(what, f"the run ended {run.state.value} with {len(ok)} of {len(tools)} tools answering ok",
                   ("read the run's events to see where it stopped", "anb.Debugger(run) shows every step"),
                   kind="no-result")
