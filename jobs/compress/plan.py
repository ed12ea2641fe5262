"""The plan: every (tenant, user, period) that might need work, read in one query across tenants.

The plan's own verdict (:attr:`PlannedGroup.action`) lets a run skip an up-to-date group with no
read and no model call; every other group is read again and decided by its own state
(:meth:`jobs.compress.state.GroupState.action`), which a concurrent writer may have changed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from jobs.compress.periods import UNITS, Period, sources_hash
from jobs.db import Database
from jobs.sql import query


@dataclass(frozen=True)
class PlannedGroup:
    tenant_id: str
    user_id: str
    period: Period
    source_ids: tuple[int, ...]
    into_ids: tuple[int, ...]
    uncompressed: int
    super_id: int | None
    super_hash: str | None

    @property
    def action(self) -> str:
        """What the plan expects (the group's own read decides): created, rebuilt, removed, unchanged, single."""
        n = len(self.source_ids)
        linked = self.super_id is not None or bool(self.into_ids)
        if (
            n >= 2
            and self.super_id is not None
            and self.super_hash == sources_hash(self.source_ids)
            and set(self.into_ids) == {self.super_id}
            and self.uncompressed == 0
        ):
            return "unchanged"
        if n < 2:
            return "removed" if linked else "single"
        return "rebuilt" if linked else "created"


def plan(
    db: Database, period: str, boundary: dt.date, tenant: str | None = None, user: str | None = None
) -> list[PlannedGroup]:
    """The groups of ``period`` units ending before ``boundary``, optionally of one tenant or user."""
    with db.admin() as conn:
        rows = conn.execute(
            query("compress_plan"),
            {
                "unit": period,
                "months": UNITS[period],
                "boundary": boundary,
                "tenant": tenant,
                "user": user,
            },
        ).fetchall()
    return [
        PlannedGroup(
            r["tenant_id"],
            r["user_id"],
            Period.of(period, r["period_start"]),
            tuple(r["source_ids"]),
            tuple(r["into_ids"]),
            int(r["uncompressed"]),
            r["super_id"],
            r["super_hash"],
        )
        for r in rows
    ]
