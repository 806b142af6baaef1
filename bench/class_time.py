"""Class time of each workshop notebook, estimated from its content (the teacher's guide's *in class* column).

For a group of about 30 beginners: the words of the markdown (tags left out) at 80 a minute, 1.5 minutes per code
cell and one more for a cell of 15 lines or more (exercise cells left out), the exercise (20 minutes; 30 for 05's
stream reader; 50 for the capstone), and 10 % on top for questions and changes of notebook. The constants were set
so that the previous layout of 01-07 came out near a timed dry run of it (7 h 10; this estimate said 7 h 35).
A notebook with a ``# Part two`` heading is also estimated up to it (its in-class demo).

    python bench/class_time.py            # every notebook of notebooks/
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXERCISE_MIN = {"01": 20, "02": 20, "03": 20, "04": 20, "05": 30, "07": 50, "09": 20, "10": 20, "11": 20, "12": 20,
                "13": 20}
WORDS_PER_MIN = 80
CODE_CELL_MIN = 1.5
LONG_CELL_MIN = 1.0
LONG_CELL_LINES = 15
MARGIN = 1.1
PART_TWO = re.compile(r"^# Part two", re.M)


def _minutes(cells: list[dict[str, object]], exercise: float) -> int:
    words, code, long = 0, 0, 0
    for cell in cells:
        source = "".join(cell["source"])  # type: ignore[arg-type]
        if cell["cell_type"] == "markdown":
            words += len(re.sub(r"<!--.*?-->", "", source, flags=re.S).split())
        elif "agentnb-workshop" not in (cell.get("metadata") or {}).get("tags", ()):  # type: ignore[union-attr]
            code += 1
            long += source.count("\n") >= LONG_CELL_LINES
    return round((words / WORDS_PER_MIN + code * CODE_CELL_MIN + long * LONG_CELL_MIN + exercise) * MARGIN)


def estimate(path: Path) -> tuple[int, int | None]:
    """(minutes for the whole notebook, minutes up to its ``# Part two`` heading or None)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    number = path.name.split("_", 1)[0]
    whole = _minutes(cells, EXERCISE_MIN.get(number, 0))
    cut = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                and PART_TWO.search("".join(c["source"]))), None)
    return whole, None if cut is None else _minutes(cells[:cut], 0)


def main(folder: Path = NOTEBOOKS) -> None:
    print(f"{'notebook':<36} {'in class':>9} {'demo':>6}")
    for path in sorted(folder.glob("*.ipynb")):
        whole, demo = estimate(path)
        print(f"{path.stem:<36} {whole:>6} min {'' if demo is None else f'{demo} min':>6}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else NOTEBOOKS)
