"""What our hooks do: ``<python> -I jobs/claude_code/launch.py --tenant T --user U`` runs :func:`main`.

The installed command is the launcher (:mod:`jobs.claude_code.launch`), never ``python -m`` in the
project's folder: that would import a ``jobs`` package of the project instead of ours. ``python -m
jobs.claude_code.hook`` still works by hand, outside a project.

Claude Code passes the event as JSON on stdin (``hook_event_name``, ``session_id``,
``transcript_path``, ``cwd``, ``source`` / ``reason``, ``prompt``) and, for SessionStart and
UserPromptSubmit, puts what the hook prints into the model's context.

- SessionStart: the ``<previous_episodes>`` block of this user and project (recent episodes, open
  items, sessions not yet summarised);
- UserPromptSubmit, the session's first prompt only: what recall finds relevant to the prompt that
  SessionStart did not already inject (nothing if there is none);
- PreCompact: the session so far handed over (still open);
- SessionEnd: the session handed over and closed (``ended_at`` set), so `episodes serve`
  summarises it.

It fails open: whatever goes wrong (no database, a bad key, a timeout), it prints nothing, exits 0
and writes one line to $EPISODES_HOME/logs/claude-code-hooks.log. A watchdog thread ends the
process when its own budget is spent, whatever the main thread is blocked in; Claude Code's
``timeout`` in settings.json is the second line. Only the standard library is imported until the
event says what is needed; the local mode (:mod:`jobs.claude_code.local`) imports recall or ingest,
the remote mode (:mod:`jobs.claude_code.remote`) only ``http.client``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

# Seconds a hook may take before it gives up and exits 0 (below the timeouts written to settings.json).
BUDGETS = {"SessionStart": 6.0, "UserPromptSubmit": 6.0, "PreCompact": 25.0, "SessionEnd": 25.0}
_started = time.monotonic()


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jobs/claude_code/launch.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", default="local", help="local mode: the tenant (remote mode: the key's)")
    parser.add_argument("--user", default=None, help="default: the login name")
    parser.add_argument("--api", default=None, help="remote mode: the URL of `episodes api`")
    parser.add_argument("--key-env", default="EPISODES_API_KEY", help="remote mode: the variable holding the key")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable to set first (EPISODES_HOME and the like)",
    )
    parser.add_argument("--budget", type=float, default=None, help="seconds before giving up (default per event)")
    return parser.parse_args(argv)


def _log(line: str) -> None:
    """One line to the hooks' log (owner-only); a log that cannot be written is not an error either."""
    try:
        from jobs.claude_code.places import append_private, log_file
        from jobs.logs import hide_secrets  # a connection string's password= or sslpassword= in an error

        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        append_private(log_file(), f"{stamp} pid={os.getpid()} {hide_secrets(line)}\n")
    except Exception:
        pass


def _watchdog(budget: float, event: str) -> None:
    def expire() -> None:
        _log(f"{event}: gave up after {budget:.1f}s (hook budget); the session goes on without it")
        os._exit(0)

    timer = threading.Timer(budget, expire)
    timer.daemon = True
    timer.start()


def run(args: argparse.Namespace, payload: dict[str, Any]) -> str:
    """What to print for ``payload`` (the event), doing the event's work; raises on any failure."""
    event = str(payload.get("hook_event_name") or "")
    from jobs.claude_code.places import login_name

    user = args.user or login_name()
    if args.api:
        from jobs.claude_code.remote import first_prompt, hand_over, session_start
    else:
        from jobs.claude_code.local import first_prompt, hand_over, session_start
    if event == "SessionStart":
        return session_start(args, user, payload)
    if event == "UserPromptSubmit":
        return first_prompt(args, user, payload)
    if event in {"SessionEnd", "PreCompact"}:
        hand_over(args, user, payload, close=event == "SessionEnd")
        return ""
    return ""  # an event we were not installed for: nothing to do


def main(argv: Sequence[str] | None = None, *, cwd: str | None = None) -> int:
    """Run the hook for the event on stdin; always 0. ``cwd``: the project's folder the launcher left,
    the event's ``cwd`` when the event names none."""
    event = "?"
    try:
        args = _parse(sys.argv[1:] if argv is None else argv)
        from jobs.config import set_env

        for item in args.set:
            name, _, value = item.partition("=")
            if name:
                set_env(name, value)
        payload = json.loads(sys.stdin.buffer.read().decode("utf-8", "replace") or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
        if cwd and not payload.get("cwd"):
            payload["cwd"] = cwd
        event = str(payload.get("hook_event_name") or "?")
        _watchdog(args.budget if args.budget is not None else BUDGETS.get(event, 6.0), event)
        out = run(args, payload)
        if out:  # UTF-8 whatever the locale (Claude Code reads UTF-8; -I ignores PYTHONIOENCODING)
            sys.stdout.buffer.write((out if out.endswith("\n") else out + "\n").encode("utf-8", "replace"))
            sys.stdout.flush()
        _log(f"{event}: ok in {time.monotonic() - _started:.3f}s" + (f", printed {len(out)} characters" if out else ""))
    except BaseException as exc:
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return 0
        _log(
            f"{event}: failed open after {time.monotonic() - _started:.3f}s: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:500]}"
        )
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown (pools, atexit) on the session's critical path
