"""The package as a stranger gets it: an sdist and a wheel built from a clean copy, installed in a fresh venv.

``build(tmp)`` copies the checkout's tracked shape (no ``.git``, caches, tests or notebooks) and runs
``python -m build`` on it: the sdist first, then the wheel built *from that sdist*, so a file missing from the
sdist shows as a broken wheel. ``install(wheel, tmp)`` makes a virtualenv outside the checkout, without the
system's site-packages, and installs the wheel with every extra a user can ask for (``EXTRAS``) from the
package index, as ``pip install 'agentnb[...]'`` would; pip's own cache keeps the second time fast.

Run as a script it does both and prints where (``python -m tests.wheelhouse [DIR]``); ``make wheel`` builds
only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXTRAS: dict[str, tuple[str, ...]] = {
    # extra -> what a user of it imports (the third-party package, then agentnb's module that needs it)
    "openai": ("openai", "agentnb.providers.openai_chat._model"),
    "anthropic": ("anthropic", "agentnb.providers.anthropic._model"),
    "gemini": ("google.genai", "agentnb.providers.gemini._model"),
    "ollama": ("ollama", "agentnb.providers.ollama._model"),
    "mcp": ("mcp", "jsonschema", "agentnb.mcp"),
    "postgres": ("psycopg", "psycopg_pool", "agentnb.store._postgres"),
    "dask": ("dask", "distributed", "agentnb._batch"),
    "otel": ("opentelemetry.sdk.trace", "agentnb.otel"),
    "analysis": ("pyarrow", "matplotlib", "duckdb", "agentnb._plots"),
    "lab": ("jupyterlab", "ipykernel"),
}
"""Every extra a user installs, and the modules that must import once it is installed."""

NOT_SMOKED = {"all": "the union of openai, anthropic, gemini, ollama and analysis",
              "dev": "the contributor's set (tests, linters), not a user's",
              "docs": "the docs site's build tools, installed by `make docs`, not a user's"}
"""The extras the smoke test does not install, and why."""

IGNORED = (".git", ".venv", "build", "dist", "site", "*.egg-info", "__pycache__", "test-artifacts", ".*_cache",
           "notebooks", "tests", ".pg", ".hypothesis")


@dataclass(frozen=True)
class Built:
    """An sdist and the wheel built from it."""

    sdist: Path
    wheel: Path
    seconds: float


@dataclass(frozen=True)
class Installed:
    """A fresh virtualenv with the wheel and its extras installed."""

    venv: Path
    python: Path
    command: Path
    seconds: float

    def run(self, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run a program of the venv (``python``, ``agentnb``) with nothing of the checkout on the path."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}/usr/bin:/bin"
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def build(tmp: Path) -> Built:
    """The sdist and wheel of a clean copy of the checkout, in ``tmp/dist``."""
    start = time.perf_counter()
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*IGNORED))
    proc = subprocess.run([sys.executable, "-m", "build", "-q", "--outdir", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"python -m build failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    (sdist,) = (tmp / "dist").glob("agentnb-*.tar.gz")
    (wheel,) = (tmp / "dist").glob("agentnb-*.whl")
    return Built(sdist, wheel, time.perf_counter() - start)


def install(wheel: Path, tmp: Path) -> Installed:
    """A virtualenv under ``tmp`` (no system site-packages) holding ``wheel`` with every extra of ``EXTRAS``."""
    start = time.perf_counter()
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    spec = f"agentnb[{','.join(EXTRAS)}] @ {wheel.as_uri()}"
    # --no-compile: the byte code is written on first import instead, most of it never needed here
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", spec],
                          capture_output=True, text=True, timeout=1800, cwd=tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install {spec} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return Installed(venv, python, venv / "bin" / "agentnb", time.perf_counter() - start)


if __name__ == "__main__":
    import tempfile

    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="agentnb-wheel-"))
    where.mkdir(parents=True, exist_ok=True)
    built = build(where)
    print(f"built {built.sdist.name} and {built.wheel.name} in {built.seconds:.1f} s")
    installed = install(built.wheel, where)
    print(f"installed with [{','.join(EXTRAS)}] into {installed.venv} in {installed.seconds:.1f} s")
