"""Recall at session start: a user's recent and relevant episodes, as a prompt block within a token budget.

``recall(tenant, user, opening_message, purpose=None, budget_tokens=DEFAULT_BUDGET_TOKENS)`` (the
budget of jobs.concepts) returns the last N episodes plus the top K most relevant to the opening
message, deduplicated, with a soft time decay, super-summaries standing in for compressed periods,
and the user's still-open questions and commitments, rendered through ``prompts/previous_episodes.j2``
so that the whole block fits ``budget_tokens``. The top K is exact within the user's rows: every
candidate is scored, in PostgreSQL, by one statement.

The modules, top down:

* :mod:`~jobs.recall.shared`: :func:`recall` and the process-wide recallers it reuses;
* :mod:`~jobs.recall.recaller`: :class:`Recaller`, one recall from start to end;
* :mod:`~jobs.recall.fitting`: deduplication and fitting the block to the budget;
* :mod:`~jobs.recall.time_cues`: the months an opening message names, whose episodes fitting places first;
* :mod:`~jobs.recall.scoring`: every candidate scored in PostgreSQL (ranks, reciprocal rank fusion, decay
  and importance) and the chosen episodes read;
* :mod:`~jobs.recall.open_items`: the user's open items of candidate episodes, a page at a time;
* :mod:`~jobs.recall.unsummarised`: sessions not yet summarised, one redacted line each;
* :mod:`~jobs.recall.result`: what a recall returns and its rendering;
* :mod:`~jobs.recall.purposes` and :mod:`~jobs.recall.config`: which purposes a recall sees, and
  the selection knobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.lazy import lazy_names

if TYPE_CHECKING:
    from jobs.recall.config import RecallConfig
    from jobs.recall.purposes import purpose_filter
    from jobs.recall.recaller import Recaller
    from jobs.recall.result import Recall, RecalledEpisode, RecalledOpenItem, RecalledSession
    from jobs.recall.shared import close_recallers, recall, shared_recaller

# The public names and the module each comes from, imported at their first use (PEP 562), so that a
# caller importing one module of the package (the Claude Code SessionStart hook: the recaller) does
# not pay for the rest. Code inside episodes imports the modules themselves.
_WHERE = {
    "RecallConfig": ".config",
    "purpose_filter": ".purposes",
    "Recaller": ".recaller",
    "Recall": ".result",
    "RecalledEpisode": ".result",
    "RecalledOpenItem": ".result",
    "RecalledSession": ".result",
    "close_recallers": ".shared",
    "recall": ".shared",
    "shared_recaller": ".shared",
}
__all__ = [
    "Recall",
    "RecallConfig",
    "RecalledEpisode",
    "RecalledOpenItem",
    "RecalledSession",
    "Recaller",
    "close_recallers",
    "purpose_filter",
    "recall",
    "shared_recaller",
]

__getattr__, __dir__ = lazy_names(globals(), _WHERE)
