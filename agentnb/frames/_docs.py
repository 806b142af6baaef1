"""The docs table of every frame's columns, generated from the declarations.

Run ``python -m agentnb.frames._docs`` to rewrite ``docs/frames.md``; ``tests/test_frames.py`` fails when the file
and the declarations disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._columns import DATETIME, EVENT_COLUMNS, EVENTS_PAYLOAD, FRAMES, Column

_INTRO = """# Frames: every column

Generated from `agentnb/frames/_columns.py` by `python -m agentnb.frames._docs`; do not edit by hand.

Every frame starts with `run_id`, `seq` and `turn`. `seq` is the position in the run's log of the event the row
comes from (the *source* of `seq` below), so every frame joins the events frame on `(run_id, seq)`; turns and calls
join on `(run_id, turn)`. A source reads `<field>.<attribute path>`, where the field is the row's event (by type),
a part of the conversation (`call`, `part`, `message`), or a value computed from several events (a bare name).
A source `-` means no event records the fact yet: the column is there, with its dtype, and is null.
`datetime` is `datetime64[us, UTC]`; `category` columns list their fixed vocabulary where they have one.

```python
import agentnb as anb
runs = anb.load_transcripts("runs/*.jsonl")
runs.frames.calls().groupby("tool", observed=True)["status"].value_counts()
```
"""


def _row(frame: str, col: Column) -> str:
    dtype: str = DATETIME if col.dtype == "datetime" else col.dtype
    if col.categories is not None:
        dtype += ": " + ", ".join(col.categories)
    source = f"`{col.source}`" if col.source else "-"
    if col.value is not None and col.source:
        source += f" ({getattr(col.value, '__name__', 'value').strip('_')})"
    doc = col.doc.replace("|", "\\|")
    return f"| {frame} | `{col.name}` | {dtype} | {source} | {doc} |"


def markdown() -> str:
    """The whole page."""
    lines = [_INTRO, "| frame | column | dtype | source | meaning |", "|---|---|---|---|---|"]
    for name, cols in FRAMES.items():
        lines.extend(_row(name, c) for c in cols)
        if name == "events":
            lines.append(_row(name, EVENTS_PAYLOAD))
    lines += ["", _KINDS, "| event | columns that read it |", "|---|---|"]
    lines += [f"| {kind} | {', '.join(f'`{c}`' for c in cols) or '-'} |" for kind, cols in EVENT_COLUMNS.items()]
    return "\n".join(lines) + "\n"


_KINDS = """## Event kinds and their columns

Every event kind has a row in the events frame; beyond it, these columns read it (a computed column lists the
kinds it is made from). A new event kind gets a line here, and a column that reads it (`tests/test_projection.py`
checks both).
"""


def main(argv: list[str] | None = None) -> int:
    """Write the page to ``argv[0]`` (default ``docs/frames.md``)."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "docs/frames.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(), encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
