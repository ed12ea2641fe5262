"""Crash points for the crash tests: a test arms one by name (:func:`arm`) in the process it will
kill (tests/support/crash_worker.py), and that process kill -9s itself when it reaches the point. Nothing
arms one in production (no setting or variable does); an unarmed point costs one comparison.
Named points: after_claim, after_model_call, during_commit.
"""

from __future__ import annotations

import os
import signal

_armed: str | None = None


def arm(name: str | None) -> None:
    """Make this process kill itself at the crash point ``name`` (None: at none)."""
    global _armed
    _armed = name


def crash_point(name: str) -> None:
    if _armed == name:
        os.kill(os.getpid(), signal.SIGKILL)
