"""The step-through debugger for JupyterLab: :class:`Debugger` (a headless :class:`Controller` plus its view)."""

from .controller import Controller
from .widget import Breakpoint, Debugger

__all__ = ["Breakpoint", "Controller", "Debugger"]
