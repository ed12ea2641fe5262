"""Connection strings of the test databases: one database of the embedded server, and the login role
that `episodes api` and MCP connect as (jobs.db.SERVICE_ROLE); and the reaper that leaves no server behind."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg

from jobs import migrate
from jobs.db import SERVICE_ROLE


def url_for(admin_url: str, dbname: str) -> str:
    """``admin_url`` with its database name replaced by ``dbname``."""
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo("", **info)


def migrations_up_to(version: int) -> Callable[[], list[migrate.Migration]]:
    """A stand-in for ``migrate.available`` that ships the migrations up to ``version`` only (monkeypatch it in to
    build a database as an older release left it)."""
    shipped = migrate.available()
    return lambda: [m for m in shipped if m.version <= version]


def service_url(db_url: str) -> str:
    """``db_url`` logging in as the service role (no password: the embedded server trusts local logins)."""
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info["user"] = SERVICE_ROLE
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **info)


# The reaper: a process of its own that waits for the pytest process to end, however it ends.
_REAPER = r"""
import os, shutil, signal, sys, time
from pathlib import Path

def running(pid, pgdata):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:  # a pid reused by another program is not ours to stop
        return str(pgdata).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True

def stop(pgdata):
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    if not running(pid, pgdata):
        return
    os.kill(pid, signal.SIGINT)  # fast shutdown
    deadline = time.monotonic() + 30
    while running(pid, pgdata):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.1)

def sweep(root):
    for pid_file in sorted(root.rglob("postmaster.pid")) if root.is_dir() else ():
        stop(pid_file.parent)
        shutil.rmtree(pid_file.parent, ignore_errors=True)

scan = Path(sys.argv[1])
folders = [Path(line.strip()) for line in sys.stdin if line.strip()]  # until EOF: the pytest process ended
for folder in folders:
    sweep(folder)
    shutil.rmtree(folder, ignore_errors=True)
sweep(scan)
"""


class Reaper:
    """Stops the embedded PostgreSQL servers of a pytest process and removes their data, however that
    process ends: a normal end, Ctrl-C, SIGTERM, SIGKILL or a crash (issue 46, finding 20). A session
    fixture's teardown runs on a normal end and on Ctrl-C only; SIGTERM ended pytest with the session's
    server and those of tests (in EPISODES_HOME under pytest's temporary folder) still running, 160 MB of
    data left behind.

    A Python process in a session of its own (so the terminal's Ctrl-C and a signal to the process group
    do not reach it) reads the folders given to :meth:`watch` from a pipe; the pipe's end of file (this
    process gone, or :meth:`close`) is its signal. It then stops every server whose ``postmaster.pid`` is
    in those folders or under ``scan`` (pytest's base temporary folder), fast shutdown, and removes the
    folders and those servers' data directories."""

    def __init__(self, scan: Path) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(scan)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def watch(self, folder: Path) -> None:
        """Remove ``folder`` (and stop the servers in it) once this process has ended."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(f"{folder}\n")
        self._proc.stdin.flush()

    def close(self) -> None:
        """This process ends now: the reaper sweeps (servers the tests left running under ``scan``) and exits."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pass  # it carries on by itself
