"""How closely the linter, the emulator and the adapters agree with the real services (the recorded corpus).

Prints, per wire API: accepted requests linted clean / total, refused requests flagged / in scope, the
emulator's agreement (2xx for accepted, 4xx for refused in scope) and its 5xx count, and responses whose calls
parse as the raw body holds. ``--show`` lists every disagreement. The emulator runs with
``verify_signatures=False``: thinking signatures, thought signatures and encrypted reasoning issued by the real
services can only be verified by them (today's emulator accepts those by default too; the option keeps the
figures comparable with emulators from before that).

    PYTHONPATH=$PWD python bench/conformance.py [--show]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conformance_corpus import APIS, measure  # noqa: E402


def main() -> None:
    """Measure and print the table."""
    from agentnb.emulator import Emulator

    show = "--show" in sys.argv
    print(f"{'wire API':18} {'accepted clean':>15} {'refused flagged':>16} {'emulator agrees':>16} {'5xx':>4} "
          f"{'responses':>10}")
    try:  # signatures the real services issued can only be verified by them
        emu = Emulator(verify_signatures=False)
    except TypeError:  # an emulator from before the option: trust them the same way
        emu = Emulator()
        emu._verify = lambda *_: True  # type: ignore[method-assign]
    with emu:
        for api in APIS:
            t = measure(api, emu)
            print(f"{api:18} {t.accepted_clean:>7}/{t.accepted:<7} {t.flagged:>8}/{t.in_scope:<7} "
                  f"{t.emulator_agrees:>8}/{t.emulator_total:<7} {t.emulator_5xx:>4} "
                  f"{t.responses_agree:>4}/{t.responses:<5}")
            if show:
                for d in t.disagreements:
                    print("   ", d[:400])


if __name__ == "__main__":
    main()
