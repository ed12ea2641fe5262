"""The optional pruning policy: ``episodes prune --policy`` and ``EPISODES_PRUNE_POLICY`` in ``serve``.

Off by default (memory then only decays in recall and is compressed yearly). A policy
(:mod:`jobs.prune_policy` has the grammar and the rule) is judged in the database at one instant
(migration 0015): :func:`plan_policy` counts, per clause and in total, what would go, what keep
clauses saved and what pins saved. :func:`apply_policy` lists the ids to delete per tenant and erases
them in batches, each one short tenant transaction through :func:`jobs.rights.erase_episode.erase_episodes` (the
same erasure as the user's own "forget this episode": events, entities, other versions of the
session, resolutions and replacements undone, transcripts kept but never summarised again), which
checks the rule again on the locked rows and records an ``erasures`` row per user with scope
``policy``. Super-summaries are never pruned directly: one that included a pruned episode goes in
the same transaction, and once the tenant's batches are done each affected period is rebuilt once
from its remaining sources (:func:`jobs.rights.erase_episode.rebuild_supers`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from psycopg.types.json import Jsonb

from jobs.compress.compressor import Compressor
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.prune_policy import PrunePolicy
from jobs.rights.erase_episode import OUTCOMES, RemovedSuper, erase_episodes, rebuild_supers
from jobs.sql import query
from jobs.wording import counted

BATCH_SIZE = 200


@dataclass
class PolicyPlan:
    """What ``policy`` selects at ``at``: ``hits`` per clause number (a delete clause: the episodes it
    selects; a keep clause: the selected, unpinned episodes it protects), and the totals."""

    policy: PrunePolicy
    at: dt.datetime
    candidates: int = 0
    hits: dict[int, int] = field(default_factory=dict)
    deleted: int = 0
    kept: int = 0
    pinned: int = 0
    per_tenant: dict[str, int] = field(default_factory=dict)  # deletable episodes per tenant

    def lines(self) -> list[str]:
        out = [f'policy "{self.policy.text}" over {counted(self.candidates, "current session episode")}:']
        for c in self.policy.clauses:
            verb = "selects" if c.action == "delete" else "saves"
            out.append(f'  clause {c.number} "{c.text}": {verb} {self.hits.get(c.number, 0):,}')
        out.append(
            f"would delete {counted(self.deleted, 'episode')}; {self.kept:,} saved by keep clauses, "
            f"{self.pinned:,} saved by pins (dry run, nothing changed)"
        )
        return out


@dataclass
class PolicyReport:
    """What :func:`apply_policy` did."""

    plan: PolicyPlan
    deleted: int = 0
    batches: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    erasures: int = 0
    rebuilt: Counter[str] = field(default_factory=Counter)  # outcome -> compressed periods

    def line(self) -> str:
        p = self.plan
        text = (
            f'policy "{p.policy.text}": deleted {counted(self.deleted, "episode")} in '
            f"{counted(self.batches, 'batch')} ({counted(self.counts['events'], 'event')}, "
            f"{counted(self.counts['entities'], 'entity')}, {counted(self.counts['reopened_items'], 'item')} "
            f"reopened, {counted(self.counts['restored_decisions'], 'decision')} standing again; transcripts "
            f"kept, never summarised again); {p.kept:,} saved by keep clauses, {p.pinned:,} saved by pins; "
            f"recorded as {counted(self.erasures, 'erasure')}"
        )
        if self.rebuilt:
            text += "; super-summaries: " + ", ".join(
                f"{n} {OUTCOMES.get(outcome, outcome)}" for outcome, n in sorted(self.rebuilt.items())
            )
        return text


def plan_policy(
    db: Database, policy: PrunePolicy, *, tenant: str | None = None, now: dt.datetime | None = None
) -> PolicyPlan:
    """Count what ``policy`` would delete now (of one tenant, or all); changes nothing."""
    plan = PolicyPlan(policy, now or dt.datetime.now(dt.UTC))
    scope = {"policy": Jsonb(policy.as_json()), "at": plan.at, "tenant": tenant}
    with db.admin() as conn:
        plan.candidates = int(one(conn.execute(query("prune_policy_candidates"), scope))["n"])
        plan.hits = {r["n"]: int(r["hits"]) for r in conn.execute(query("prune_policy_clauses"), scope)}
        for r in conn.execute(query("prune_policy_totals"), scope):
            plan.deleted += r["deleted"]
            plan.kept += r["kept"]
            plan.pinned += r["pinned"]
            if r["deleted"]:
                plan.per_tenant[r["tenant_id"]] = int(r["deleted"])
    return plan


def apply_policy(
    db: Database,
    policy: PrunePolicy,
    *,
    tenant: str | None = None,
    now: dt.datetime | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int], object] | None = None,
    compressor: Compressor | None = None,
    embedder: Embedder | None = None,
) -> PolicyReport:
    """Delete what ``policy`` selects (see the module docstring); ``progress`` is called with the
    episodes of each batch. ``compressor`` / ``embedder`` rebuild the super-summaries (default: from
    the settings, the model with an API key and the offline compressor without)."""
    report = PolicyReport(plan_policy(db, policy, tenant=tenant, now=now))
    at, clauses = report.plan.at, Jsonb(policy.as_json())
    for tenant_id in report.plan.per_tenant:
        with db.admin() as conn:
            ids = [
                r["episode_id"]
                for r in conn.execute(query("prune_policy_ids"), {"policy": clauses, "at": at, "tenant": tenant_id})
            ]
        removed: list[RemovedSuper] = []
        for start in range(0, len(ids), batch_size):
            with db.tenant(tenant_id) as conn:
                locked = [
                    r["id"]
                    for r in conn.execute(
                        query("prune_policy_lock_batch"),
                        {"ids": ids[start : start + batch_size], "tenant_id": tenant_id, "policy": clauses, "at": at},
                    )
                ]
                if not locked:
                    continue
                erased = erase_episodes(conn, tenant_id, locked, scope="policy")
            report.batches += 1
            report.deleted += len(locked)
            report.counts.update(erased.counts)
            report.erasures += len(erased.erasure_ids)
            removed += erased.supers
            if progress:
                progress(len(locked))
        outcomes = rebuild_supers(db, tenant_id, removed, compressor=compressor, embedder=embedder)
        periods = {(s.user_id, s.period_start, s.period_end): outcomes[s.id] for s in removed if s.id in outcomes}
        report.rebuilt.update(periods.values())  # one rebuild per period, however many batches removed its super
    return report
