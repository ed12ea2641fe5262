"""The compress job: old session episodes become one super-summary per (tenant, user, period).

**What qualifies.** A session episode belongs to the calendar period (year, quarter or month, UTC)
that contains its ``ended_at``. A period qualifies once it ended more than ``older_than`` ago: with
``12mo`` on 2026-11-21 the cut-off is 2025-11-21, so years up to 2024 qualify and 2025 does not.
A period with two or more current session episodes gets one super-summary (``kind='super'``,
``period_start``/``period_end`` = the period's first and last day, ``status='current'``); a lone
episode stays as it is.

**What a super-summary holds.** A summary of the period, topic tags, entities, importance and an
embedding, written by a *compressor*: Claude (forced tool ``record_period_summary``, validated by
the pydantic model :class:`PeriodSummary`, prompts ``compress_*.j2``) or the offline merge. Its
events are the period's decisions and the questions and commitments still open, each a copy of
its source event with ``source_event_id`` pointing at it, so every one of them stays reachable
from the super. Claude restates the (at most 20) most important ones with context; every other
carried event is copied verbatim, so nothing is lost to the model's choice or its output limit.
A lineage row links the super to every source, and each source gets ``compressed_into``: recall
then shows the super instead of its sources, which stay in place for analysts.

**Idempotent, one group per transaction, one run at a time.** A group whose sources, hash and
pointers agree is skipped with no read and no model call; any other is read, compressed with no
transaction open, and written in one transaction only if it is still what was read. A failed group
leaves no trace but its model-call rows; a re-run completes it. A second runner raises
:class:`~jobs.errors.CompressBusy`.

The modules, bottom up:

- :mod:`~jobs.compress.periods` — period arithmetic and the cut-off; the hash of a source set.
- :mod:`~jobs.compress.schema` — :class:`PeriodSummary`, the forced tool's pydantic model (its field
  descriptions are prompt text).
- :mod:`~jobs.compress.compressor` — what compressors read and return, the :class:`Compressor`
  protocol; :mod:`~jobs.compress.claude` (bounded requests, reduced level
  by level) and :mod:`~jobs.compress.offline` implement it.
- :mod:`~jobs.compress.state` — a group's database state, the decision it implies, retiring old supers.
- :mod:`~jobs.compress.group` — one group: prepare (read + compress), embed, write; the super's events
  and their evidence.
- :mod:`~jobs.compress.plan` and :mod:`~jobs.compress.run` — the plan across tenants, the run and its
  lock, the scheduler's job and :func:`rebuild_period` (used after an erasure).

**Shared with the rest of episodes, not copied.** Named SQL comes from ``sql/compress.sql`` through
:func:`jobs.sql.query`; packing into the token budget and the level-by-level reduce are
:func:`jobs.llm.pack` and :func:`jobs.llm.reduce_levels` (only shrinking a block to fit, ``_fit``, is
compress's own); job runs and the worker id are :mod:`jobs.runs`; a model failure is a
:class:`~jobs.errors.ModelError` whose ``calls`` are recorded for the failed group.

**Grounding: one shared rule, one rule of its own.** A session episode is grounded in its transcript
(:func:`jobs.extract.grounding.ground`): events must cite message indexes that exist. A period
summary is grounded in its own request: each event must cite a source event id shown in that
request, once (an id is the key that copies the source event's evidence, so an unknown id is
dropped, not repaired), and each entity must occur in the request text. The entity rule —
case-insensitive occurrence, names stripped, each (name, kind) once, duplicates merged rather than
counted — is the same in both, so both call :func:`jobs.extract.grounding.ground_entities`; the
event rules differ in what an event cites and stay with their job (``ground`` for sessions,
``jobs.compress.claude._ground`` for periods) rather than being forced into one function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.lazy import lazy_names

if TYPE_CHECKING:
    from jobs.compress.claude import AnthropicCompressor, prompt_version
    from jobs.compress.compressor import (
        Compression,
        Compressor,
        SourceEpisode,
        SourceEvent,
    )
    from jobs.compress.group import (
        GroupOutcome,
        PreparedGroup,
        embed_prepared,
        prepare_group,
        process_group,
        super_episode,
        write_group,
    )
    from jobs.compress.offline import OfflineCompressor
    from jobs.compress.periods import (
        UNITS,
        Period,
        add_months,
        cutoff_time,
        parse_age,
        period_floor,
        sources_hash,
    )
    from jobs.compress.plan import PlannedGroup
    from jobs.compress.run import (
        RUN_LOCK_KEY,
        CompressReport,
        make_compressor,
        rebuild_period,
        run_compress,
        run_lock,
        scheduled_compress,
    )
    from jobs.compress.schema import PeriodEvent, PeriodSummary
    from jobs.errors import CompressBusy

# The public names and the module each comes from, imported at their first use (PEP 562), so that a
# caller of one piece (pins and erasures rebuild a period: jobs.compress.run) does not import the rest.
# Code inside episodes imports the modules themselves. No name here is also a module's: ``plan`` (the
# function) would be shadowed by the module jobs.compress.plan once imported, so it is only there.
_WHERE = {
    "AnthropicCompressor": "jobs.compress.claude",
    "prompt_version": "jobs.compress.claude",
    "Compression": "jobs.compress.compressor",
    "Compressor": "jobs.compress.compressor",
    "SourceEpisode": "jobs.compress.compressor",
    "SourceEvent": "jobs.compress.compressor",
    "GroupOutcome": "jobs.compress.group",
    "PreparedGroup": "jobs.compress.group",
    "embed_prepared": "jobs.compress.group",
    "prepare_group": "jobs.compress.group",
    "process_group": "jobs.compress.group",
    "super_episode": "jobs.compress.group",
    "write_group": "jobs.compress.group",
    "OfflineCompressor": "jobs.compress.offline",
    "Period": "jobs.compress.periods",
    "UNITS": "jobs.compress.periods",
    "add_months": "jobs.compress.periods",
    "cutoff_time": "jobs.compress.periods",
    "parse_age": "jobs.compress.periods",
    "period_floor": "jobs.compress.periods",
    "sources_hash": "jobs.compress.periods",
    "PlannedGroup": "jobs.compress.plan",
    "CompressReport": "jobs.compress.run",
    "RUN_LOCK_KEY": "jobs.compress.run",
    "make_compressor": "jobs.compress.run",
    "rebuild_period": "jobs.compress.run",
    "run_compress": "jobs.compress.run",
    "run_lock": "jobs.compress.run",
    "scheduled_compress": "jobs.compress.run",
    "PeriodEvent": "jobs.compress.schema",
    "PeriodSummary": "jobs.compress.schema",
    "CompressBusy": "jobs.errors",
}
__all__ = [
    "RUN_LOCK_KEY",
    "UNITS",
    "AnthropicCompressor",
    "CompressBusy",
    "CompressReport",
    "Compression",
    "Compressor",
    "GroupOutcome",
    "OfflineCompressor",
    "Period",
    "PeriodEvent",
    "PeriodSummary",
    "PlannedGroup",
    "PreparedGroup",
    "SourceEpisode",
    "SourceEvent",
    "add_months",
    "cutoff_time",
    "embed_prepared",
    "make_compressor",
    "parse_age",
    "period_floor",
    "prepare_group",
    "process_group",
    "prompt_version",
    "rebuild_period",
    "run_compress",
    "run_lock",
    "scheduled_compress",
    "sources_hash",
    "super_episode",
    "write_group",
]

__getattr__, __dir__ = lazy_names(globals(), _WHERE)
