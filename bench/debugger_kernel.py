"""The kernel's share of opening a long run in the debugger, up to a million events: CPU time and peak memory.

What a notebook cell ``anb.Debugger(anb.Transcript.load(path), start="end")`` costs before the page paints:
the load (read, validate, fold), the debugger (its timeline: the fold with what time travel needs), the display
(the static fallback and the widget's state) -- CPU seconds --, then the answer to a page's hello as the widget
sends it, in wall seconds: "hello" is how long the kernel is busy answering it (the rows go, the page's clicks
wait), "tree" how long after the hello the tree's nodes are sent (a long run's tree is built after its rows, in
a thread of its own; before that change, inside the hello's answer). "rows MB" counts the messages' JSON and
binary buffers. Each size runs in a fresh child process, alternating between this tree and the ``--before``
tree; figures are medians; the peak resident set size is the child's (``ru_maxrss``) less its size once agentnb
is imported.

Targets (issue 30, item 2): a million events open in the notebook in at most 5 s, cell executed to rows
painted (this is the kernel's part of it: load + debugger + display + hello).

    python bench/debugger_kernel.py --before /path/to/a/checkout/of/main [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("load", "debugger", "display", "hello")
COLUMNS = (*STEPS, "tree")


def child(path: str) -> None:
    """Open one transcript in the debugger in this process and print the costs as JSON."""
    import resource
    import time

    import agentnb as anb
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out: dict[str, float] = {}
    c = time.process_time()
    transcript = anb.Transcript.load(path)
    out["load"] = time.process_time() - c
    c = time.process_time()
    dbg = anb.Debugger(transcript, start="end")
    out["debugger"] = time.process_time() - c
    c = time.process_time()
    dbg._repr_mimebundle_()
    out["display"] = time.process_time() - c
    n = len(transcript)
    sent: list[tuple[Any, Any]] = []
    tree_at: list[float] = []

    def send(content: Any, buffers: Any = None) -> None:
        sent.append((content, buffers))
        if content.get("kind") == "tree":
            tree_at.append(time.perf_counter())

    dbg.view.send = send  # type: ignore[method-assign]
    t = time.perf_counter()
    dbg._on_msg(None, {"kind": "hello", "page": "bench"}, [])  # what the widget answers a page's hello with
    out["hello"] = time.perf_counter() - t
    wait = getattr(dbg._tree, "wait", None)  # a tree built in the background: until it is sent
    if wait is not None:
        wait()
    out["tree"] = (tree_at[0] if tree_at else time.perf_counter()) - t
    out["rows MB"] = sum(len(json.dumps(content)) + sum(len(b) for b in buffers or ())
                         for content, buffers in sent) / 1e6
    out["peak MB"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    out["n"] = n
    print(json.dumps(out))


def measure(tree: Path, path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    got = subprocess.run([sys.executable, __file__, "--child", str(path)], env=env, check=True,
                         capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(got.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the version to compare with")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transcript", type=Path, help="a transcript to use instead of generating one per size")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    from debugger import long_run

    folder = Path(tempfile.mkdtemp(prefix="agentnb-bench-"))
    trees = {"before": args.before.resolve(), "after": ROOT}
    print(f"the debugger's kernel share: before = {trees['before']}, after = {ROOT}; CPU s, medians of "
          f"{args.repeats}, alternating, fresh processes; load, debugger, display: CPU s; hello, tree: wall s "
          "after the page's hello; total: load to hello answered")
    print(f"  {'events':>9} {'':<7}" + "".join(f"{s:>10}" for s in (*COLUMNS, "total", "peak MB", "rows MB")))
    sources = [args.transcript] if args.transcript else args.sizes
    for size in sources:
        if isinstance(size, Path):
            path = size
        else:
            path = folder / f"run-{size}.jsonl"
            long_run(size).transcript.save(path)
        got: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                got[name].append(measure(tree, path))
        for name in trees:
            med = {k: statistics.median(g[k] for g in got[name])
                   for k in (*COLUMNS, "peak MB", "rows MB", "n")}
            total = sum(med[s] for s in STEPS)
            print(f"  {med['n']:>9,.0f} {name:<7}" + "".join(f"{med[s]:>10.2f}" for s in COLUMNS)
                  + f"{total:>10.2f}{med['peak MB']:>10.0f}{med['rows MB']:>10.1f}")
        if path.parent == folder:
            path.unlink()
    folder.rmdir()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
