"""The per-user recall copies (jobs/recall/index.py) under cache pressure and after an erasure: one
user's copy is worked on by one thread at a time however small the cache, and a forget leaves no copy
of the user in the process that forgot."""

from __future__ import annotations

import threading

import numpy as np
from test_recall import episode_row, unit, words

from jobs.db import Database
from jobs.recall.index import RecallIndex
from jobs.sql import query
from jobs.store import insert_episode

DIM = 384
TEXT = "budget invoice hotel refund"


def populate(db: Database, users: tuple[str, ...] = ("u1", "u2"), n: int = 3, seed: int = 7) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    with db.tenant("acme") as conn:
        return {user: [insert_episode(conn, episode_row(words(rng), user=user, vector=unit(rng))) for _ in range(n)]
                for user in users}


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
