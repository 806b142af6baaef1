"""The cost of masking secrets in streams: a call's arguments (1 MB) arriving in 8-byte fragments.

For each stream the same fragments go through:

- ``join``: the least a stream accumulator can do (append each fragment, join at the end);
- ``StreamRedactor``: agentnb's stream redactor, which holds back what could still become a secret and
  releases the rest masked (one ``feed`` per fragment, as the driver does for every ``ArgumentsMerged``).

Streams: ordinary arguments (a file body, no secret), the same body under a secret key (``"password"``: the
whole value is held, then masked), and a hostile 1 MB value under a secret key (past ``MAX_HOLD`` it is masked
whole and swallowed, so the cost stays linear). Medians of several repeats, all measured in this run; the
machine is shared and noisy, so read the ratios.

A second table masks one large tool result (no secret in it, the common case) with ``redact_text`` as it is
and as it was (``before``: one regex search over every key shape, then each pattern), at 1, 10 and 50 MB.

    python bench/redaction.py [--repeats 5] [--result-mb 1,10,50]
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import time
from collections.abc import Callable

from agentnb._redact import StreamRedactor, redact_text
from agentnb._redact.patterns import MASK, PATTERNS, _literal_re

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


_ANY_SHAPE = re.compile("|".join(f"(?:{p.pattern})" for p, _ in PATTERNS))


def redact_text_before(text: str) -> str:
    """``redact_text`` before substring hints: one search over every shape, tried at each position."""
    literals = _literal_re[0]
    if literals is not None:
        text = literals.sub(MASK, text)
    if _ANY_SHAPE.search(text) is None:
        return text
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def results(sizes_mb: list[int], repeats: int) -> None:
    print(f"\nmasking one tool result with no secret in it (CPU time, median of {repeats})")
    print(f"{'size':>8}{'before ms':>12}{'after ms':>12}{'speed-up':>10}")
    for mb in sizes_mb:
        text = ("lorem ipsum dolor sit amet, consectetur " * (mb * 25_000 + 1))[: mb * 1_000_000]
        base = median(lambda _: redact_text_before(text), [], repeats)  # noqa: B023 -- measured at once
        ours = median(lambda _: redact_text(text), [], repeats)  # noqa: B023 -- measured at once
        print(f"{mb:>6} MB{base * 1e3:>12.0f}{ours * 1e3:>12.0f}{base / ours:>9.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--result-mb", default="1,10,50")
    args = parser.parse_args()
    print(f"masking a 1 MB stream in {FRAGMENT}-byte fragments (CPU time, median of {args.repeats})")
    print(f"{'stream':<22}{'fragments':>10}{'join ms':>10}{'redactor ms':>13}{'us/fragment':>13}{'ratio':>8}")
    for name, frags in streams().items():
        base = median(join, frags, args.repeats)
        ours = median(redactor, frags, args.repeats)
        print(f"{name:<22}{len(frags):>10,}{base * 1e3:>10.1f}{ours * 1e3:>13.1f}"
              f"{(ours - base) / len(frags) * 1e6:>13.2f}{ours / base:>7.1f}x")
    results([int(x) for x in args.result_mb.split(",")], args.repeats)


if __name__ == "__main__":
    main()
