"""Pinned episodes: kept on purpose, whatever their age.

A pinned session episode (``episodes.pinned_at``, migration 0012)

- does not decay in recall scoring (:func:`jobs.recall.scoring.fuse`; the in-process copies see the
  pin like any other change of the row, through ``changed_xid``);
- is never compressed away from recall: compression leaves pinned episodes out of super-summaries
  (``sql/compress.sql``), so the episode stays in recall as itself, with its own events and
  evidence, rather than beside a super that restates it (two lines for one session in a block).
  Pinning an episode that was already compressed brings it back to recall and rebuilds its period's
  super-summary from the other sessions; unpinning leaves it to the next compress run;
- survives every pruning policy: a policy filters with the SQL function ``episodes_may_prune`` (migrations 0012, 0020);
- is inherited by its session's next episode when the session is re-summarised.

Only current session episodes can be pinned: a super-summary is already the compressed form, and a
superseded episode is history (pin its replacement).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from jobs.compress.run import rebuild_period
from jobs.db import Conn, Database
from jobs.errors import EpisodeNotFound, EpisodeNotPinnable
from jobs.sql import query


@dataclass(frozen=True)
class PinChange:
    """What a pin or unpin did. ``changed`` is false when the episode already was as asked;
    ``rebuilt`` is the outcome of rebuilding the super-summary a newly pinned episode left."""

    episode_id: int
    user_id: str
    pinned: bool
    changed: bool
    rebuilt: str | None = None

    def line(self) -> str:
        verb = "pinned" if self.pinned else "unpinned"
        text = (
            f"episode {self.episode_id} (user {self.user_id}) {verb}"
            if self.changed
            else (f"episode {self.episode_id} was already {verb}")
        )
        return text + (f"; its compressed period's super-summary: {self.rebuilt}" if self.rebuilt else "")


def pin(db: Database, tenant_id: str, episode_id: int) -> PinChange:
    """Pin a current session episode of ``tenant_id``; raises :class:`EpisodeNotFound` for an unknown
    id (another tenant's id is unknown here: row-level security hides it) and EpisodeNotPinnable for a
    super-summary or a superseded episode. A compressed episode returns to recall at once and its
    period's super-summary is rebuilt from the other sessions (the model is called for that, or the
    offline compressor without an API key); if that rebuild fails the next compress run completes it."""
    with db.tenant(tenant_id) as conn:
        row = conn.execute(query("pin_episode"), {"id": episode_id, "tenant_id": tenant_id}).fetchone()
        if row is None:
            _refuse(conn, tenant_id, episode_id)
    rebuilt = None
    if row["super_start"] is not None:
        rebuilt = rebuild_period(db, tenant_id, row["user_id"], row["super_start"], row["super_end"])
    return PinChange(episode_id, row["user_id"], True, not row["was_pinned"], rebuilt)


def unpin(db: Database, tenant_id: str, episode_id: int) -> PinChange:
    """Unpin an episode of ``tenant_id`` (errors as :func:`pin`). It decays again, and the next compress
    run may merge it into its period's super-summary."""
    with db.tenant(tenant_id) as conn:
        row = conn.execute(query("unpin_episode"), {"id": episode_id, "tenant_id": tenant_id}).fetchone()
        if row is None:
            _refuse(conn, tenant_id, episode_id)
    return PinChange(episode_id, row["user_id"], False, bool(row["was_pinned"]))


def _refuse(conn: Conn, tenant_id: str, episode_id: int) -> NoReturn:
    """Raise the error that says why ``episode_id`` cannot be (un)pinned."""
    found = conn.execute(query("episode_identity"), {"id": episode_id, "tenant_id": tenant_id}).fetchone()
    if found is None:
        raise EpisodeNotFound(
            f"No episode {episode_id} in tenant {tenant_id!r}; "
            "see analyst.episode_timeline for the tenant's episode ids."
        )
    if found["kind"] == "super":
        raise EpisodeNotPinnable(
            f"Episode {episode_id} is a super-summary; pin the session episodes it compressed "
            f"(analyst.episode_timeline where compressed_into = {episode_id})."
        )
    raise EpisodeNotPinnable(
        f"Episode {episode_id} was superseded by a re-run of its session"
        + (f"; pin episode {found['superseded_by']} instead." if found["superseded_by"] else ".")
    )
