"""The command Claude Code runs for our hooks: ``<python> -I <this file> --tenant T --user U ...``.

Claude Code runs a hook in the project's folder, and the project is not ours to trust: with
``python -m jobs.claude_code.hook`` the folder comes first on ``sys.path``, so a repository holding
a ``jobs/`` package would run its own code in our place (with the hook's input and environment, the
API key of remote mode included), and an ordinary project with a ``jobs/`` folder broke the hook.
So the installed command runs this file by its absolute path under ``-I`` (isolated mode: neither
the working directory, nor the script's folder, nor PYTHON* variables, nor the user's site folder
reach ``sys.path``), and this file, standard library only:

1. puts the folder holding the ``jobs`` package it belongs to first on ``sys.path`` (so the jobs
   that installed the hook is the jobs that runs, however it was installed) and takes out any
   entry that names the working directory;
2. leaves the project's folder (``chdir`` to /), passing it on as the event's ``cwd`` when the
   event names none;
3. imports the hook, and fails open if even that fails: nothing printed, exit 0, one line in the
   hooks' log.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _safe_path(cwd: str) -> list[str]:
    """``sys.path`` with our root first and nothing that resolves to the working directory."""

    def here(entry: str) -> bool:
        try:
            return entry in ("", ".") or os.path.realpath(entry) == os.path.realpath(cwd)
        except (OSError, ValueError):
            return True

    rest = [p for p in sys.path if p != ROOT and not here(p)]
    return [ROOT, *rest]


def _log_failure(argv: list[str], cwd: str, exc: BaseException) -> None:
    """One line to the hooks' log without importing anything of ours (which is what failed): in the
    EPISODES_HOME the command carries (``--set EPISODES_HOME=...``, as install writes it), else in
    jobs.config's default folder; owner-only, as the hook's own log (jobs.claude_code.places)."""
    try:
        base = next((a.partition("=")[2] for a in reversed(argv) if a.startswith("EPISODES_HOME=")), "")
        if not base:
            import platformdirs  # what jobs.config's default is; absent: no log

            base = platformdirs.user_data_dir("episodes")
        folder = os.path.join(os.path.expanduser(base), "logs")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(folder, "claude-code-hooks.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(
                f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid={os.getpid()} ?: failed open before the hook "
                f"ran (in {cwd!r}): {type(exc).__name__}: {' '.join(str(exc).split())[:300]}\n"
            )
    except BaseException:
        pass


def main() -> int:
    argv = sys.argv[1:]
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed under us
        cwd = ""
    try:
        sys.path[:] = _safe_path(cwd)
        os.chdir("/")
        from jobs.claude_code import hook
    except BaseException as exc:
        _log_failure(argv, cwd, exc)
        return 0
    return hook.main(argv, cwd=cwd or None)


if __name__ == "__main__":
    code = main()
    try:
        sys.stdout.flush()
    finally:
        os._exit(code)  # skip interpreter teardown (pools, atexit) on the session's critical path
