"""Forgetting a user, against a real PostgreSQL, with data made by the real pipeline.

Transcripts are loaded by ``jobs.ingest.ingest`` and summarised by ``jobs.summarize.run_summarize``
with the Claude extractor talking to the local fake server (so model-call rows exist). After an
erasure a scan over every column of every table in the catalog must find neither the user id nor
any distinctive word of the user's sessions, while other users and tenants are untouched."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb
from support.erasure_scan import scan, snapshot
from support.forget_data import BOB, RECORDS, ZOE, ZOE_WORDS, populate

from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest
from jobs.rights.export import export_user
from jobs.rights.forget import erasures_of, forget_user
from jobs.summarize import run_summarize

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


def test_forget_erases_the_user_everywhere_and_nothing_else(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    ids = populate(llm_db, tmp_path, embedder)
    for needle in [ZOE, *ZOE_WORDS]:
        assert scan(llm_db, needle), f"setup: {needle} should be stored before the erasure"
    globex_before = snapshot(llm_db, "tenant_id = 'globex'", ())
    bob_before = snapshot(llm_db, "tenant_id = 'acme' AND user_id = %s", (BOB,))

    report = forget_user(llm_db, "acme", ZOE)

    assert {k: report.counts[k] for k in ("transcripts", "episodes", "super_episodes", "model_calls")} == {
        "transcripts": 3,
        "episodes": 5,
        "super_episodes": 2,
        "model_calls": 4,
    }
    assert report.counts["job_runs_scrubbed"] == 1 and report.erasure_id is not None
    assert [(p.user_id, p.period_start) for p in report.rebuild] == [(BOB, dt.date(2023, 1, 1))]
    leftovers = {needle: scan(llm_db, needle) for needle in [ZOE, *ZOE_WORDS]}
    assert leftovers == {needle: [] for needle in [ZOE, *ZOE_WORDS]}
    # The other tenant, with a user of the same id, is untouched.
    assert snapshot(llm_db, "tenant_id = 'globex'", ()) == globex_before
    assert scan(llm_db, ZOE, tenant="globex") and scan(llm_db, "Patagonia", tenant="globex")
    # Bob keeps everything but the super that mixed Zoe in; his sources are back in recall.
    bob_after = snapshot(llm_db, "tenant_id = 'acme' AND user_id = %s", (BOB,))
    assert bob_after["transcripts"] == bob_before["transcripts"]
    assert bob_after["model_calls"] == bob_before["model_calls"]
    with llm_db.admin() as conn:
        bob = conn.execute(
            "SELECT id, kind, compressed_into FROM episodes WHERE user_id = %s ORDER BY id", (BOB,)
        ).fetchall()
        runs = [r["error"] for r in conn.execute("SELECT error FROM job_runs WHERE job = 'compress' ORDER BY id")]
        erasure = one(conn.execute("SELECT * FROM erasures"))
    assert [(e["kind"], e["compressed_into"]) for e in bob] == [("session", None), ("session", None)]
    assert ids["bob_super"] not in {e["id"] for e in bob}
    assert runs == ["error text removed by an erasure", "acme/u-zoe-77310 2023: the model refused"]
    # The audit row: tenant, salted hash, counts only.
    assert erasure["tenant_id"] == "acme" and erasure["kept_transcripts"] is False
    assert erasure["user_hash"] != hashlib.sha256(ZOE.encode()).hexdigest() and len(erasure["user_hash"]) == 64
    assert erasure["counts"]["episodes"] == 5 and all(isinstance(v, int) for v in erasure["counts"].values())
    assert [r["id"] for r in erasures_of(llm_db, "acme", ZOE)] == [report.erasure_id]
    assert erasures_of(llm_db, "acme", BOB) == [] and erasures_of(llm_db, "globex", ZOE) == []
    # Erasing again finds nothing and is recorded again; the globex Zoe still has her episode.
    again = forget_user(llm_db, "acme", ZOE)
    assert not again.found and len(erasures_of(llm_db, "acme", ZOE)) == 2
    assert export_user(llm_db, "globex", ZOE)["counts"]["episodes"] == 1


def test_keep_transcripts_keeps_only_the_transcripts(llm_db: Database, tmp_path: Path, embedder: Embedder) -> None:
    populate(llm_db, tmp_path, embedder)
    report = forget_user(llm_db, "acme", ZOE, keep_transcripts=True)
    assert report.counts["transcripts"] == 0 and report.counts["transcripts_kept"] == 3
    assert scan(llm_db, ZOE) == ["public.transcripts.user_id"]
    assert scan(llm_db, "marzipan") == ["public.transcripts.messages"]
    with llm_db.admin() as conn:
        states = [
            r["status"]
            for r in conn.execute("SELECT status FROM transcripts WHERE tenant_id = 'acme' AND user_id = %s", (ZOE,))
        ]
        conn.execute("UPDATE transcripts SET next_attempt_at = now() - interval '1 hour'")
        assert one(conn.execute("SELECT kept_transcripts FROM erasures"))["kept_transcripts"] is True
    assert states == ["done", "done", "done"]
    # Nothing summarises the kept transcripts again, so nothing erased comes back.
    with AnthropicExtractor(llm_db.settings) as extractor:
        assert run_summarize(llm_db, extractor=extractor, embedder=embedder).counts == {}
    assert scan(llm_db, "Thelonious") == ["public.transcripts.messages"]


def test_forget_is_all_or_nothing_and_dry_run_changes_nothing(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    populate(llm_db, tmp_path, embedder)

    def totals() -> dict[str, int]:
        with llm_db.admin() as conn:
            return {
                t: one(conn.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(t))))["n"]
                for t in ("transcripts", "episodes", "episode_events", "model_calls", "erasures")
            }

    before = totals()
    dry = forget_user(llm_db, "acme", ZOE, dry_run=True)
    assert dry.dry_run and dry.counts["episodes"] == 5 and dry.erasure_id is None
    assert "would erase 3 transcripts, 5 episodes" in dry.line()
    assert totals() == before
    with llm_db.admin() as conn:  # the last step fails: everything before it must roll back
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit store unavailable'; END $$"
        )
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON erasures FOR EACH ROW EXECUTE FUNCTION refuse()")
    try:
        with pytest.raises(psycopg.errors.RaiseException, match="audit store unavailable"):
            forget_user(llm_db, "acme", ZOE)
    finally:  # on the Citus cluster the schema outlives the test (only the rows are emptied)
        with llm_db.admin() as conn:
            conn.execute("DROP TRIGGER refuse ON erasures")
        with llm_db.admin() as conn:
            conn.execute("DROP FUNCTION refuse()")
    assert totals() == before
    assert scan(llm_db, "quokka")


def test_a_dry_run_takes_no_erasure_number_and_the_counts_name_the_lines(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    """Issue 46, items 13 and 22: the counts name the episode lines an erasure removes, and a dry run is
    no erasure (before, its rolled-back audit row spent a number: the next erasure said "#2")."""
    populate(llm_db, tmp_path, embedder)
    bob = forget_user(llm_db, "acme", BOB)
    assert bob.erasure_id is not None
    with llm_db.admin() as conn:
        lines = one(
            conn.execute("SELECT count(*) AS n FROM episode_lines WHERE tenant_id = 'acme' AND user_id = %s", (ZOE,))
        )["n"]
    assert lines > 0, "setup: Zoe's episodes should have lines"

    dry = forget_user(llm_db, "acme", ZOE, dry_run=True)
    assert dry.erasure_id is None and dry.counts["lines"] == lines
    done = forget_user(llm_db, "acme", ZOE)
    assert done.erasure_id == bob.erasure_id + 1, (bob.erasure_id, done.erasure_id)
    assert done.counts["lines"] == lines and f"{lines} episode lines" in done.line()
    assert f"recorded as erasure #{done.erasure_id}" in done.line()
    with llm_db.admin() as conn:
        assert (
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM episode_lines WHERE tenant_id = 'acme' AND user_id = %s", (ZOE,)
                )
            )["n"]
            == 0
        )
        recorded = one(conn.execute("SELECT counts FROM erasures WHERE id = %s", (done.erasure_id,)))["counts"]
    assert recorded["lines"] == lines


def test_forget_removes_super_summaries_made_by_compress(llm_db: Database, tmp_path: Path, embedder: Embedder) -> None:
    from jobs import compress

    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    ingest(llm_db, [path])
    with AnthropicExtractor(llm_db.settings) as extractor:
        run_summarize(llm_db, extractor=extractor, embedder=embedder)
    report = compress.run_compress(
        llm_db,
        compressor=compress.OfflineCompressor(embedder),
        embedder=embedder,
        now=dt.datetime(2026, 1, 15, tzinfo=dt.UTC),
        tenant="acme",
    )
    assert report.counts["created"] == 2  # Zoe's 2023 and Bob's 2023
    with llm_db.admin() as conn:
        supers = {
            r["user_id"]: r["summary"]
            for r in conn.execute("SELECT user_id, summary FROM episodes WHERE kind = 'super'")
        }
    assert "Zanzibar" in supers[ZOE] and "Reykjavik" in supers[BOB]
    result = forget_user(llm_db, "acme", ZOE)
    assert result.counts["super_episodes"] == 1 and result.rebuild == []
    assert {needle: scan(llm_db, needle) for needle in [ZOE, *ZOE_WORDS]} == {n: [] for n in [ZOE, *ZOE_WORDS]}
    with llm_db.admin() as conn:
        left = [
            (r["user_id"], r["kind"])
            for r in conn.execute("SELECT user_id, kind FROM episodes WHERE tenant_id = 'acme' ORDER BY id")
        ]
    assert left == [(BOB, "session"), (BOB, "session"), (BOB, "super")]


def test_erasures_are_tenant_scoped_and_append_only(db: Database) -> None:
    forget_user(db, "acme", ZOE)
    with db.tenant("globex") as conn:
        assert one(conn.execute("SELECT count(*) AS n FROM erasures"))["n"] == 0
    with db.tenant("acme") as conn:
        assert one(conn.execute("SELECT count(*) AS n FROM erasures"))["n"] == 1
    for statement in ("UPDATE erasures SET counts = '{}'", "DELETE FROM erasures"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with db.tenant("acme") as conn:
                conn.execute(statement)
    with pytest.raises(psycopg.errors.CheckViolation):  # no text can be written into the counts
        with db.admin() as conn:
            conn.execute(
                "INSERT INTO erasures (tenant_id, user_hash, counts) VALUES ('acme', %s, %s)",
                ("0" * 64, Jsonb({"note": ZOE})),
            )
