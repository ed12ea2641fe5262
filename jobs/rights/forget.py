"""Erasing a user: everything held about them in one tenant, in one transaction, with an audit row.

``forget_user(db, tenant, user)`` removes, in one tenant-scoped transaction (row-level security
applies: nothing outside the tenant can be touched):

- the user's episodes, session and super, current and superseded, with their events, entities, verbatim
  lines (``episode_lines``, counted as ``lines``) and lineage rows (and any episode made from one of the
  user's transcripts);
- every super-summary whose lineage includes one of those episodes, whoever it belongs to, so no
  text derived from the user survives in a summary;
- the user's model-call rows (``model_calls`` holds metadata only: template, hash, tokens, error);
- the user's transcripts, with their batch items, unless ``keep_transcripts``: then they stay but
  are marked done, so nothing summarises them again;
- the user's groups of repositories sharing memory (``repository_groups``, per user), and the branch states
  of the Claude Code repositories only this user worked in (``repository_branches`` is per repository, not per
  user: a repository whose sessions other users of the tenant also have keeps its rows, which are facts of the
  repository that their recall sorts by; one only this user had holds nothing but what their sessions showed);
- the contents of the user's correction audit (``episode_corrections``: it keeps only that a
  correction of an episode's field happened, and when);
- the erasing tenant's parts of job-run error texts that name the user (``job_runs`` has no tenant
  column; a compress failure, for one, names the user it failed for as ``<tenant>/<user>``): a part led by
  another tenant's name is never touched, nor counted, and unattributed text only in a run of this tenant
  alone (migration 0036). That table is the owner's alone (migration 0026), so they are blanked right after
  the erasure committed, through ``episodes_scrub_job_runs``, which works only for a user with an erasure
  recorded; an interruption in between is made good by running the erasure again.

Each erased session (deleted or kept) is recorded in ``erased_sessions`` as a keyed hash of its tenant
and session id, by a trigger of ``transcripts`` that fires inside this transaction only (it is marked
with ``SET LOCAL episodes.erasing``, migration 0029); another trigger refuses any later row of such a
session, on every path into ``transcripts`` (ingest, ``POST /v1/transcripts``, Claude Code sync and
hooks, a hand INSERT), saying it is refused (the day of the erasure only in its DETAIL, for the operator).
Each erased message with a time is recorded too (``erased_messages``, migration 0036), and dropped from any
later transcript row: a forked Claude Code session brings no erased turn back. New sessions are accepted.

Then it appends a row to ``erasures`` (a dry run appends none, so it takes no erasure number): the tenant, a salted hash of the user id (never the id), the
time, the counts and whether transcripts were kept. Nothing of it is logged with the user id. Once it
committed, the process's in-memory copies of the user go too (:mod:`jobs.rights.erased`).

Super-summaries are per (tenant, user, period), so those of an erased user have no sources left
to be rebuilt from and are simply removed (``jobs.compress.rebuild_period`` would find fewer than
two sources and remove them too, but in a second transaction). Should a super of *another* user
ever include the erased user's episodes, it is removed in the same transaction, since a rebuild
afterwards would leave the erased text in place until it ran (or forever, if it failed); its
remaining sources return to recall (the foreign key clears their ``compressed_into``) and the next
compress run summarises them again. :attr:`ForgetReport.rebuild` lists those periods.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb

from jobs.db import Conn, Database, one, set_local
from jobs.errors import SchemaNotInitialised
from jobs.sql import query
from jobs.wording import counted

log = logging.getLogger(__name__)


def user_hash(conn: Conn, tenant_id: str, user_id: str) -> str:
    """sha256(salt || NUL || tenant || NUL || user), hex: how an erasure names a user. Computed in the
    database (the salt is the owner's alone, migration 0023), for ``conn``'s tenant only."""
    digest = one(conn.execute(query("privacy_user_hash"), {"tenant_id": tenant_id, "user_id": user_id}))["user_hash"]
    if digest is None:
        raise SchemaNotInitialised("the database has no erasure salt; run `episodes init` to apply migration 0003.")
    return str(digest)


@dataclass(frozen=True)
class Period:
    """A super-summary of another user that was removed because it included the erased user."""

    user_id: str
    period_start: dt.date | None
    period_end: dt.date | None


@dataclass
class ForgetReport:
    tenant_id: str
    counts: dict[str, int]
    kept_transcripts: bool
    dry_run: bool = False
    erasure_id: int | None = None
    requested_at: dt.datetime | None = None
    rebuild: list[Period] = field(default_factory=list)
    # The session ids of the erased transcripts: for the CLI, which clears this machine's Claude Code
    # records of them (jobs.claude_code.erase). Never logged, never in line().
    session_ids: list[str] = field(default_factory=list, repr=False)

    @property
    def found(self) -> bool:
        """Whether anything was held about the user."""
        return any(self.counts.values())

    def line(self) -> str:
        c = self.counts
        verb = "would erase" if self.dry_run else "erased"
        transcripts = (
            f"{counted(c.get('transcripts_kept', 0), 'transcript')} kept"
            if self.kept_transcripts
            else counted(c.get("transcripts", 0), "transcript")
        )
        text = (
            f"{verb} {transcripts}, {counted(c.get('episodes', 0), 'episode')} "
            f"({counted(c.get('super_episodes', 0), 'super-summary')}), {counted(c.get('events', 0), 'event')}, "
            f"{counted(c.get('entities', 0), 'entity')}, {counted(c.get('lines', 0), 'episode line')}, "
            f"{counted(c.get('model_calls', 0), 'model call')}"
        )
        if self.session_ids:
            text += (
                f"; {'its' if len(self.session_ids) > 1 else 'the'} {counted(len(self.session_ids), 'session')} "
                f"{'would be' if self.dry_run else 'are' if len(self.session_ids) > 1 else 'is'} refused from "
                "then on, on every path (new sessions are stored)"
            )
        if c.get("job_runs_scrubbed"):
            text += f", scrubbed {counted(c['job_runs_scrubbed'], 'job-run error')}"
        if self.erasure_id is not None:
            text += f"; recorded as erasure #{self.erasure_id}"
        if self.rebuild:
            users = " ".join(sorted({p.user_id for p in self.rebuild}))
            text += (
                f"; removed {counted(len(self.rebuild), 'super-summary')} of other users that included this "
                f"user's episodes (their sources are back in recall; `episodes compress --tenant "
                f"{self.tenant_id} --user <user>` rebuilds them: {users})"
            )
        return text + (" (dry run, nothing changed)" if self.dry_run else "")


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


def forget_user(
    db: Database, tenant_id: str, user_id: str, *, keep_transcripts: bool = False, dry_run: bool = False
) -> ForgetReport:
    """Erase ``user_id`` of ``tenant_id`` (see the module docstring); one transaction, all or nothing.

    ``dry_run`` does the same work and rolls it back, so the counts are exactly what would go.
    """
    if not user_id:
        raise ValueError("user_id must be a non-empty string")
    report = ForgetReport(tenant_id=tenant_id, counts={}, kept_transcripts=keep_transcripts, dry_run=dry_run)
    try:
        with db.tenant(tenant_id) as conn:
            _erase(conn, tenant_id, user_id, keep_transcripts, report)
            if dry_run:
                raise _DryRun()
    except _DryRun:
        pass  # rolled back; a dry run records no erasure (see _erase)
    report.counts["job_runs_scrubbed"] = _scrub_job_runs(db, tenant_id, user_id, dry_run)
    # A dry run changes nothing and its command prints what it would do: its record is for debugging only.
    log.log(
        logging.DEBUG if dry_run else logging.INFO,
        "erasure dry run" if dry_run else "user erased",
        extra={
            "action": "forget_dry_run" if dry_run else "forget",
            "tenant": tenant_id,
            "erasure_id": report.erasure_id,
            **{f"n_{k}": v for k, v in report.counts.items()},
        },
    )
    return report


def _erase(conn: Conn, tenant_id: str, user_id: str, keep: bool, report: ForgetReport) -> None:
    q = query
    scope: dict[str, Any] = {"tenant_id": tenant_id, "user_id": user_id}
    # Marks this transaction as an erasure: the transcripts it deletes or keeps are recorded as erased
    # sessions (migration 0029), never stored again. A dry run's records roll back with the rest.
    set_local(conn, **{"episodes.erasing": "user"})
    transcripts = conn.execute(q("forget_lock_transcripts"), scope).fetchall()
    transcript_ids = [r["id"] for r in transcripts]
    report.session_ids = [r["session_id"] for r in transcripts]
    scope["transcript_ids"] = transcript_ids
    scope["purposes"] = [r["purpose"] for r in conn.execute(q("forget_user_purposes"), scope).fetchall()]
    episodes = conn.execute(q("forget_episodes"), scope).fetchall()
    scope["episode_ids"] = [e["id"] for e in episodes]
    report.rebuild = [
        Period(e["user_id"], e["period_start"], e["period_end"])
        for e in episodes
        if e["kind"] == "super" and not e["own"]
    ]
    counts = {
        "events": conn.execute(q("forget_delete_events"), scope).rowcount,
        "entities": conn.execute(q("forget_delete_entities"), scope).rowcount,
        "lineage": conn.execute(q("forget_delete_lineage"), scope).rowcount,
        "lines": conn.execute(q("forget_delete_lines"), scope).rowcount,
    }
    conn.execute(q("release_references"), {**scope, "ids": scope["episode_ids"]})
    deleted = conn.execute(q("forget_delete_episodes"), scope).rowcount
    counts["episodes"] = deleted
    counts["super_episodes"] = sum(1 for e in episodes if e["kind"] == "super")
    counts["model_calls"] = conn.execute(q("forget_delete_model_calls"), scope).rowcount
    counts["corrections_scrubbed"] = conn.execute(q("forget_scrub_corrections"), scope).rowcount
    if keep:
        counts["transcripts"] = 0
        counts["transcripts_kept"] = conn.execute(q("forget_keep_transcripts"), scope).rowcount
    else:
        counts["transcripts"] = conn.execute(q("forget_delete_transcripts"), scope).rowcount
    counts["other_users_supers"] = len(report.rebuild)
    # After the user's transcripts and episodes went, so that "only this user's repository" can be asked.
    counts["repository_branches"] = conn.execute(q("forget_repository_branches"), scope).rowcount
    counts["repository_groups"] = conn.execute(q("forget_repository_groups"), scope).rowcount
    report.counts = counts
    if report.dry_run:
        # No audit row: it would roll back, but its identity number would be spent, and the next real
        # erasure would show as "#2" after a dry run (issue 46, item 22).
        return
    row = one(
        conn.execute(
            q("insert_erasure"),
            {
                "tenant_id": tenant_id,
                "user_hash": user_hash(conn, tenant_id, user_id),
                "counts": Jsonb(counts),
                "kept_transcripts": keep,
            },
        )
    )
    report.erasure_id, report.requested_at = row["id"], row["requested_at"]


def _scrub_job_runs(db: Database, tenant_id: str, user_id: str, dry_run: bool) -> int:
    """Blank job-run errors / counts that name the user (as a whole word, not inside another id); with
    ``dry_run`` only count them. Its own transaction, after the erasure's: the tenant set, no role switched
    (job_runs is the owner's, reached through the function of migration 0026)."""
    with db.login() as conn:
        set_local(conn, **{"episodes.tenant_id": tenant_id})
        return int(
            one(
                conn.execute(
                    query("forget_scrub_job_runs"), {"tenant_id": tenant_id, "user_id": user_id, "dry": dry_run}
                )
            )["n"]
        )


def erasures_of(db: Database, tenant_id: str, user_id: str) -> list[dict[str, Any]]:
    """The erasure records of one user ("did you erase X?"), found by recomputing the hash."""
    with db.tenant(tenant_id) as conn:
        digest = user_hash(conn, tenant_id, user_id)
        return conn.execute(query("erasures_of"), {"tenant_id": tenant_id, "user_hash": digest}).fetchall()
