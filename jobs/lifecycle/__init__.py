"""Memory over years: re-summarising on purpose, transcript retention and pinned episodes.

- :mod:`~jobs.lifecycle.resummarize`: requeue chosen sessions for a new episode under the current prompt.
- :mod:`~jobs.lifecycle.retention`: remove the message bodies of old summarised transcripts.
- :mod:`~jobs.lifecycle.pins`: pin and unpin an episode (no decay, never compressed, never pruned).
- :mod:`~jobs.lifecycle.policy`: the optional pruning policy (erase episodes by age and importance).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.lazy import lazy_names

if TYPE_CHECKING:
    from jobs.lifecycle.pins import PinChange, pin, unpin
    from jobs.lifecycle.policy import PolicyPlan, PolicyReport, apply_policy, plan_policy
    from jobs.lifecycle.resummarize import (
        ResummarizePlan,
        Selection,
        current_prompt_version,
        plan_resummarize,
    )
    from jobs.lifecycle.retention import PruneReport, prune_transcripts

# The public names and the module each comes from, imported at their first use (PEP 562), so that a
# caller of one job does not import the others: `episodes status` reads the re-embedding's progress
# (jobs.lifecycle.reembed) without compress and the model client, which pins and policy bring.
# Code inside episodes imports the modules themselves. No name here is also a module's: ``resummarize``
# (the function) would be shadowed by the module jobs.lifecycle.resummarize once imported, so it is only there.
_WHERE = {
    "PinChange": "jobs.lifecycle.pins",
    "pin": "jobs.lifecycle.pins",
    "unpin": "jobs.lifecycle.pins",
    "PolicyPlan": "jobs.lifecycle.policy",
    "PolicyReport": "jobs.lifecycle.policy",
    "apply_policy": "jobs.lifecycle.policy",
    "plan_policy": "jobs.lifecycle.policy",
    "ResummarizePlan": "jobs.lifecycle.resummarize",
    "Selection": "jobs.lifecycle.resummarize",
    "current_prompt_version": "jobs.lifecycle.resummarize",
    "plan_resummarize": "jobs.lifecycle.resummarize",
    "PruneReport": "jobs.lifecycle.retention",
    "prune_transcripts": "jobs.lifecycle.retention",
}
__all__ = [
    "PinChange",
    "PolicyPlan",
    "PolicyReport",
    "PruneReport",
    "ResummarizePlan",
    "Selection",
    "apply_policy",
    "current_prompt_version",
    "pin",
    "plan_policy",
    "plan_resummarize",
    "prune_transcripts",
    "unpin",
]

__getattr__, __dir__ = lazy_names(globals(), _WHERE)
