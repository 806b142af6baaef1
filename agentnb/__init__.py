"""agentnb: see, step through, teach and analyse LLM tool-calling loops.

Example:
    >>> import agentnb as anb
    >>> @anb.tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> model = anb.ScriptedModel([
    ...     {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    ...     {"text": "2 + 3 = 5."},
    ... ])
    >>> run = anb.Loop(model=model, tools=[add]).start("What is 2 + 3?").run()
    >>> run.state, run.output
    (<LoopState.COMPLETED: 'COMPLETED'>, '2 + 3 = 5.')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import stories
from ._batch import BatchResult, batch
from ._batch_items import Fork
from ._collection import TranscriptCollection, load_transcripts
from ._compare import Comparison, compare
from ._driver.listeners import ListenerWarning
from ._engine import CallState, RunState
from ._engine.guards import Budget, UnpricedModelWarning
from ._inbox import Inbox
from ._labels import Label, Labels, label
from ._lint import Finding, lint
from ._loop import Loop
from ._messages import Message, ModelTurn, Usage
from ._recorder import Recorder
from ._replay import Divergence, Replay, replay
from ._request import ModelRequest, RequestOptions
from ._run import Run
from ._states import TRANSITIONS, IllegalTransition, LoopState
from ._transcript import Transcript
from ._version import __version__ as __version__
from .evals import Evaluation, evaluate, scorers
from .events import Event
from .exceptions import (
    AgentnbError,
    ApprovalError,
    ApprovalExpired,
    CheckpointError,
    DigestMismatch,
    InvalidArguments,
    ModelError,
    ProviderError,
    ResumeError,
    RunLocked,
    RunNotFound,
    RunNotPaused,
    StoreUnavailable,
    StreamInterrupted,
    ToolDefinitionError,
    TranscriptError,
    ValueConversionError,
)
from .frames import Frames
from .importers import import_history
from .mcp import MCPServer
from .providers import AnthropicModel, FallbackModel, GeminiModel, OpenAIChatModel, OpenAIResponsesModel, model
from .providers._base import Model
from .providers._scripted import ScriptedModel
from .scanners import Hit, Scanner, scan, scanner
from .store import MemoryStore, PostgresStore, SqliteStore, Store, move_run
from .tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from . import emulator, otel, workshop
    from ._debugger import Debugger
    from .otel import import_trace, iter_trace


_LAZY = {"Debugger": "._debugger", "emulator": ".emulator", "workshop": ".workshop", "otel": ".otel",
         "import_trace": ".otel", "iter_trace": ".otel"}


def __getattr__(name: str) -> object:
    # The debugger (ipywidgets), the emulator (an HTTP server) and the workshop load on first use, so
    # `import agentnb` stays light.
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name], __name__)
        return getattr(module, name) if name in ("Debugger", "import_trace", "iter_trace") else module
    raise AttributeError(f"module 'agentnb' has no attribute {name!r}")


__all__ = [
    "AgentnbError",
    "AnthropicModel",
    "ApprovalError",
    "ApprovalExpired",
    "BatchResult",
    "Budget",
    "CallState",
    "CheckpointError",
    "Comparison",
    "Debugger",
    "DigestMismatch",
    "Divergence",
    "Evaluation",
    "Event",
    "FallbackModel",
    "Finding",
    "Fork",
    "Frames",
    "GeminiModel",
    "Hit",
    "IllegalTransition",
    "Inbox",
    "InvalidArguments",
    "Label",
    "Labels",
    "ListenerWarning",
    "Loop",
    "LoopState",
    "MCPServer",
    "MemoryStore",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelTurn",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "PostgresStore",
    "ProviderError",
    "Recorder",
    "Replay",
    "RequestOptions",
    "ResumeError",
    "Run",
    "RunLocked",
    "RunNotFound",
    "RunNotPaused",
    "RunState",
    "Scanner",
    "ScriptedModel",
    "SqliteStore",
    "Store",
    "StoreUnavailable",
    "StreamInterrupted",
    "TRANSITIONS",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "Transcript",
    "TranscriptCollection",
    "TranscriptError",
    "UnpricedModelWarning",
    "Usage",
    "ValueConversionError",
    "batch",
    "compare",
    "emulator",
    "evaluate",
    "import_history",
    "import_trace",
    "iter_trace",
    "label",
    "lint",
    "load_transcripts",
    "model",
    "move_run",
    "otel",
    "replay",
    "scan",
    "scanner",
    "scorers",
    "stories",
    "tool",
    "workshop",
]
