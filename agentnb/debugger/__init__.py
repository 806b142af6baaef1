"""The step-through debugger for JupyterLab (ipywidgets): :class:`Debugger`."""

from .widget import Breakpoint, Debugger

__all__ = ["Breakpoint", "Debugger"]
