"""Transcript retention: the message bodies of summarised transcripts go after a while.

``EPISODES_TRANSCRIPT_RETENTION`` (e.g. ``90d``; unset or ``keep``: forever) is applied by
``episodes serve``'s maintenance job and by ``episodes prune --transcripts``. A transcript is pruned
once it is summarised (``done``) and ended more than that long ago: each message keeps only its
role, and the row keeps its content hash, message count, times and work state, so re-ingesting the
same content stays a no-op while a changed one is stored and summarised as usual. Episodes, their
events and evidence quotes are not touched. A pruned transcript cannot be re-summarised
(``episodes resummarize`` skips it and says how many).

Work goes tenant by tenant, in batches of ``batch_size`` rows, each its own short transaction that
skips rows locked by someone else, so a table of any size is never held in one transaction (and on a
Citus cluster each batch stays on the node holding its tenant).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from jobs.db import Database, one
from jobs.sql import query
from jobs.wording import counted

BATCH_SIZE = 500


@dataclass
class PruneReport:
    """What a prune removed (or, dry, would remove): transcripts and their message bytes as stored."""

    before: dt.datetime
    transcripts: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    dry_run: bool = False

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after

    def line(self) -> str:
        when = self.before.strftime("%Y-%m-%d %H:%M UTC")
        which = f"the messages of {counted(self.transcripts, 'summarised transcript')} that ended before {when}"
        if self.dry_run:
            return f"would prune {which}: {_mb(self.bytes_before)} of message bodies (dry run, nothing changed)"
        return (
            f"pruned {which}: {_mb(self.bytes_before)} -> {_mb(self.bytes_after)}, {_mb(self.reclaimed)} "
            "reclaimed (reusable after VACUUM; episodes untouched)"
        )


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def prune_transcripts(
    db: Database,
    retention_seconds: float,
    *,
    tenant: str | None = None,
    dry_run: bool = False,
    now: dt.datetime | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int], object] | None = None,
) -> PruneReport:
    """Remove the message bodies of summarised transcripts that ended more than ``retention_seconds``
    before ``now`` (of one tenant, or all); ``dry_run`` only counts. Runs as the owner across tenants,
    like the other maintenance work; ``progress`` is called with the rows of each batch."""
    before = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=retention_seconds)
    report = PruneReport(before=before, dry_run=dry_run)
    scope = {"before": before, "tenant": tenant}
    if dry_run:
        with db.admin() as conn:
            found = one(conn.execute(query("retention_candidates"), scope))
        report.transcripts, report.bytes_before = int(found["transcripts"]), int(found["bytes"])
        return report
    with db.admin() as conn:
        tenants = [r["tenant_id"] for r in conn.execute(query("retention_tenants"), scope)]
    for tenant_id in tenants:  # batches stay inside one tenant: they lock rows (one shard on a cluster)
        while True:
            with db.admin() as conn:
                rows = conn.execute(
                    query("retention_prune_batch"), {**scope, "tenant_id": tenant_id, "limit": batch_size}
                ).fetchall()
            if not rows:
                break
            report.transcripts += len(rows)
            report.bytes_before += sum(int(r["bytes_before"]) for r in rows)
            report.bytes_after += sum(int(r["bytes_after"]) for r in rows)
            if progress:
                progress(len(rows))
    return report
