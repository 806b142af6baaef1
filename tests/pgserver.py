"""A throw-away PostgreSQL cluster from Debian's ``postgresql`` package, for tests, benches and ``make pg``.

``initdb`` refuses to run as root, and CI runs as root: when we are root the cluster is created and run as the
unprivileged ``postgres`` user the Debian package makes (or ``agentnb-pg``, created with ``useradd`` when that
user is missing). The cluster lives in a fresh temporary directory owned by that user, listens on 127.0.0.1 on
a free port (its Unix socket goes in the data directory, not ``/var/run``), and its superuser ``agentnb`` has a
random password, so nothing else on the machine can use it by accident. ``stop()`` shuts it down and deletes it.

    python -m tests.pgserver start [DIR]   # prints `export AGENTNB_PG_DSN=...` (make pg)
    python -m tests.pgserver stop DIR
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


def pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (the newest Debian version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _server_user() -> str | None:
    """The user the server runs as: None when we are not root (we run it ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "agentnb-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "agentnb-pg"],
                   check=True, capture_output=True)
    return "agentnb-pg"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running throw-away cluster."""

    datadir: Path
    port: int
    password: str
    bindir: Path
    user: str | None
    options: str = ""
    """The server's command-line options (its port among them): what :meth:`start` starts it with again."""

    @property
    def dsn(self) -> str:
        """A libpq connection string for the ``agentnb`` database (created at start)."""
        return self.dsn_for("agentnb")

    def dsn_for(self, database: str) -> str:
        """A libpq connection string for one database of the cluster."""
        return f"postgresql://agentnb:{self.password}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), user=self.user, cwd=self.datadir, capture_output=True, text=True,
                              check=False, env={**os.environ, "LC_ALL": "C.UTF-8"})

    def start(self) -> None:
        """Start the server again after ``stop(remove=False)``, on the same port (a server that came back)."""
        started = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir / "data"), "-l",
                            str(self.datadir / "log"), "-w", "-t", "30", "-o", self.options, "start")
        if started.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()}")

    def stop(self, *, remove: bool = True) -> None:
        """Stop the server (immediately: it holds nothing worth keeping) and delete its directory."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir / "data"), "-m", "immediate", "-w", "stop")
        if remove:
            shutil.rmtree(self.datadir, ignore_errors=True)


def start_cluster(directory: str | Path | None = None, *, fsync: bool = False) -> Cluster:
    """Create and start a cluster; raise ``RuntimeError`` saying why when PostgreSQL cannot run here.

    ``fsync=False`` suits tests (the server itself is never killed, only its clients); benches pass True.
    """
    bindir = pg_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    user = _server_user()
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="agentnb-pg-"))
    root.mkdir(parents=True, exist_ok=True)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    password = secrets.token_hex(16)
    cluster = Cluster(root, 0, password, bindir, user)
    pwfile = root / "pw"
    pwfile.write_text(password + "\n")
    if user is not None:
        os.chown(pwfile, pwd.getpwnam(user).pw_uid, -1)
    made = cluster._run(str(bindir / "initdb"), "-D", str(root / "data"), "-U", "agentnb", f"--pwfile={pwfile}",
                        "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions")
    pwfile.unlink()
    if made.returncode != 0:
        raise RuntimeError(f"initdb failed: {made.stderr.strip() or made.stdout.strip()}")
    options = [f"-c unix_socket_directories={root}", "-c listen_addresses=127.0.0.1", "-c max_connections=300",
               f"-c fsync={'on' if fsync else 'off'}", "-c full_page_writes=off" if not fsync else ""]
    for _ in range(5):  # the free port may be taken between the probe and the bind: try another
        cluster.port = _free_port()
        cluster.options = " ".join([f"-p {cluster.port}", *options])
        started = cluster._run(str(bindir / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-w",
                               "-t", "30", "-o", cluster.options, "start")
        if started.returncode == 0:
            break
    else:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {log[-800:]}")
    import psycopg

    try:
        with psycopg.connect(cluster.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE agentnb")
    except BaseException:  # a server nobody can use must not outlive the caller
        cluster.stop()
        raise
    return cluster


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "start":
        cluster = start_cluster(Path(argv[1]).resolve() if len(argv) > 1 else None, fsync=True)
        (cluster.datadir / "dsn").write_text(cluster.dsn + "\n")
        print(f"# PostgreSQL {cluster.bindir.parent.name} in {cluster.datadir}; stop: python -m tests.pgserver stop "
              f"{cluster.datadir}")
        print(f"export AGENTNB_PG_DSN='{cluster.dsn}'")
        return 0
    if len(argv) == 2 and argv[0] == "stop":
        root = Path(argv[1]).resolve()
        bindir = pg_bin()
        if bindir is None:
            return 1
        Cluster(root, 0, "", bindir, _server_user()).stop()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
