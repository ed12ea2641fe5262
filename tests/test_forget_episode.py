"""Forgetting one episode, against a real PostgreSQL, with episodes made by the real pipeline.

Zoe's 2023 sessions are summarised through the fake server and compressed with the offline
compressor (as tests/test_compress_rebuild.py does). Forgetting one of them must rebuild the super-summary
from the others, leave nothing of its text anywhere but the kept transcript (a scan of every column
of every table), drop it from a warm recall copy, reopen what it resolved, and be all or nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.erasure_scan import scan, snapshot

from jobs import compress
from jobs.cli import cli
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.errors import EpisodeNotFound, SuperSummaryNotErasable
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest
from jobs.recall import Recaller
from jobs.rights.correct import EpisodeCorrection, EventChange, correct_episode, corrections_of
from jobs.rights.erase_episode import forget_episode
from jobs.summarize import run_summarize

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

ZOE = "u-zoe-7731"


def record(tenant: str, session: str, day: str, said: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": ZOE,
        "session_id": session,
        "purpose": "support",
        "started_at": f"{day}T09:00:00Z",
        "ended_at": f"{day}T09:30:00Z",
        "messages": [
            {"role": "user", "name": "Zoe", "content": said},
            {"role": "assistant", "content": "Noted, I'll arrange it."},
        ],
    }


RECORDS = [
    record("acme", "z1", "2023-03-04", "We'll go with the Zanzibar tour in May."),
    record("acme", "z2", "2023-06-10", "We'll go with the quokka safari, Thelonious guiding."),
    record("acme", "z3", "2023-09-01", "We'll go with the Lisbon tram tour."),
    record("globex", "g1", "2023-05-05", "We'll go with the Patagonia exhibit."),
]
ERASED_WORDS = ["quokka", "Thelonious", "safari"]  # only in session z2


def populate(db: Database, tmp_path: Path, embedder: Embedder) -> dict[str, int]:
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    ingest(db, [path])
    with AnthropicExtractor(db.settings) as extractor:
        assert run_summarize(db, extractor=extractor, embedder=embedder).counts == {"done": len(RECORDS)}
    report = compress.run_compress(
        db,
        compressor=compress.OfflineCompressor(embedder),
        embedder=embedder,
        now=dt.datetime(2026, 1, 15, tzinfo=dt.UTC),
        tenant="acme",
    )
    assert report.counts["created"] == 1
    with db.admin() as conn:
        return {
            r["key"]: r["id"]
            for r in conn.execute(
                "SELECT coalesce(session_id, 'super') AS key, id FROM episodes WHERE status = 'current'"
            )
        }


def test_forgetting_an_episode_inside_a_super_rebuilds_it_and_leaves_no_text(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    ids = populate(llm_db, tmp_path, embedder)
    with llm_db.admin() as conn:
        event = one(
            conn.execute("SELECT id FROM episode_events WHERE episode_id = %s AND type = 'decision'", (ids["z2"],))
        )["id"]
    correct_episode(
        llm_db,
        "acme",
        ids["z2"],
        EpisodeCorrection(events={event: EventChange(text="Zoe picked the quokka safari with Thelonious.")}),
        actor=f"user:{ZOE}",
        embedder=embedder,
    )
    for word in ERASED_WORDS:
        assert set(scan(llm_db, word)) > {"public.episodes.summary", "public.transcripts.messages"}, word
    warm = Recaller(llm_db, embedder)
    now = dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    assert [e.id for e in warm.recall("acme", ZOE, "quokka safari", now=now).episodes] == [ids["super"]]
    globex = snapshot(llm_db, "tenant_id = 'globex'", ())

    report = forget_episode(
        llm_db, "acme", ids["z2"], compressor=compress.OfflineCompressor(embedder), embedder=embedder
    )

    assert report.erased_ids == [ids["z2"]] and [s.id for s in report.supers] == [ids["super"]]
    assert report.rebuilt == {ids["super"]: "created"} and report.counts["corrections_scrubbed"] == 1
    assert "rebuilt from the remaining sources" in report.line()
    # Nothing of the erased episode's text is left but its kept transcript.
    assert {word: scan(llm_db, word) for word in ERASED_WORDS} == {
        word: ["public.transcripts.messages"] for word in ERASED_WORDS
    }
    with llm_db.admin() as conn:
        supers = conn.execute("SELECT id, summary FROM episodes WHERE kind = 'super'").fetchall()
        lineage = [
            r["source_episode_id"] for r in conn.execute("SELECT source_episode_id FROM episode_lineage ORDER BY 1")
        ]
        transcript = one(conn.execute("SELECT status, forgotten_at FROM transcripts WHERE session_id = 'z2'"))
        erasure = one(conn.execute("SELECT scope, user_hash, counts, kept_transcripts FROM erasures"))
    assert len(supers) == 1 and supers[0]["id"] != ids["super"] and "Lisbon" in supers[0]["summary"]
    assert lineage == [ids["z1"], ids["z3"]]
    assert transcript["status"] == "done" and transcript["forgotten_at"] is not None
    assert erasure["scope"] == "episode" and erasure["kept_transcripts"] and ZOE not in json.dumps(erasure["counts"])
    # The audit keeps that a correction happened, and nothing of it.
    (audit,) = corrections_of(llm_db, "acme", ids["z2"])
    assert audit["field"] == "event.text" and audit["erased_at"] is not None
    assert (audit["old_value"], audit["new_value"], audit["event_text"], audit["actor"]) == (None, None, None, None)
    # The warm copy no longer holds it: the new super stands in for the period.
    assert [e.id for e in warm.recall("acme", ZOE, "quokka safari", now=now).episodes] == [supers[0]["id"]]
    assert snapshot(llm_db, "tenant_id = 'globex'", ()) == globex
    # The transcript is never summarised into the same memory again, even when it is uploaded anew.
    with llm_db.admin() as conn:
        conn.execute("UPDATE transcripts SET status = 'pending', content_hash = 'new' WHERE session_id = 'z2'")
        assert one(conn.execute("SELECT status FROM transcripts WHERE session_id = 'z2'"))["status"] == "done"
    with AnthropicExtractor(llm_db.settings) as extractor:
        assert run_summarize(llm_db, extractor=extractor, embedder=embedder).counts == {}


def test_a_super_with_one_source_left_is_removed_and_the_source_returns(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    ids = populate(llm_db, tmp_path, embedder)
    offline = compress.OfflineCompressor(embedder)
    forget_episode(llm_db, "acme", ids["z1"], compressor=offline, embedder=embedder)
    with llm_db.admin() as conn:
        rebuilt = one(conn.execute("SELECT id FROM episodes WHERE kind = 'super'"))["id"]
    report = forget_episode(llm_db, "acme", ids["z3"], compressor=offline, embedder=embedder)
    assert report.rebuilt == {rebuilt: "uncompressed"} and "back in recall" in report.line()
    with llm_db.admin() as conn:
        left = conn.execute(
            "SELECT session_id, kind, compressed_into FROM episodes WHERE tenant_id = 'acme'"
        ).fetchall()
    assert left == [{"session_id": "z2", "kind": "session", "compressed_into": None}]


def test_resolutions_and_replacements_by_an_erased_episode_are_undone(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    ids = populate(llm_db, tmp_path, embedder)
    with llm_db.admin() as conn:
        events = {
            r["session_id"] + r["type"]: r["id"]
            for r in conn.execute(
                "SELECT e.session_id, ev.type, ev.id FROM episode_events ev JOIN episodes e "
                "ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id "
                "WHERE e.kind = 'session'"
            )
        }
        conn.execute(
            "UPDATE episode_events SET status = 'done', resolved_by = %s, resolved_at = now() WHERE id = %s",
            (ids["z3"], events["z1commitment"]),
        )
        conn.execute(
            "UPDATE episode_events SET superseded_by = %s WHERE id = %s", (events["z3decision"], events["z1decision"])
        )
    report = forget_episode(
        llm_db, "acme", ids["z3"], compressor=compress.OfflineCompressor(embedder), embedder=embedder
    )
    assert (report.counts["reopened_items"], report.counts["restored_decisions"]) == (1, 1)
    with llm_db.admin() as conn:
        rows = {
            r["id"]: r
            for r in conn.execute(
                "SELECT id, status, resolved_by, resolved_at, superseded_by FROM episode_events WHERE id = ANY(%s)",
                ([events["z1commitment"], events["z1decision"]],),
            )
        }
    assert (rows[events["z1commitment"]]["status"], rows[events["z1commitment"]]["resolved_by"]) == ("open", None)
    assert rows[events["z1decision"]]["superseded_by"] is None


def test_not_found_super_and_dry_run_change_nothing(llm_db: Database, tmp_path: Path, embedder: Embedder) -> None:
    ids = populate(llm_db, tmp_path, embedder)

    def everything() -> dict[str, Any]:
        return {"rows": snapshot(llm_db, "true", ()), "erasures": _count(llm_db, "erasures")}

    before = everything()
    with pytest.raises(EpisodeNotFound, match=f"episode {ids['g1']} not found in tenant 'acme'"):
        forget_episode(llm_db, "acme", ids["g1"])
    with pytest.raises(EpisodeNotFound):
        forget_episode(llm_db, "acme", 999_999)
    with pytest.raises(SuperSummaryNotErasable, match=r"made from episodes .*; forget those"):
        forget_episode(llm_db, "acme", ids["super"])
    dry = forget_episode(llm_db, "acme", ids["z2"], dry_run=True)
    assert dry.counts["episodes"] == 2 and dry.erasure_ids == [] and dry.rebuilt == {}
    assert dry.line().startswith(f"would erase episode {ids['z2']}: ")
    assert everything() == before

    runner = CliRunner()
    out = runner.invoke(cli, ["forget", "--tenant", "acme", "--episode", str(ids["z2"]), "--dry-run"])
    assert out.exit_code == 0 and out.stdout.startswith(f"would erase episode {ids['z2']}")
    # What a user needs, not internals (issue 31: the dry run logged `erasures=[]` beside its line).
    assert out.stdout.rstrip().endswith("(dry run, nothing changed)") and out.stderr == ""
    user = runner.invoke(cli, ["forget", "--tenant", "acme", "--user", ZOE, "--dry-run", "--no-vacuum"])
    assert user.exit_code == 0 and user.stderr == "", user.stderr
    assert "erasure_id" not in user.output and user.stdout.rstrip().endswith("(dry run, nothing changed)")
    both = runner.invoke(cli, ["forget", "--tenant", "acme", "--episode", "1", "--user", ZOE])
    assert both.exit_code == 2 and "exactly one of --user and --episode" in both.output
    missing = runner.invoke(cli, ["forget", "--tenant", "globex", "--episode", str(ids["z2"])])
    assert missing.exit_code == 1 and f"episode {ids['z2']} not found in tenant 'globex'" in missing.stderr
    assert everything() == before


def _count(db: Database, table: str) -> int:
    with db.admin() as conn:
        return int(one(conn.execute(f"SELECT count(*) AS n FROM {table}"))["n"])
