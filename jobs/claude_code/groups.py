"""Groups of repositories that share memory (issue 49; migration 0039, `episodes claude-code share`).

A Claude Code project is its git repository (jobs.repository.identity), and recall in it sees that
repository's purpose and ``general``. Repositories whose work belongs together (a service and its client
library) can be put in one group by their user: a recall in any member then sees every member's episodes.
Nothing is moved: the sessions keep their repository's purpose, so leaving a group (``unshare``) undoes it
exactly. Groups are per user, as recall is; two repositories not grouped never share.

Recall filters on the purposes EPISODES_PURPOSE_MAP allows (jobs.recall.purposes); :func:`shared_purposes` reads the
group once per recall and hands its other members to ``Recaller.recall(shared_with=...)`` (no copy kept: a change
is seen by the next recall).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from jobs.db import Database
from jobs.errors import EpisodesError
from jobs.formats.claude_code import PURPOSE_PREFIX, path_purpose, repository_purpose
from jobs.repository.identity import normalise_url, place_of, repository_name
from jobs.sql import query

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
NAME_RULE = "1 to 63 of a-z 0-9 . _ -, starting with a letter or digit"


class GroupError(EpisodesError):
    """A group cannot be made or changed as asked."""


@dataclass(frozen=True)
class Member:
    """A repository (or a folder outside git) as a group holds it: its purpose and what it was resolved from."""

    purpose: str
    repository: str
    name: str


@dataclass
class Change:
    """What ``share`` or ``unshare`` did (or, with ``dry_run``, would do)."""

    group: str | None = None
    added: list[Member] = field(default_factory=list)
    removed: list[tuple[str, Member]] = field(default_factory=list)  # (group, member)
    already: list[Member] = field(default_factory=list)


def resolve(target: str) -> Member:
    """A folder of this machine (its git repository, or the folder itself outside git) or a remote URL."""
    if os.path.isdir(target):
        place = place_of(target)
        if place is not None:
            return Member(repository_purpose(place.name, place.identity), place.identity, place.name)
        folder = os.path.normpath(os.path.abspath(target))
        return Member(path_purpose(folder), folder, os.path.basename(folder) or "root")
    remote = normalise_url(target)
    if remote is None:
        raise GroupError(
            f"{target!r} is neither a folder on this machine nor a remote URL (https://host/owner/name or "
            "git@host:owner/name); name a folder of the repository or its remote"
        )
    name = repository_name(remote)
    return Member(repository_purpose(name, remote), remote, name)


def _member(purpose: object, repository: object) -> Member:
    return Member(str(purpose), str(repository), repository_name(str(repository)))


def _members(db: Database, tenant_id: str, user_id: str) -> dict[str, list[Member]]:
    with db.tenant(tenant_id) as conn:
        rows = conn.execute(query("groups_of_user"), {"tenant_id": tenant_id, "user_id": user_id}).fetchall()
    found: dict[str, list[Member]] = {}
    for row in rows:
        found.setdefault(str(row["name"]), []).append(_member(row["purpose"], row["repository"]))
    return found


def groups(db: Database, tenant_id: str, user_id: str) -> dict[str, list[Member]]:
    """The user's groups by name, each with its members."""
    return _members(db, tenant_id, user_id)


def share(
    db: Database, tenant_id: str, user_id: str, targets: list[str], *, name: str | None = None, dry_run: bool = False
) -> Change:
    """Put the repositories of ``targets`` in one group (joining the group one of them is in already, or a new
    one named ``name``, else after the first repository). A repository in another group of the user is refused:
    `unshare` it first. Nothing is written with ``dry_run``."""
    wanted = list({m.purpose: m for m in (resolve(t) for t in targets)}.values())
    existing = _members(db, tenant_id, user_id)
    where = {m.purpose: group for group, ms in existing.items() for m in ms}
    joined = sorted({where[m.purpose] for m in wanted if m.purpose in where})
    if name is not None and not NAME.match(name):
        raise GroupError(f"group name {name!r} is invalid; use {NAME_RULE}")
    chosen = name or (joined[0] if len(joined) == 1 else None) or _default_name(wanted[0])
    others = sorted(g for g in joined if g != chosen)
    if others:
        taken = ", ".join(m.repository for m in wanted if where.get(m.purpose) in others)
        raise GroupError(
            f"{taken} already in group {', '.join(others)}; a repository is in one group only: run "
            "`episodes claude-code unshare` on it first"
        )
    if len(wanted) + len(existing.get(chosen, [])) < 2 and not any(m.purpose in where for m in wanted):
        raise GroupError("a group shares memory between two repositories or more; name at least two")
    change = Change(group=chosen)
    for member in wanted:
        (change.already if where.get(member.purpose) == chosen else change.added).append(member)
    if not dry_run and change.added:
        with db.tenant(tenant_id) as conn, conn.cursor() as cur:
            cur.executemany(
                query("group_add"),
                [
                    {
                        "tenant_id": tenant_id,
                        "user_id": user_id,
                        "name": chosen,
                        "purpose": m.purpose,
                        "repository": m.repository,
                    }
                    for m in change.added
                ],
            )
    return change


def _default_name(member: Member) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", member.name.lower()).strip("-._")[:63]
    return slug or "group"


def unshare(
    db: Database,
    tenant_id: str,
    user_id: str,
    targets: list[str],
    *,
    group: str | None = None,
    dry_run: bool = False,
) -> Change:
    """Take the repositories of ``targets`` out of their group, or the whole ``group``; a group left with one
    repository goes too (it shares nothing). In one transaction, rolled back with ``dry_run``."""
    purposes = [resolve(t).purpose for t in targets]
    change = Change(group=group)
    scope = {"tenant_id": tenant_id, "user_id": user_id}
    try:
        with db.tenant(tenant_id) as conn:
            gone = conn.execute(query("group_remove"), {**scope, "purposes": purposes, "name": group}).fetchall()
            names = sorted({str(r["name"]) for r in gone})
            gone += conn.execute(query("group_drop_singles"), {**scope, "names": names}).fetchall()
            change.removed = [(str(r["name"]), _member(r["purpose"], r["repository"])) for r in gone]
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass  # rolled back: nothing written
    return change


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


def group_purposes(db: Database, tenant_id: str, user_id: str, purpose: str) -> list[str]:
    """The purposes of the group ``purpose`` is in, for this user ([] when it is in none)."""
    with db.tenant(tenant_id) as conn:
        rows = conn.execute(
            query("group_purposes"), {"tenant_id": tenant_id, "user_id": user_id, "purpose": purpose}
        ).fetchall()
    return [str(r["purpose"]) for r in rows]


def shared_purposes(db: Database, tenant_id: str, user_id: str, purpose: str | None) -> list[str]:
    """The other repositories' purposes whose memory a recall of ``purpose`` sees (``Recaller.recall``'s
    ``shared_with``): its group's, for a repository in one of the user's groups; else none."""
    if purpose is None or not purpose.startswith(PURPOSE_PREFIX):
        return []
    members = group_purposes(db, tenant_id, user_id, purpose)
    return members if len(members) >= 2 else []
