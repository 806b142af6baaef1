"""The wheel a stranger installs: built from the sdist, installed in a fresh venv outside the checkout, used there.

One venv per session (``installed`` in ``tests/conftest.py``, built by ``tests/wheelhouse.py``). These tests are
marked ``wheel``: ``make test`` runs them as a step of their own after the suite (about two minutes, most of it
pip installing the extras' packages), the Chromium half is ``tests/browser/test_wheel_browser.py``.
"""

from __future__ import annotations

import json
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from tests.wheelhouse import EXTRAS, NOT_SMOKED, ROOT

pytestmark = pytest.mark.wheel

SCRIPTED_RUN = """
import json, sys
import agentnb as anb

loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
run = loop.start("Please refund order 42").run()
waiting = run.state.name
run.approve(run.pending_approvals()[0].call_id)
run.run()
run.transcript.save("refund.jsonl")
print(json.dumps({"file": anb.__file__, "version": anb.__version__, "waiting": waiting,
                  "state": run.state.name, "output": run.output, "events": len(run.events)}))
"""

IMPORTS = """
import importlib, json, sys
extras = json.loads(sys.argv[1])
failed = {}
for extra, modules in extras.items():
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.setdefault(extra, []).append(f"{name}: {type(exc).__name__}: {exc}")
print(json.dumps(failed))
"""


def test_the_sdist_and_wheel_carry_the_package_and_the_front_end(built_dist: Any) -> None:
    front_end = sorted(p.name for p in (ROOT / "widgets").iterdir() if p.suffix in (".js", ".css"))
    assert front_end, "widgets/ holds the front end"
    with zipfile.ZipFile(built_dist.wheel) as zf:
        names = set(zf.namelist())
        for name in front_end:  # byte for byte, as agentnb/_widgets (setup.py maps the folder)
            assert zf.read(f"agentnb/_widgets/{name}") == (ROOT / "widgets" / name).read_bytes(), name
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "agentnb = agentnb._cli:main" in zf.read(entry_points).decode()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        license_text = zf.read(next(n for n in names if n.endswith(".dist-info/licenses/LICENSE")))
    assert not any(n.startswith(("widgets/", "tests/", "notebooks/")) for n in names)
    assert "agentnb/_debugger/assets.py" in names and "agentnb/_version.py" in names
    assert license_text == (ROOT / "LICENSE").read_bytes() and b"the agentnb authors" in license_text
    assert "License-Expression: MIT\n" in metadata and "License-File: LICENSE\n" in metadata
    assert f"Version: {anb.__version__}\n" in metadata  # the one version, agentnb/_version.py
    assert built_dist.wheel.name == f"agentnb-{anb.__version__}-py3-none-any.whl"
    for extra in EXTRAS:
        assert f"Provides-Extra: {extra}\n" in metadata, extra
    with tarfile.open(built_dist.sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "setup.py", "README.md", "LICENSE", "widgets/debugger.js",
            "widgets/debugger.css"} <= members


def test_every_extra_is_smoke_tested_or_says_why_not() -> None:
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert declared == set(EXTRAS) | set(NOT_SMOKED), "a new extra needs its imports in tests/wheelhouse.py EXTRAS"


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Any, tmp_path: Path) -> None:
    proc = installed.run(str(installed.python), "-c", SCRIPTED_RUN, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert Path(out["file"]).is_relative_to(installed.venv), out["file"]
    assert out["version"] == anb.__version__
    assert (out["waiting"], out["state"]) == ("WAITING_APPROVAL", "COMPLETED")
    assert out["output"] and out["events"] == len(anb.Transcript.load(tmp_path / "refund.jsonl").events)


def test_the_command_answers_from_the_venv(installed: Any, tmp_path: Path) -> None:
    help_ = installed.run(str(installed.command), "--help", cwd=tmp_path)
    assert help_.returncode == 0, help_.stderr
    for verb in ("view", "export", "lint", "import", "runs", "approve", "deny", "emulator"):
        assert verb in help_.stdout, verb
    version = installed.run(str(installed.python), "-m", "agentnb", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"agentnb {anb.__version__}", version.stderr
    bad = installed.run(str(installed.command), "export", "missing.jsonl", "-o", "x.html", cwd=tmp_path)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr, bad.stderr


def test_each_extra_imports(installed: Any, tmp_path: Path) -> None:
    proc = installed.run(str(installed.python), "-c", IMPORTS, json.dumps(EXTRAS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {}


def test_the_system_site_packages_are_not_seen(installed: Any, tmp_path: Path) -> None:
    cfg = (installed.venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    proc = installed.run(str(installed.python), "-c", "import pytest", cwd=tmp_path)  # a dev-only package
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr
