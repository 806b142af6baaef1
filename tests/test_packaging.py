"""The wheel ships the front end: widgets/ becomes agentnb/_widgets/, byte for byte (see setup.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_the_front_end_unchanged(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                            "test-artifacts", ".*_cache", "notebooks", "tests"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                           str(src)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "No matching distribution" in proc.stderr + proc.stdout:
        pytest.skip("no package index to fetch the build backend from")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("agentnb-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        front_end = sorted(p.name for p in (ROOT / "widgets").iterdir() if p.suffix in (".js", ".css"))
        assert front_end, "widgets/ holds the front end"
        for name in front_end:
            assert zf.read(f"agentnb/_widgets/{name}") == (ROOT / "widgets" / name).read_bytes(), name
    assert not any(n.startswith("widgets/") for n in names)  # nothing lands outside the package
    assert "agentnb/debugger/assets.py" in names
    # installed (unpacked, as pip does), the package reads its own copy through importlib.resources
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    probe = ("import agentnb.debugger.assets as a, importlib.resources as r; "
             "assert not a.SOURCE.exists(); "
             "assert a.text('debugger.js') == r.files('agentnb._widgets').joinpath('debugger.js').read_text(); "
             "print(len(a.text('debugger.css')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) == len((ROOT / "widgets" / "debugger.css").read_text(encoding="utf-8"))
