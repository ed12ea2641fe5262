"""Claude Code project scopes cannot be forged by a look-alike folder (issue 35, item 4).

A project's purpose was ``cc-<slug>-<6 hex>``: 24 bits of the path's SHA-256, so a sibling folder with
the same 24 bits (found in seconds) shared the other project's memory. It keeps 64 bits now, and
migration 0028 moves the purposes already stored, from the project paths the transcripts kept.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re

import psycopg
import pytest

from jobs import migrate
from jobs.formats.claude_code import project_purpose
from jobs.recall.purposes import purpose_filter

MIGRATION = 28


def _old_purpose(path: str) -> str:
    """The purpose as versions before 0028 gave it: 24 bits of the digest, the name cut at 48."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:6]
    slug = re.sub(r"[^a-z0-9]+", "-", path.rsplit("/", 1)[-1].lower()).strip("-")[:48] or "root"
    return f"cc-{slug}-{digest}"


def _look_alikes(name: str = "shop-api") -> tuple[str, str]:
    """Two folders of one name whose old purposes are the same (24 bits collide after ~5,000 tries)."""
    seen: dict[str, str] = {}
    for i in itertools.count():
        path = f"/home/ann/{i}/{name}"
        old = _old_purpose(path)
        if old in seen:
            return seen[old], path
        seen[old] = path
    raise AssertionError("unreachable")


def test_a_purpose_keeps_64_bits_of_the_path_and_at_most_64_characters() -> None:
    path = "/home/ann/Code/My Project"
    purpose = project_purpose(path)
    assert re.fullmatch(r"cc-my-project-[0-9a-f]{16}", purpose), purpose
    assert purpose.endswith(hashlib.sha256(path.encode()).hexdigest()[:16])
    long = "/srv/" + "a-very-long-folder-name-" * 4
    cut = project_purpose(long)
    assert len(cut) <= 64 and cut.endswith("-" + hashlib.sha256(long.encode()).hexdigest()[:16])  # the name is cut
    assert re.fullmatch(r"[a-z0-9_-]{1,64}", cut) and "--" not in cut
    assert purpose_filter(purpose) == sorted([purpose, "general"])


def test_look_alike_folders_no_longer_share_a_project() -> None:
    first, second = _look_alikes()
    assert _old_purpose(first) == _old_purpose(second)  # what a look-alike got before
    assert project_purpose(first) != project_purpose(second)


def _insert_transcript(conn: psycopg.Connection, user: str, session: str, purpose: str, project: str | None) -> int:
    row = conn.execute(
        "INSERT INTO transcripts (tenant_id, user_id, session_id, agent_id, purpose, messages, content_hash, "
        'ended_at, metadata) VALUES (\'acme\', %s, %s, \'claude-code\', %s, \'[{"role": "user", "content": "hi"}]\', '
        "'h', now(), %s) RETURNING id",
        (user, session, purpose, json.dumps({"project": project}) if project else None),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _insert_episode(conn: psycopg.Connection, user: str, session: str, purpose: str, transcript: int | None) -> int:
    row = conn.execute(
        "INSERT INTO episodes (tenant_id, user_id, kind, transcript_id, session_id, purpose, summary, importance, "
        "started_at, ended_at, model, prompt_version) VALUES ('acme', %s, 'session', %s, %s, %s, 'we chose pgvector', "
        "0.5, now(), now(), 'm', 'p') RETURNING id",
        (user, transcript, session, purpose),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_migration_moves_stored_purposes_where_a_stored_path_says_which_project(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything = migrate.available()
    assert MIGRATION in [m.version for m in everything]
    shop, long = "/home/ann/work/shop-api", "/home/ann/work/" + "A Very Long Folder Name, " * 3
    first, second = _look_alikes()
    with psycopg.connect(blank_db_url) as conn:
        monkeypatch.setattr(migrate, "available", lambda: [m for m in everything if m.version < MIGRATION])
        migrate.migrate(conn, embedding_dim=3, embedder="tiny")
        with conn.transaction():
            # ann: one verified transcript (its project path kept) and its episode ...
            t_shop = _insert_transcript(conn, "ann", "s1", _old_purpose(shop), shop)
            e_shop = _insert_episode(conn, "ann", "s1", _old_purpose(shop), t_shop)
            # ... a transcript of the same project that kept no path, and an episode whose transcript is gone
            t_bare = _insert_transcript(conn, "ann", "s2", _old_purpose(shop), None)
            e_orphan = _insert_episode(conn, "ann", "s0", _old_purpose(shop), None)
            t_long = _insert_transcript(conn, "ann", "s3", _old_purpose(long), long)
            t_general = _insert_transcript(conn, "ann", "s4", "general", None)
            # bob: the collision itself, two projects under one old purpose, and a row that could be either
            t_first = _insert_transcript(conn, "bob", "s5", _old_purpose(first), first)
            t_second = _insert_transcript(conn, "bob", "s6", _old_purpose(second), second)
            t_either = _insert_transcript(conn, "bob", "s7", _old_purpose(first), None)
            e_either = _insert_episode(conn, "bob", "s7", _old_purpose(first), t_either)
            # carl: no stored path says which project this was; ann's path does not decide for carl
            t_carl = _insert_transcript(conn, "carl", "s8", _old_purpose(shop), None)

        monkeypatch.setattr(migrate, "available", lambda: everything)
        applied = [m.version for m in migrate.migrate(conn, embedding_dim=3, embedder="tiny")]
        assert MIGRATION in applied

        def purpose(table: str, row: int) -> str:
            found = conn.execute(f"SELECT purpose FROM {table} WHERE id = %s", (row,)).fetchone()
            assert found is not None
            return str(found[0])

        new_shop = project_purpose(shop)  # the new purpose computed in SQL is the one Python computes
        assert [purpose("transcripts", t_shop), purpose("episodes", e_shop)] == [new_shop, new_shop]
        assert [purpose("transcripts", t_bare), purpose("episodes", e_orphan)] == [new_shop, new_shop]
        assert purpose("transcripts", t_long) == project_purpose(long)
        assert purpose("transcripts", t_general) == "general"
        assert purpose("transcripts", t_first) == project_purpose(first)
        assert purpose("transcripts", t_second) == project_purpose(second)
        assert project_purpose(first) != project_purpose(second)
        # Which of bob's two projects these belong to cannot be told: left as they were, in no project's scope.
        assert [purpose("transcripts", t_either), purpose("episodes", e_either)] == [_old_purpose(first)] * 2
        assert purpose("transcripts", t_carl) == _old_purpose(shop)
