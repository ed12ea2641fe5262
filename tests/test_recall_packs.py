"""Recall packs (migration 0021, jobs/recall/packs.py): a copy started from a pack and brought up to date
by the changes since scores and recalls exactly as a copy read whole; and no erasure leaves a pack behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from support.recall_rows import NOW, UNBOUNDED, episode_row, unit, words
from support.waiting import backend, blocked_by, wait_until

from jobs.db import Database, one
from jobs.embeddings import Embedder, HashingEmbedder
from jobs.embeddings.recorded import Recorded
from jobs.recall import RecallConfig, Recaller
from jobs.recall.index import RecallIndex, Scores, UserIndex
from jobs.recall.packs import PackWriter, read_pack, write_pack
from jobs.rights.correct import EpisodeCorrection, correct_episode
from jobs.rights.erase_episode import forget_episode
from jobs.rights.forget import forget_user
from jobs.sql import query
from jobs.store import insert_episode

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

DIM = 384
CFG = RecallConfig(recent_n=3, top_k=15, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
TEXT = "budget invoice hotel refund"


@pytest.fixture
def writer(db: Database) -> Iterator[PackWriter]:
    """A writer of its own (as recall() gets one per database), packing every user with a candidate."""
    packs = PackWriter(Database(db.settings.with_(pool_size=1), db.url), min_rows=1)
    yield packs
    packs.close()


def populate(db: Database, rng: np.random.Generator, n: int = 60, user: str = "u1") -> list[int]:
    with db.tenant("acme") as conn:
        ids = [
            insert_episode(
                conn,
                episode_row(
                    words(rng),
                    user=user,
                    days_ago=float(rng.uniform(1, 900)),
                    vector=unit(rng),
                    importance=float(rng.uniform(0, 1)),
                    purpose=str(rng.choice(["general", "support"])),
                ),
            )
            for _ in range(n)
        ]
        insert_episode(conn, episode_row(words(rng), user="u2", vector=unit(rng)))  # a neighbour
    with db.tenant("other") as conn:  # the same user id in another tenant
        insert_episode(conn, episode_row(words(rng), tenant="other", vector=unit(rng)))
    return ids


def packs_of(db: Database, user: str = "u1") -> int:
    with db.admin() as conn:
        return one(
            conn.execute("SELECT count(*) AS n FROM recall_packs WHERE tenant_id = 'acme' AND user_id = %s", (user,))
        )["n"]


def scores(db: Database, index: RecallIndex, vector: np.ndarray, purposes: list[str] | None = None) -> Scores:
    with db.tenant("acme") as conn, index.user(conn, "acme", "u1", TEXT) as (copy, lexemes):
        return copy.scores(vector, lexemes, int(NOW.timestamp() * 1_000_000), purposes)


def whole(db: Database, vector: np.ndarray, purposes: list[str] | None = None) -> Scores:
    """The scores of a copy read whole (recall_changes since 0), whatever pack there is."""
    with db.tenant("acme") as conn:
        row = one(
            conn.execute(
                query("recall_changes"),
                {"tenant_id": "acme", "user_id": "u1", "since": 0, "epoch": None, "query_text": TEXT},
                binary=True,
            )
        )
        copy = UserIndex(DIM)
        copy.apply(row)
        lexemes = [x.encode() for x in row["query_lexemes"]]
    return copy.scores(vector, lexemes, int(NOW.timestamp() * 1_000_000), purposes)


def assert_same(a: Scores, b: Scores) -> None:
    """The same candidates with bit-identical scores (order aside: slots differ)."""
    ia, ib = np.argsort(a.ids), np.argsort(b.ids)
    for name in ("ids", "ended_us", "importance", "distance", "text", "pinned"):
        np.testing.assert_array_equal(getattr(a, name)[ia], getattr(b, name)[ib], err_msg=name)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_copy_from_a_pack_and_the_changes_since_equals_a_full_read(
    db: Database, writer: PackWriter, seed: int
) -> None:
    """Random runs of edits (new, re-scored, pinned, superseded, compressed, rewritten, deleted episodes,
    the user forgotten and back): after each, a cold copy started from the pack (when one may exist) scores
    every candidate bit for bit as a copy read whole, and recalls the same episodes."""
    rng = np.random.default_rng(seed)
    ids = populate(db, rng)
    vector = unit(rng)
    pack_kept = False
    for step in range(14):
        from_pack = RecallIndex(DIM)  # no writer: it reads the pack, and never writes one
        got = scores(db, from_pack, vector)
        assert from_pack.pack_reads == int(pack_kept), f"step {step}: the pack was {'' if pack_kept else 'not '}read"
        assert from_pack.full_reads == int(not pack_kept)
        assert_same(got, whole(db, vector))
        assert_same(scores(db, from_pack, vector, ["support"]), whole(db, vector, ["support"]))  # and warm
        cold = Recaller(db, config=CFG, index=RecallIndex(DIM))
        with_pack = [
            (e.id, e.relevance_rank)
            for e in cold.recall_vector("acme", "u1", TEXT, vector, budget_tokens=UNBOUNDED, now=NOW).episodes
        ]
        read_whole = RecallIndex(DIM, packs=writer)  # writes the pack of its full read
        with db.tenant("acme") as conn:  # hidden for this read (the app role may delete its tenant's packs)
            conn.execute("DELETE FROM recall_packs WHERE tenant_id = 'acme' AND user_id = 'u1'")
        full = Recaller(db, config=CFG, index=read_whole).recall_vector(
            "acme", "u1", TEXT, vector, budget_tokens=UNBOUNDED, now=NOW
        )
        assert with_pack == [(e.id, e.relevance_rank) for e in full.episodes]
        assert writer.flush() and packs_of(db) == 1

        live = [i for i in ids if i is not None]
        op = rng.choice(["insert", "insert", "rescore", "pin", "supersede", "compress", "rewrite", "delete", "forget"])
        target = int(rng.choice(live)) if live else None
        erases = op in ("rewrite", "delete", "forget")
        with db.tenant("acme") as conn:
            if op == "insert" or target is None:
                ids.append(
                    insert_episode(
                        conn,
                        episode_row(
                            words(rng),
                            days_ago=float(rng.uniform(0, 5)),
                            vector=vector if rng.uniform() < 0.3 else unit(rng),
                        ),
                    )
                )
                erases = False
            elif op == "rescore":
                conn.execute(
                    "UPDATE episodes SET importance = %s WHERE tenant_id = 'acme' AND id = %s",
                    (float(rng.uniform(0, 1)), target),
                )
            elif op == "pin":
                conn.execute("UPDATE episodes SET pinned_at = %s WHERE tenant_id = 'acme' AND id = %s", (NOW, target))
            elif op == "supersede":
                conn.execute(
                    "UPDATE episodes SET status = 'superseded' WHERE tenant_id = 'acme' AND id = %s", (target,)
                )
            elif op == "compress":  # into any other current episode, standing in as the super-summary
                into = int(rng.choice([i for i in live if i != target] or [target]))
                conn.execute(
                    "UPDATE episodes SET compressed_into = %s WHERE tenant_id = 'acme' AND id = %s", (into, target)
                )
            elif op == "rewrite":  # in place, as a correction re-indexes: new text, new vector
                conn.execute(
                    "UPDATE episodes SET search_tsv = to_tsvector('english', %s), embedding = %s "
                    "WHERE tenant_id = 'acme' AND id = %s",
                    (TEXT, unit(rng), target),
                )
            elif op == "delete":
                conn.execute(query("release_references"), {"tenant_id": "acme", "ids": [target]})
                conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND id = %s", (target,))
                ids[ids.index(target)] = None
        if op == "forget" and target is not None:
            forget_user(db, "acme", "u1")
            ids = [None] * len(ids)
            with db.tenant("acme") as conn:  # the user comes back at once
                ids += [
                    insert_episode(conn, episode_row(words(rng), days_ago=float(d), vector=unit(rng)))
                    for d in range(1, 4)
                ]
        if erases:
            assert packs_of(db) == 0, f"{op} left the pack"
        pack_kept = packs_of(db) == 1


def test_the_recorded_embedder_is_checked_on_every_read_from_the_start_and_only_then(
    db: Database, writer: PackWriter
) -> None:
    """``accept`` sees the database's embedder on a whole read, on a read from a pack and on the read anew
    after a deletion, not on a warm copy's later reads; a recaller whose embedder is not the recorded
    one follows the record from a pack as from a whole read."""
    ids = populate(db, np.random.default_rng(5), n=8)
    asked: list[Recorded] = []

    def accept(recorded: Recorded) -> bool:
        asked.append(recorded)
        return True

    def read(index: RecallIndex) -> None:
        with db.tenant("acme") as conn, index.user(conn, "acme", "u1", TEXT, accept) as got:
            assert got is not None and got.copy.live == len([i for i in ids if i is not None])

    warm = RecallIndex(DIM, packs=writer)
    read(warm)
    assert asked == [Recorded("all-MiniLM-L6-v2", DIM)] and warm.full_reads == 1
    read(warm)
    assert len(asked) == 1  # a warm copy's later read
    assert writer.flush() and packs_of(db) == 1
    from_pack = RecallIndex(DIM)
    read(from_pack)
    assert from_pack.pack_reads == 1 and from_pack.full_reads == 0 and len(asked) == 2
    with db.tenant("acme") as conn:
        conn.execute(query("release_references"), {"tenant_id": "acme", "ids": [ids[0]]})
        conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND id = %s", (ids[0],))
    ids[0] = None
    read(warm)
    assert warm.full_reads == 2 and len(asked) == 3  # reset by the deletion: read anew, and asked

    read(RecallIndex(DIM, packs=writer))  # a pack again, for the recaller below
    assert writer.flush() and packs_of(db) == 1
    other = Recaller(db, HashingEmbedder(DIM), config=CFG, index=RecallIndex(DIM))
    first_index = other.index
    other.recall_vector("acme", "u1", TEXT, unit(np.random.default_rng(6)), budget_tokens=UNBOUNDED, now=NOW)
    assert first_index.pack_reads == 1 and other.embedder.name == "all-MiniLM-L6-v2" and other.index is not first_index


def test_every_erasure_drops_the_pack_in_its_transaction(db: Database, writer: PackWriter, embedder: Embedder) -> None:
    """Erasing an episode, correcting one, forgetting the user, purging vectors and re-embedding each leave
    no pack holding what they removed; other users' packs stay."""
    rng = np.random.default_rng(7)
    ids = populate(db, rng, n=12)
    populate(db, rng, n=3, user="u3")

    def packed() -> None:
        for user in ("u1", "u3"):
            index = RecallIndex(DIM, packs=writer)
            with db.tenant("acme") as conn, index.user(conn, "acme", user, TEXT):
                pass
        assert writer.flush() and packs_of(db) == 1 and packs_of(db, "u3") == 1

    packed()
    forget_episode(db, "acme", ids[0])
    assert packs_of(db) == 0 and packs_of(db, "u3") == 1
    packed()
    correct_episode(
        db,
        "acme",
        ids[1],
        EpisodeCorrection(summary="The user asked about something else."),
        actor="user:u1",
        embedder=embedder,
    )
    assert packs_of(db) == 0
    packed()
    with db.tenant("acme") as conn:  # what compress --purge-embeddings does to a compressed session
        conn.execute("UPDATE episodes SET compressed_into = %s WHERE tenant_id = 'acme' AND id = %s", (ids[3], ids[2]))
    assert packs_of(db) == 1  # compressing changes nothing a pack holds: the changes since bring it up to date
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episodes SET embedding = NULL WHERE tenant_id = 'acme' AND id = %s", (ids[2],))
    assert packs_of(db) == 0
    packed()
    with db.admin() as conn:  # the re-embed's switch: every copy is read anew, every pack goes
        conn.execute(query("reembed_invalidate_copies"))
    assert packs_of(db) == 0 and packs_of(db, "u3") == 0
    packed()
    forget_user(db, "acme", "u1")
    assert packs_of(db) == 0 and packs_of(db, "u3") == 1


