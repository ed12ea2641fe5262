"""An interrupted test suite leaves no embedded PostgreSQL running and no data behind (issue 46, finding 20).

A suite stopped by SIGTERM used to leave two servers running (the session's, and one a test had started
in its EPISODES_HOME) and 160 MB of data folders: a session fixture's teardown does not run when the
process is killed. tests/support/databases.py's Reaper, a process of its own started by conftest, stops
them and removes their folders once the pytest process has ended, however it ended.

The check runs a small pytest in a subprocess: its one test starts both kinds of server, says where they
are, and waits; the subprocess is then sent SIGTERM.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
PROBE = os.environ.get("SUITE_INTERRUPT_PROBE")  # read at import: the clean_env fixture clears EPISODES_* only


def _servers_of(pgdata: str) -> list[int]:
    """The pids of the PostgreSQL processes running with data directory ``pgdata`` (/proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"postgres") and pgdata.encode() in args:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(
    PROBE is None,
    reason="runs only as the inner suite that test_an_interrupted_suite_leaves_no_server_behind starts and stops",
)
def test_holds_two_servers_until_it_is_stopped(pg_server: object) -> None:
    from jobs import config
    from jobs.db import start_embedded

    own = config.load().pgdata  # the test's EPISODES_HOME (conftest clean_env), under pytest's basetemp
    start_embedded(own)
    assert PROBE is not None
    Path(PROBE).write_text(json.dumps([str(pg_server.pgdata), str(own)]))  # type: ignore[attr-defined]
    threading.Event().wait()  # until the signal


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads the processes from /proc (Linux)")
def test_an_interrupted_suite_leaves_no_server_behind() -> None:
    # Its own base temporary folder, outside /tmp/pytest-of-<user>: run as root, the embedded server runs as
    # another user and opens the folders above its data for it, which every new pytest session closes again.
    base = Path(tempfile.mkdtemp(prefix="episodes-interrupt-"))
    probe = base / "probe.json"
    suite = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            f"{Path(__file__).relative_to(ROOT)}::test_holds_two_servers_until_it_is_stopped",
            "-q",
            "--no-cov",
            "-p",
            "no:randomly",
            f"--basetemp={base / 'tmp'}",
        ],
        cwd=ROOT,
        env={**os.environ, "SUITE_INTERRUPT_PROBE": str(probe)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: probe.exists() or suite.poll() is not None, 300, "the suite to start its two servers")
        assert probe.exists(), suite.communicate()[0].decode()
        folders: list[str] = json.loads(probe.read_text())
        assert all(_servers_of(folder) for folder in folders), folders  # running: the check below can fail
        suite.send_signal(signal.SIGTERM)
        suite.communicate(timeout=120)
        wait_until(
            lambda: not any(_servers_of(f) or Path(f).exists() for f in folders),
            90,
            f"no PostgreSQL running on, and no folder left of, {folders}",
            every=0.2,
        )
        assert not Path(folders[0]).parent.exists()  # the session server's whole temporary folder
    finally:
        if suite.poll() is None:
            suite.kill()
            suite.communicate()
        shutil.rmtree(base, ignore_errors=True)
