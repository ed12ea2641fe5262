"""The per-user recall copies (jobs/recall/index.py) under cache pressure and after an erasure: one
user's copy is worked on by one thread at a time however small the cache, and a forget leaves no copy
of the user in the process that forgot."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from click.testing import CliRunner
from support.api_server import serve
from test_recall import NOW, episode_row, unit, words

from jobs.cli import cli
from jobs.config import Settings
from jobs.db import Database
from jobs.lifecycle import apply_policy
from jobs.prune_policy import parse_policy
from jobs.recall import Recaller, close_recallers, recall, shared_recaller
from jobs.recall.index import RecallIndex
from jobs.recall.packs import PackWriter
from jobs.rights.erase_episode import forget_episode
from jobs.rights.forget import forget_user
from jobs.service.keys import SCOPES, create_key
from jobs.sql import query
from jobs.store import insert_episode

DIM = 384
TEXT = "budget invoice hotel refund"


@pytest.fixture(autouse=True)
def no_shared_copies() -> Iterator[None]:
    """No shared recaller left by another test (their databases had this URL); the pools close before the drop."""
    close_recallers()
    yield
    close_recallers()


def populate(db: Database, users: tuple[str, ...] = ("u1", "u2"), n: int = 3, seed: int = 7) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    with db.tenant("acme") as conn:
        return {
            user: [insert_episode(conn, episode_row(words(rng), user=user, vector=unit(rng))) for _ in range(n)]
            for user in users
        }


def touch(db: Database, index: RecallIndex, user: str) -> None:
    """One recall's turn with the user's copy (read or brought up to date, then put back)."""
    with db.tenant("acme") as conn, index.user(conn, "acme", user, TEXT) as read:
        assert read is not None


def test_a_copy_evicted_while_in_use_is_still_used_by_one_thread_at_a_time(db: Database) -> None:
    """Thread A holds u1's copy; a recall of u2 pushes u1 out of a one-row cache; thread C then asks for u1.
    C must wait for A (before the fix eviction dropped u1's lock too, so C took a new one and both threads
    worked on u1 at once). The order is set by events; only C's wait, which must not end while A is
    inside, is bounded by a timeout."""
    populate(db)
    index = RecallIndex(DIM, max_rows=1)  # one row: each copy pushes out every other
    touch(db, index, "u1")  # u1's copy is held
    a_inside, a_in, release_a, c_ready, go_c, c_in = (threading.Event() for _ in range(6))
    overlaps: list[str] = []
    errors: list[BaseException] = []

    def hold_u1() -> None:
        try:
            with db.tenant("acme") as conn, index.user(conn, "acme", "u1", TEXT):
                a_inside.set()
                a_in.set()
                release_a.wait(timeout=60)
                a_inside.clear()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            a_in.set()

    def enter_u1() -> None:
        def probe(name: str) -> str:  # C's statements are asked for inside u1's turn
            if a_inside.is_set():
                overlaps.append(name)
            c_in.set()
            return query(name)

        try:
            with db.tenant("acme") as conn:
                c_ready.set()
                go_c.wait(timeout=60)
                with index.user(conn, "acme", "u1", TEXT, sql=probe):
                    c_in.set()
        except BaseException as exc:
            errors.append(exc)
            c_in.set()

    a = threading.Thread(target=hold_u1)
    c = threading.Thread(target=enter_u1)
    a.start()
    assert a_in.wait(timeout=60)
    touch(db, index, "u2")  # evicts u1's copy, which A is working on
    assert index.users == 1
    c.start()
    assert c_ready.wait(timeout=60)
    go_c.set()
    entered_early = c_in.wait(timeout=2)  # C gets in at once if the lock went with the copy
    release_a.set()
    a.join(timeout=60)
    c.join(timeout=60)
    assert not errors, errors
    assert c_in.is_set()  # C had its turn once A was done
    assert not overlaps and not entered_early, "two threads worked on one user's copy at once"


def test_a_forget_drops_the_users_copies_in_the_process_that_forgot(db: Database) -> None:
    """recall() keeps copies of u1 and u2 (the process's shared index, and a Recaller's own); forgetting
    one episode of u1, then u1, drops u1's copies at once (before the fix they stayed until evicted)."""
    ids = populate(db)
    shared = shared_recaller(db)
    own = Recaller(db, index=RecallIndex(DIM))
    for user in ("u1", "u2"):
        recall("acme", user, TEXT, db=db)
        own.recall("acme", user, TEXT)
    assert all(index.holds("acme", user) for index in (shared.index, own.index) for user in ("u1", "u2"))
    rows = shared.index.rows

    forget_episode(db, "acme", ids["u1"][0])
    assert not shared.index.holds("acme", "u1") and not own.index.holds("acme", "u1")
    assert shared.index.holds("acme", "u2") and own.index.holds("acme", "u2")  # others keep theirs
    assert shared.index.rows == rows - 3
    recall("acme", "u1", TEXT, db=db)  # read anew: without the erased episode
    assert shared.index.holds("acme", "u1") and shared.index.rows == rows - 1

    forget_user(db, "acme", "u1", dry_run=True)  # a dry run changes nothing, and drops nothing
    assert shared.index.holds("acme", "u1")
    forget_user(db, "acme", "u1")
    assert not shared.index.holds("acme", "u1") and shared.index.holds("acme", "u2")
    assert shared.index.rows == rows - 3


