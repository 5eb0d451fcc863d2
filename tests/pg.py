"""Start a real, throwaway PostgreSQL server for tests.

``initdb`` a fresh cluster in a temporary directory, start it on a free loopback port
(its unix socket in the same directory, fsync off for speed), create a database and
hand out its DSN; stop and delete everything afterwards. PostgreSQL refuses to run as
root, so as root the server runs as the ``postgres`` system user (``runuser``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

INSTALL_HINT = "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
SERVER_USER = "postgres"
DATABASE = "bot_test"


class PostgresUnavailable(Exception):
    """The binaries are missing (tests skip on this, and only on this)."""


def find_bindir() -> Path | None:
    """The newest Debian-style ``/usr/lib/postgresql/<ver>/bin``, else ``pg_ctl`` on PATH."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0,
    )
    for directory in reversed(candidates):
        if _has_binaries(Path(directory)):
            return Path(directory)
    on_path = shutil.which("pg_ctl")
    if on_path and _has_binaries(Path(on_path).parent):
        return Path(on_path).parent
    return None


def _has_binaries(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in ("initdb", "pg_ctl"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user() -> tuple[str, ...]:
    """The command prefix that runs PostgreSQL's tools as a user it accepts."""
    if os.geteuid() != 0:
        return ()
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise RuntimeError(
            f"running as root needs a {SERVER_USER!r} system user to run PostgreSQL "
            "(apt-get install postgresql creates it)"
        ) from None
    return ("runuser", "-u", SERVER_USER, "--")


def _run(command: list[str], log: Path) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        server_log = log.read_text(errors="replace") if log.exists() else ""
        raise RuntimeError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n"
            f"{result.stderr}\n{server_log}"
        )


def _chown_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass(frozen=True)
class _Cluster:
    bindir: Path
    root: Path
    prefix: tuple[str, ...]  # runs a tool as a user PostgreSQL accepts

    @property
    def data(self) -> str:
        return str(self.root / "data")

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def tool(self, name: str, *args: str) -> list[str]:
        return [*self.prefix, str(self.bindir / name), *args]


def _start(cluster: _Cluster) -> int:
    """Start the server; retry on another port when the chosen one was taken meanwhile."""
    for attempt in range(3):
        port = free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {cluster.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        start = ("-D", cluster.data, "-l", str(cluster.log), "-o", options, "-w", "-t", "60")
        try:
            _run(cluster.tool("pg_ctl", *start, "start"), cluster.log)
            return port
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the DSN of a fresh database on a private, running PostgreSQL server."""
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(INSTALL_HINT)
    cluster = _Cluster(bindir, Path(tempfile.mkdtemp(prefix="bot-pg-")), _as_server_user())
    _chown_to_server_user(cluster.root)
    started = False
    try:
        init = ("-D", cluster.data, "-U", SERVER_USER, "-A", "trust", "-E", "UTF8")
        _run(cluster.tool("initdb", *init, "--no-sync", "--no-instructions"), cluster.log)
        port = _start(cluster)
        started = True
        admin = f"postgresql://{SERVER_USER}@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        yield f"postgresql://{SERVER_USER}@127.0.0.1:{port}/{DATABASE}"
    finally:
        if started:
            stop = cluster.tool("pg_ctl", "-D", cluster.data, "-m", "immediate", "-w", "stop")
            subprocess.run(stop, capture_output=True, timeout=60, check=False)
        shutil.rmtree(cluster.root, ignore_errors=True)
