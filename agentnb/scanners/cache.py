"""The scan cache: one small JSON file per (scanner, version, run digest), written as each run is scanned.

Layout: ``<cache>/<scanner name>-<key>/<digest>.json``, where ``key`` is a short hash of the scanner's
name and version and ``digest`` is the SHA-256 of the run's events in the log's own encoding (one line per
event, as :meth:`~agentnb.Transcript.save` writes them). A run that gained an event, or whose events changed,
has another digest and is scanned again; a scanner whose version changed reads and writes another directory.
Each file is written to a temporary name and renamed into place, so a scan stopped at any point leaves only
whole files, and the next scan picks up where it stopped. A file that cannot be read (cut, edited by hand) is
a miss: the run is scanned again and the file replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from ..events import event_to_json
from ..transcript import Transcript
from .core import Hit, Scanner

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

    def path(self, scanner: Scanner, run_digest: str) -> Path:
        """Where the hits of ``scanner`` on the run of ``run_digest`` are kept."""
        key = hashlib.sha256(f"{scanner.name}\0{scanner.version}".encode()).hexdigest()[:12]
        return self.root / f"{scanner.name.replace(':', '_')}-{key}" / f"{run_digest}.json"

    def get(self, scanner: Scanner, run_digest: str) -> list[Hit] | None:
        """The cached hits, or None (never scanned, or a file that cannot be read)."""
        try:
            data = json.loads(self.path(scanner, run_digest).read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or data.get("scanner") != scanner.key:
                return None
            return [Hit.from_json(h) for h in data["hits"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, scanner: Scanner, run_digest: str, run_id: str, hits: list[Hit]) -> None:
        """Write the hits of one run atomically (temporary file, then rename)."""
        target = self.path(scanner, run_digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"format": FORMAT, "scanner": scanner.key, "run_id": run_id,
                                "hits": [h.to_json() for h in hits]}
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8", errors="surrogatepass")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
