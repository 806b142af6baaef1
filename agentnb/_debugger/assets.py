"""The front end's files: the ES module and stylesheet in the top-level ``widgets/`` folder.

``widgets/`` is the one copy. In a wheel it is the data-only package ``agentnb._widgets`` (``setup.py`` maps
the folder to that name), read with :mod:`importlib.resources`; in a source checkout, where that package does
not exist, the folder next to the ``agentnb`` package is read. No Node build step: the module is plain
JavaScript that browsers load as it is.

Example:
    >>> "export default" in text("debugger.js")
    True
"""

from __future__ import annotations

import importlib.resources
from functools import cache
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "widgets"
"""The front end in a source checkout."""


@cache
def text(name: str) -> str:
    """The text of a front-end file (``debugger.js``, ``debugger.css``), from the wheel or the checkout.

    Raises:
        FileNotFoundError: naming both places looked at, when the file is in neither (a broken install).
    """
    try:
        shipped = importlib.resources.files("agentnb._widgets").joinpath(name)
        if shipped.is_file():
            return shipped.read_text(encoding="utf-8")
    except ModuleNotFoundError:
        pass
    local = SOURCE / name
    if local.is_file():
        return local.read_text(encoding="utf-8")
    raise FileNotFoundError(f"front-end file {name!r} is neither in the package agentnb._widgets nor in {SOURCE}; "
                            "reinstall agentnb (pip install --force-reinstall agentnb)")


def stylesheet(name: str = "debugger.css") -> str:
    """A stylesheet as a ``<style>`` element, for HTML shown without the front end (the static fallback)."""
    return f"<style>{text(name)}</style>"
