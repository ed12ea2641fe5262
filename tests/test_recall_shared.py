"""recall() shares one warm Recaller and pool per database across the process: the block it renders,
other databases, concurrent callers."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import psycopg
import pytest
from support.recall_rows import HISTORY, NOW, add

from jobs import config
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.recall import (
    Recall,
    Recaller,
    close_recallers,
    recall,
    shared_recaller,
)

# The shared recallers and pools are Python: runs on one PostgreSQL only (tests/test_recall_exact.py runs recall's
# SQL on Citus).


def test_render_through_the_template(db: Database, embedder: Embedder, shared: None) -> None:
    empty = recall("acme", "nobody", "hi", db=db, now=NOW)
    assert empty.render() == (
        '<previous_episodes as_of="2025-06-01">\nNo earlier sessions with this user.\n</previous_episodes>'
    )
    add(
        db,
        "The user asked for a vegetarian lasagna recipe for eight guests.",
        days_ago=3,
        embedder=embedder,
        purpose="support",
    )
    block = recall("acme", "u1", "lasagna", db=db, now=NOW).render()
    lines = block.splitlines()
    assert lines[0] == '<previous_episodes as_of="2025-06-01">' and lines[-1] == "</previous_episodes>"
    assert "Episodes (oldest first):" in lines
    assert (
        "- 29 May 2025 [support] (relevant, recent): The user asked for a vegetarian lasagna recipe for eight guests."
    ) in lines


# ------------------------------------------------------------------------------------------------
# recall(): one warm copy per database for the whole process
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def shared(settings: config.Settings) -> Iterator[None]:
    """No shared recaller left by another test; the pools recall() opened close before the drop."""
    close_recallers()
    yield
    close_recallers()


@pytest.fixture
def other_db(admin_url: str, template_db: str, settings: config.Settings) -> Iterator[Database]:
    """A second migrated database on the same server: another URL."""
    name = f"recall_other_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    database = Database(settings.with_(database_url=psycopg.conninfo.make_conninfo("", **info)))
    yield database
    database.close()
    close_recallers()  # recall() may have opened a pool on it
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_recall_keeps_one_recaller_and_pool_per_database(
    db: Database, embedder: Embedder, shared: None, other_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    for days, text in HISTORY:
        add(db, text, days_ago=days, embedder=embedder)
    message = "Which huts should I book for my mountain hike in the Dolomites?"
    first = recall("acme", "u1", message, now=NOW)  # no db: the environment's DATABASE_URL
    recaller = shared_recaller()
    assert shared_recaller() is recaller and recaller.db is not db
    again = recall("acme", "u1", message, now=NOW)
    through_db = recall("acme", "u1", message, now=NOW, db=db)  # the caller's Database
    assert shared_recaller(db).db is db
    assert first == again == through_db == Recaller(db).recall("acme", "u1", message, now=NOW)

    new = add(db, "The user booked the Lagazuoi hut for the Dolomites hike.", days_ago=1, embedder=embedder)
    later = recall("acme", "u1", message, now=NOW)
    assert new in {ep.id for ep in later.episodes} and later.candidates == len(HISTORY) + 1

    # Another database is another recaller, whether reached through a Database or the environment.
    assert recall("acme", "u1", message, now=NOW, db=other_db).episodes == []
    monkeypatch.setenv("DATABASE_URL", other_db.url)
    elsewhere = shared_recaller()
    assert elsewhere is not recaller and elsewhere.db.url == other_db.url

    pool = recaller.db.pool
    close_recallers()  # closes the pools recall() opened
    assert pool.closed
    monkeypatch.setenv("DATABASE_URL", db.url)
    assert shared_recaller() is not recaller


def test_concurrent_recalls_answer_as_one_at_a_time(db: Database, embedder: Embedder, shared: None) -> None:
    users = ("u1", "u2", "u3")
    for user in users:
        for days, text in HISTORY:
            add(db, text, user=user, days_ago=days, embedder=embedder)
    messages = ("Which huts should I book in the Dolomites?", "Any lasagna tips?", "How is my marathon plan?")
    expected = {(u, m): Recaller(db).recall("acme", u, m, now=NOW) for u in users for m in messages}
    results: list[tuple[tuple[str, str], Recall]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def worker(k: int) -> None:
        start.wait()
        try:
            for i in range(9):  # every user and message, half through the environment, half through db
                user, message = users[(k + i) % 3], messages[(k + 2 * i) % 3]
                via = db if (k + i) % 2 else None
                results.append(((user, message), recall("acme", user, message, now=NOW, db=via)))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 54
    for key, result in results:
        assert result == expected[key], key
