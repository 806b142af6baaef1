"""``python -m agentnb``: the ``agentnb`` command (see :mod:`agentnb._cli`)."""

from __future__ import annotations

if __name__ == "__main__":
    from agentnb._cli import main

    main()
