"""Crash points for the crash tests: ``EPISODES_CRASH_AT=<name>`` (Settings.crash_at) makes the
process kill -9 itself there. Costs one comparison; never set in production.
Named points: after_claim, after_model_call, during_commit.
"""

from __future__ import annotations

import os
import signal

from jobs.config import Settings


def crash_point(settings: Settings, name: str) -> None:
    if settings.crash_at == name:
        os.kill(os.getpid(), signal.SIGKILL)
