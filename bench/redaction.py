"""The cost of masking secrets in streams: a call's arguments (1 MB) arriving in 8-byte fragments.

For each stream the same fragments go through:

- ``join``: the least a stream accumulator can do (append each fragment, join at the end);
- ``StreamRedactor``: agentnb's stream redactor, which holds back what could still become a secret and
  releases the rest masked (one ``feed`` per fragment, as the driver does for every ``ArgumentsMerged``).

Streams: ordinary arguments (a file body, no secret), the same body under a secret key (``"password"``: the
whole value is held, then masked), and a hostile 1 MB value under a secret key (past ``MAX_HOLD`` it is masked
whole and swallowed, so the cost stays linear). Medians of several repeats, all measured in this run; the
machine is shared and noisy, so read the ratios.

    python bench/redaction.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable

from agentnb.redact import StreamRedactor

SIZE = 1_000_000
FRAGMENT = 8


def fragments(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


def streams() -> dict[str, list[str]]:
    body = ("Line of text with a tab and a newline; " * (SIZE // 39 + 1))[:SIZE]
    return {
        "ordinary arguments": fragments(json.dumps({"path": "notes/big.txt", "body": body})),
        "short secret field": fragments(json.dumps({"password": "zq9-plain-credential-7731", "body": body})),
        "1 MB secret value": fragments(json.dumps({"password": "x" * SIZE, "after": "kept"})),
    }


def join(frags: list[str]) -> None:
    out = []
    for f in frags:
        out.append(f)
    "".join(out)


def redactor(frags: list[str]) -> None:
    r = StreamRedactor()
    out = []
    for f in frags:
        out.append(r.feed(f))
    "".join(out)


def median(fn: Callable[[list[str]], None], frags: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.process_time()
        fn(frags)
        times.append(time.process_time() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"masking a 1 MB stream in {FRAGMENT}-byte fragments (CPU time, median of {args.repeats})")
    print(f"{'stream':<22}{'fragments':>10}{'join ms':>10}{'redactor ms':>13}{'us/fragment':>13}{'ratio':>8}")
    for name, frags in streams().items():
        base = median(join, frags, args.repeats)
        ours = median(redactor, frags, args.repeats)
        print(f"{name:<22}{len(frags):>10,}{base * 1e3:>10.1f}{ours * 1e3:>13.1f}"
              f"{(ours - base) / len(frags) * 1e6:>13.2f}{ours / base:>7.1f}x")


if __name__ == "__main__":
    main()