def test_a_forget_drops_a_pack_waiting_to_be_written(db: Database) -> None:
    """A heavy user's pack (the copy's arrays) waits for the writer's thread; an erasure drops it."""
    ids = populate(db)
    packs = PackWriter(Database(db.settings.with_(pool_size=1), db.url), min_rows=1)
    try:
        index = RecallIndex(DIM, packs=packs)
        with packs._cond:  # holds the writer's thread off (offer and discard take this re-entrant lock too)
            touch(db, index, "u1")  # a full read: offers u1's pack
            touch(db, index, "u2")
            assert packs.pending == 2
            forget_episode(db, "acme", ids["u1"][0])
            assert packs.pending == 1
    finally:
        packs.close()


def test_forgets_through_the_cli_and_the_http_api_drop_the_copies(
    db: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`episodes forget` run in this process, and DELETE /v1/episodes/{id} and /v1/users/{id} answered by a
    service in this process, leave no copy of the user in the process's recall index."""
    ids = populate(db, users=("u1", "u2", "u3"))
    shared = shared_recaller(db)
    for user in ("u1", "u2", "u3"):
        recall("acme", user, TEXT, db=db)
    monkeypatch.setenv("DATABASE_URL", db.url)
    result = CliRunner().invoke(cli, ["forget", "--tenant", "acme", "--user", "u1"])
    assert result.exit_code == 0, result.output
    assert not shared.index.holds("acme", "u1")

    _, secret = create_key(db, "acme", SCOPES, name="forgetter")
    with (
        serve(db) as url,
        httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {secret}"}) as client,
    ):
        assert client.post("/v1/recall", json={"user_id": "u2", "message": TEXT}).status_code == 200
        assert shared.index.holds("acme", "u2") and shared.index.holds("acme", "u3")
        assert client.delete(f"/v1/episodes/{ids['u2'][0]}").status_code == 200
        assert not shared.index.holds("acme", "u2")
        assert client.delete("/v1/users/u3").status_code == 200
        assert not shared.index.holds("acme", "u3")


def test_a_pruning_policy_drops_the_copies_of_the_users_it_erased_from(db: Database) -> None:
    """`episodes prune --policy` erases episodes as the user's "forget this" does: the copies go at once too."""
    populate(db)  # every episode ended 10 days before test_recall.NOW
    shared = shared_recaller(db)
    for user in ("u1", "u2"):
        recall("acme", user, TEXT, db=db)
    report = apply_policy(db, parse_policy("delete after 1d"), tenant="acme", now=NOW)
    assert report.deleted == 6
    assert not shared.index.holds("acme", "u1") and not shared.index.holds("acme", "u2")
