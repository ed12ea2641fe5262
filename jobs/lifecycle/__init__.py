"""Memory over years: re-summarising on purpose, transcript retention and pinned episodes.

- :mod:`~jobs.lifecycle.resummarize`: requeue chosen sessions for a new episode under the current prompt.
- :mod:`~jobs.lifecycle.retention`: remove the message bodies of old summarised transcripts.
- :mod:`~jobs.lifecycle.pins`: pin and unpin an episode (no decay, never compressed, never pruned).
- :mod:`~jobs.lifecycle.policy`: the optional pruning policy (erase episodes by age and importance).
"""

from jobs.lifecycle.pins import PinChange, pin, unpin
from jobs.lifecycle.policy import PolicyPlan, PolicyReport, apply_policy, plan_policy
from jobs.lifecycle.resummarize import (
    ResummarizePlan,
    Selection,
    current_prompt_version,
    plan_resummarize,
    resummarize,
)
from jobs.lifecycle.retention import PruneReport, prune_transcripts

__all__ = ["PinChange", "PolicyPlan", "PolicyReport", "PruneReport", "apply_policy", "plan_policy", "ResummarizePlan", "Selection", "current_prompt_version",
           "pin", "plan_resummarize", "prune_transcripts", "resummarize", "unpin"]
