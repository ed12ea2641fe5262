"""How a ``claude`` child process runs: what it may see of our environment, that it dies with us,
and that it is recent enough (issue 46, findings 10 and 11). :mod:`jobs.llm.claude_cli` runs every
request, and the version check, through :func:`run_child`.

**An allow-list environment.** The child gets only what the CLI needs to start and sign in, not our
whole environment (which holds database URLs with passwords, ``OPENAI_API_KEY``,
``VOYAGE_API_KEY``, ``EPISODES_LINK_SECRET``): see :data:`ENV_NAMES` and :data:`ENV_PREFIXES`, the
list docs/extractors.md shows. The cloud credentials of Bedrock (``AWS_*``) and Vertex
(``GOOGLE_*``, ``CLOUD_ML_*``, ``VERTEX_REGION_*``) are passed only when the CLI is told to use that
cloud (``CLAUDE_CODE_USE_BEDROCK`` / ``CLAUDE_CODE_USE_VERTEX``), as the CLI itself needs them then.
``NODE_OPTIONS`` is not passed: it can load code into the CLI.

**It dies with us.** The child starts in a session (and process group) of its own, so a Ctrl-C at
the terminal reaches only us: `episodes run` gives the in-flight request its grace period, then
gives the claim back. Whatever ends this process then ends the child's whole group: an exception or
timeout while waiting (the group is killed), the interpreter's exit (:func:`_kill_all`, at exit),
and on Linux also SIGKILL or a crash (``PR_SET_PDEATHSIG``, set in the child between fork and exec
through ctypes; the function is looked up before the fork, and the hook calls only it,
``os.getppid`` and ``os._exit``).

**A minimum version.** Before its first request this process asks ``claude --version`` once per
executable; older than :data:`MINIMUM_VERSION` is a :class:`~jobs.errors.ConfigError` (the run stops,
the claim is given back, no attempt is counted). Claude Code 2.1.197 dropped the ``StructuredOutput``
tool under ``--tools ""``, so every request failed and was retried until the session was
dead-lettered. The minimum is the oldest version the suite has run against
(tests/test_claude_code_extractor.py); lower it only after running that file on the older version.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping

from jobs.config import child_environment
from jobs.errors import ConfigError

MINIMUM_VERSION = (2, 1, 332)
UPGRADE = "npm install -g @anthropic-ai/claude-code@latest, or `claude update`"
VERSION_TIMEOUT_SECONDS = 60.0

# What the CLI needs to run, find its login and reach the service through a proxy.
ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "API_TIMEOUT_MS",
        "MAX_THINKING_TOKENS",
        # Windows: where the user's profile and the system are
        "SYSTEMROOT",
        "USERPROFILE",
        "APPDATA",
        "LOCALAPPDATA",
        "PATHEXT",
        "COMSPEC",
    }
)
# The CLI's own settings and sign-in (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CONFIG_DIR,
# CLAUDE_CODE_*), its DISABLE_* switches (DISABLE_TELEMETRY ...), and the locale.
ENV_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "DISABLE_", "LC_")
CLOUD_PREFIXES = {
    "CLAUDE_CODE_USE_BEDROCK": ("AWS_",),
    "CLAUDE_CODE_USE_VERTEX": ("GOOGLE_", "CLOUD_ML_", "VERTEX_REGION_", "GCLOUD_", "CLOUDSDK_"),
}


def allowed_environment(**changes: str) -> dict[str, str]:
    """The child's environment: the allowed variables of ours, with ``changes``."""
    ours = child_environment()
    prefixes = ENV_PREFIXES + tuple(
        prefix
        for switch, cloud in CLOUD_PREFIXES.items()
        if (ours.get(switch) or "").strip().lower() not in ("", "0", "false", "no")
        for prefix in cloud
    )
    kept = {name: value for name, value in ours.items() if name in ENV_NAMES or name.startswith(prefixes)}
    return {**kept, **changes}


_live: set[subprocess.Popen[str]] = set()
_live_lock = threading.Lock()
_exiting = threading.Event()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook that has the kernel SIGKILL the child when its parent goes (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent went between the fork and the prctl
            os._exit(1)

    return hook


def _kill(child: subprocess.Popen[str]) -> None:
    """SIGKILL the child's whole process group (it leads one: start_new_session)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:
        child.kill()


@atexit.register
def _kill_all() -> None:
    """At the interpreter's exit, end every child still running (a request cut off by an interrupt)."""
    _exiting.set()
    with _live_lock:
        children = list(_live)
    for child in children:
        _kill(child)


def run_child(
    args: list[str], *, input: str | None, cwd: str | None, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` for the ``claude`` child, in its own process group that dies with us:
    raises ``subprocess.TimeoutExpired`` (the group killed) and ``OSError`` as ``subprocess.run`` does."""
    with subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        preexec_fn=_die_with_parent(),  # only prctl, getppid and _exit run in the child
    ) as child:
        with _live_lock:
            _live.add(child)
        try:
            out, err = child.communicate(input, timeout=timeout)
        except BaseException:
            _kill(child)
            raise
        finally:
            with _live_lock:
                _live.discard(child)
    if _exiting.is_set():
        # This process is exiting and killed the child: its claim was given back already, so the
        # thread reports nothing; it waits for the interpreter to end it.
        threading.Event().wait()
    return subprocess.CompletedProcess(args, child.returncode, out, err)


_checked: dict[str, tuple[int, ...] | str] = {}
_checked_lock = threading.Lock()


def require_version(executable: str, env: Mapping[str, str]) -> None:
    """Raise ConfigError (one line: the minimum and how to upgrade) when ``executable`` is older than
    :data:`MINIMUM_VERSION` or does not say its version; asked once per executable per process."""
    with _checked_lock:
        known = _checked.get(executable)
        if known is None:
            known = _checked[executable] = _ask_version(executable, env)
    minimum = ".".join(map(str, MINIMUM_VERSION))
    if isinstance(known, str):
        raise ConfigError(
            f"Could not tell the Claude Code CLI's version ({executable} --version: {known}); the claude-code "
            f"back end needs {minimum} or later: upgrade it ({UPGRADE}), then run again."
        )
    if known < MINIMUM_VERSION:
        raise ConfigError(
            f"Claude Code {'.'.join(map(str, known))} is too old: the claude-code back end needs {minimum} or "
            f'later (older versions drop the StructuredOutput tool under --tools ""): upgrade it ({UPGRADE}), '
            "then run again."
        )


def _ask_version(executable: str, env: Mapping[str, str]) -> tuple[int, ...] | str:
    """The version ``executable --version`` prints (e.g. ``2.1.332 (Claude Code)``), or why not."""
    try:
        done = run_child([executable, "--version"], input=None, cwd=None, env=env, timeout=VERSION_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return f"no answer within {VERSION_TIMEOUT_SECONDS:g}s"
    except OSError as exc:
        return str(exc)
    found = re.match(r"\s*v?(\d+)\.(\d+)\.(\d+)", done.stdout or "")
    if found is None:
        said = " ".join((done.stdout or done.stderr or "no output").split())[:120]
        return f"exit {done.returncode}: {said}"
    return tuple(int(part) for part in found.groups())