def test_a_pack_read_before_an_erasure_is_never_stored_after_it(db: Database) -> None:
    """The writer's lock on the counter: a pack of an older version is refused, and an erasure that comes
    while a pack is being written waits for it and then drops it."""
    rng = np.random.default_rng(3)
    ids = populate(db, rng, n=10)

    def pack_now() -> dict:
        index = RecallIndex(DIM)
        with db.tenant("acme") as conn, index.user(conn, "acme", "u1", TEXT) as (copy, _):
            return copy.pack()

    stale = pack_now()
    with db.tenant("acme") as conn:
        conn.execute(query("release_references"), {"tenant_id": "acme", "ids": [ids[0]]})
        conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND id = %s", (ids[0],))
    with db.tenant("acme") as conn:
        assert not write_pack(conn, "acme", "u1", stale)  # read before the deletion: refused
    assert packs_of(db) == 0

    fresh = pack_now()
    done = threading.Event()

    def erase() -> None:
        with db.tenant("acme") as conn:
            conn.execute(query("release_references"), {"tenant_id": "acme", "ids": [ids[1]]})
            conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND id = %s", (ids[1],))
        done.set()

    with db.tenant("acme") as conn:
        assert write_pack(conn, "acme", "u1", fresh)
        writer = backend(conn)
        eraser = threading.Thread(target=erase)
        eraser.start()
        wait_until(lambda: blocked_by(db.url, writer), 30, "the erasure to wait for the pack's lock")
        assert not done.is_set(), "the erasure waits for the pack's transaction"
    eraser.join()
    assert packs_of(db) == 0


def test_packs_are_the_tenants_own(db: Database, writer: PackWriter) -> None:
    """Row-level security hides another tenant's pack and refuses writing one."""
    populate(db, np.random.default_rng(4), n=5)
    index = RecallIndex(DIM, packs=writer)
    with db.tenant("acme") as conn, index.user(conn, "acme", "u1", TEXT):
        pass
    assert writer.flush() and packs_of(db) == 1
    with db.tenant("acme") as conn:
        fresh = read_pack(conn, "acme", "u1", DIM)
    assert fresh is not None
    with db.tenant("other") as conn:
        assert conn.execute("SELECT count(*) AS n FROM recall_packs").fetchone()["n"] == 0
        assert read_pack(conn, "acme", "u1", DIM) is None
    with pytest.raises(psycopg.errors.InsufficientPrivilege), db.tenant("other") as conn:
        write_pack(conn, "acme", "u1", fresh)  # row-level security: not the transaction's tenant
    with db.tenant("acme") as conn:
        assert read_pack(conn, "acme", "u1", DIM) is not None
        assert read_pack(conn, "acme", "u1", DIM + 1) is None  # vectors of another embedder's dimension
