"""The version of agentnb, in a module of its own.

Parts of the package that report the version (the MCP client's name, the OpenTelemetry tracer) import it from
here, not from the package root, which imports them (``tests/test_walls.py`` holds that wall).
"""

from __future__ import annotations

__version__ = "0.1.0"
