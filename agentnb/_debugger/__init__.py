"""The step-through debugger for JupyterLab: :class:`Debugger` (a headless :class:`Controller` plus its view).

The names are loaded on first use, so what needs no widget -- the one-file export, the command's pages --
does not import anywidget and ipywidgets (a tenth of a second) to get at its modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .controller import Breakpoint, Controller
    from .widget import Debugger

__all__ = ["Breakpoint", "Controller", "Debugger"]


def __getattr__(name: str) -> Any:
    if name in ("Breakpoint", "Controller"):
        from . import controller

        return getattr(controller, name)
    if name == "Debugger":
        from .widget import Debugger

        return Debugger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
