"""The scan cache: one small JSON file per run digest, holding the hits of each scanner (name and version) on it.

Layout: ``<cache>/<digest[:2]>/<digest>.json``, where ``digest`` is the SHA-256 of the run's events in the log's
own encoding (one line per event, as :meth:`~agentnb.Transcript.save` writes them), and the file maps each
``name@version`` to its hits. A run that gained an event, or whose events changed, has another digest and is
scanned again; a scanner whose version changed finds no entry under its new key. A run's file is written once
its scanners are done, to a temporary name renamed into place, merged with the entries already there; so a scan
stopped at any point leaves only whole files, and the next scan picks up where it stopped. A file that cannot be
read (cut, edited by hand) is a miss: the run is scanned again and the file replaced. (Two scans writing the
same run's file at the same moment may each keep only their own entries: the other's is then a miss, scanned
again, never a wrong answer.) One file per run rather than per scanner and run: creating files is most of what
writing a cache costs (see ``bench/scan.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from .._transcript import Transcript
from ..events import event_to_json
from ._core import Hit, Scanner

FORMAT = "agentnb-scan"


def digest(transcript: Transcript) -> str:
    """SHA-256 of a run's events, in the log's encoding (what a cached result is keyed by)."""
    h = hashlib.sha256()
    for ev in transcript.events:
        h.update(event_to_json(ev).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


class Cache:
    """The cache directory of a scan (created on first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"the scan cache {self.root} is a file; give a directory")

    def path(self, run_digest: str) -> Path:
        """Where the hits on the run of ``run_digest`` are kept."""
        return self.root / run_digest[:2] / f"{run_digest}.json"

    def _read(self, run_digest: str) -> dict[str, Any]:
        try:
            data = json.loads(self.path(run_digest).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        results = data.get("results") if isinstance(data, dict) and data.get("format") == FORMAT else None
        return results if isinstance(results, dict) else {}

    def get(self, scanners: list[Scanner], run_digest: str) -> dict[str, list[Hit]]:
        """``{scanner name: hits}`` of the scanners whose results on this run are kept (by name and version)."""
        results = self._read(run_digest)
        out: dict[str, list[Hit]] = {}
        for s in scanners:
            entry = results.get(s.key)
            if isinstance(entry, list):
                try:
                    out[s.name] = [Hit.from_json(h) for h in entry]
                except (TypeError, AttributeError, ValueError):
                    continue  # an entry edited by hand: scan again
        return out

    def put(self, run_digest: str, run_id: str, found: dict[Scanner, list[Hit]]) -> None:
        """Write the hits of one run's scanners atomically (merged with the entries already kept)."""
        if not found:
            return
        target = self.path(run_digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        results = self._read(run_digest)
        results.update({s.key: [h.to_json() for h in hits] for s, hits in found.items()})
        data: dict[str, Any] = {"format": FORMAT, "run_id": run_id, "results": results}
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8", errors="surrogatepass")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
