"""A Jupyter server (JupyterLab or Notebook 7) on 127.0.0.1 with every directory in a temporary folder.

Used by the browser tests' fixtures and by ``bench/debugger_browser.py``. No outbound calls: news and update
checks are off, the extension manager is read-only. Recipe and pitfalls: BROWSER_TESTING.md.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def jupyter_server(base: Path, app: str = "jupyterlab", extra_env: dict[str, str] | None = None,
                   ) -> Iterator[dict[str, Any]]:
    """Run ``python -m <app>`` (``jupyterlab`` or ``notebook``) until the block ends; yields url, token, root.

    ``extra_env``: more environment for the server and its kernels (a benchmark's ``PYTHONPATH``).
    """
    root = base / "root"
    root.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_TOKEN"} | (extra_env or {})
    dirs = {}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                 "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR", "HOME", "TMPDIR"):
        d = base / name.lower()
        d.mkdir()
        dirs[name] = d
        env[name] = str(d)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    config = {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
              "extension_manager": "readonly"}
    (dirs["JUPYTER_CONFIG_DIR"] / "jupyter_server_config.json").write_text(json.dumps({
        "LabApp": config, "JupyterNotebookApp": config,
    }))
    settings = dirs["JUPYTERLAB_SETTINGS_DIR"]
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    port, token = free_port(), "agentnb-test-token"
    cmd = [sys.executable, "-m", app, "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--ServerApp.terminals_enabled=False"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(base / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                req = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
                with urllib.request.urlopen(req, timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError(f"{app} did not start:\n{(base / 'server.log').read_text()[-3000:]}") from None
                time.sleep(0.3)
        yield {"url": url, "token": token, "root": root, "settings": settings, "app": app,
               "log": base / "server.log"}
    finally:
        try:
            req = urllib.request.Request(f"{url}/api/shutdown", method="POST",
                                         headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(req, timeout=5)
            proc.wait(timeout=15)
        except Exception:
            pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # kernels run in the server's session
        except ProcessLookupError:
            pass
        log.close()


def write_notebook(root: Path, stem: str, sources: list[str]) -> str:
    """A notebook of code cells ``sources`` under ``root`` (a new name each time); its file name."""
    name = f"{stem}_{int(time.time() * 1000)}.ipynb"
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                     "source": src} for i, src in enumerate(sources)],
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                      "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    (root / name).write_text(json.dumps(nb), encoding="utf-8")
    return name


def run_all(page: Any, timeout: int = 60_000) -> None:
    """Run All Cells in a JupyterLab page once its kernel is idle and no dialog is open."""
    import re

    from playwright.sync_api import expect

    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=timeout)
    expect(page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first).to_be_visible(
        timeout=timeout)
    expect(page.locator(".jp-Dialog")).to_have_count(0, timeout=timeout)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
