"""Crash points for the crash tests: ``EPISODES_CRASH_AT=<name>`` makes the process kill -9 itself there.

The variable is read at each call, costs a dictionary lookup, and is never set in production.
Named points: after_claim, after_model_call, during_commit.
"""

from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("EPISODES_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
