"""Forget and export, against a real PostgreSQL, with data made by the real pipeline.

Transcripts are loaded by ``jobs.ingest.ingest`` and summarised by ``jobs.summarize.run_summarize``
with the Claude extractor talking to the local fake server (so model-call rows exist). After an
erasure a scan over every column of every table in the catalog must find neither the user id nor
any distinctive word of the user's sessions, while other users and tenants are untouched.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import stat
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql
from psycopg.types.json import Jsonb
from support.erasure_scan import scan, snapshot

from jobs.cli import Context
from jobs.cli.privacy import export_command, forget_command
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest
from jobs.models import Entity, EpisodeExtraction, KeyEvent, ModelCall, search_text
from jobs.rights.export import export_user
from jobs.rights.forget import erasures_of, forget_user
from jobs.store import EpisodeRow, insert_episode, record_calls
from jobs.summarize import run_summarize

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

ZOE, BOB = "u-zoe-7731", "u-bob-1204"
ZOE_WORDS = ["Zanzibar", "quokka", "Thelonious", "marzipan"]  # only in Zoe's acme sessions
BOB_WORDS = ["Reykjavik", "kohlrabi"]
GLOBEX_WORDS = ["Patagonia", "axolotl"]  # Zoe's sessions in the other tenant


def record(tenant: str, user: str, session: str, day: str, lines: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": user,
        "session_id": session,
        "purpose": "support",
        "started_at": f"{day}T09:00:00Z",
        "ended_at": f"{day}T09:30:00Z",
        "messages": [
            {
                "role": "user" if who != "assistant" else "assistant",
                "content": text,
                **({"name": who} if who != "assistant" else {}),
            }
            for who, text in lines
        ],
    }


RECORDS = [
    record(
        "acme",
        ZOE,
        "zoe-1",
        "2023-03-04",
        [
            ("Zoe", "We'll go with the Zanzibar quokka tour in May."),
            ("assistant", "Booked. I'll send the Thelonious lodge voucher by Friday."),
        ],
    ),
    record(
        "acme",
        ZOE,
        "zoe-2",
        "2023-06-10",
        [
            ("Zoe", "Can you add marzipan to the Zanzibar welcome basket?"),
            ("assistant", "I'll ask the lodge today."),
        ],
    ),
    record(
        "acme",
        ZOE,
        "zoe-3",
        "2025-02-01",
        [
            ("Zoe", "Remind me what we decided about the quokka tour."),
            ("assistant", "You decided on the May tour."),
        ],
    ),
    record(
        "acme",
        BOB,
        "bob-1",
        "2023-04-01",
        [
            ("Bob", "We'll go with the Reykjavik kohlrabi festival."),
            ("assistant", "Great choice."),
        ],
    ),
    record(
        "acme",
        BOB,
        "bob-2",
        "2023-08-01",
        [
            ("Bob", "I'll bring kohlrabi soup to Reykjavik."),
            ("assistant", "Noted."),
        ],
    ),
    record(
        "globex",
        ZOE,
        "gz-1",
        "2024-05-05",
        [
            ("Zoe", "We'll go with the Patagonia axolotl exhibit."),
            ("assistant", "I'll reserve two seats."),
        ],
    ),
]


def populate(db: Database, tmp_path: Path, embedder: Embedder) -> dict[str, int]:
    """Ingest, summarise through the fake server, add super-summaries, model calls and job runs."""
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert ingest(db, [path]).inserted == len(RECORDS)
    with AnthropicExtractor(db.settings) as extractor:
        assert run_summarize(db, extractor=extractor, embedder=embedder).counts == {"done": len(RECORDS)}
    with db.admin() as conn:
        ids = {r["session_id"]: r["id"] for r in conn.execute("SELECT id, session_id FROM episodes")}
    zoe_super = _super(
        db, embedder, ZOE, "Over 2023 Zoe planned the Zanzibar quokka tour with marzipan.", [ids["zoe-1"], ids["zoe-2"]]
    )
    # A super of another user that (against the rules of compress) mixed in one of Zoe's episodes.
    bob_super = _super(
        db,
        embedder,
        BOB,
        "In 2023 Bob went to Reykjavik; a Zanzibar quokka tour came up too.",
        [ids["bob-1"], ids["zoe-1"]],
    )
    with db.tenant("acme") as conn:
        record_calls(
            conn,
            [
                ModelCall(
                    template="compress_sessions_user.j2", prompt_hash="abc123", model="m", input_tokens=10, error=None
                )
            ],
            tenant_id="acme",
            user_id=ZOE,
            transcript_id=None,
            job_run_id=None,
        )
    with db.admin() as conn:
        conn.execute(
            "INSERT INTO job_runs (job, worker, status, error, counts) VALUES "
            "('compress', 'w1', 'failed', %s, '{}'), ('compress', 'w1', 'failed', %s, %s)",
            (f"acme/{ZOE} 2023: the model refused", "acme/u-zoe-77310 2023: the model refused", Jsonb({"failed": 1})),
        )
    return {"zoe_super": zoe_super, "bob_super": bob_super, **ids}


def _super(db: Database, embedder: Embedder, user: str, summary: str, sources: list[int]) -> int:
    episode = EpisodeExtraction(
        summary=summary,
        topic_tags=["travel"],
        importance=0.7,
        key_events=[KeyEvent(type="decision", what=summary, evidence=[0], who="user")],
        entities=[Entity(name="Zanzibar" if "Zanzibar" in summary else "Reykjavik", kind="place")],
    )
    row = EpisodeRow(
        tenant_id="acme",
        user_id=user,
        kind="super",
        episode=episode,
        started_at=dt.datetime(2023, 1, 1, tzinfo=dt.UTC),
        ended_at=dt.datetime(2023, 12, 31, tzinfo=dt.UTC),
        model="offline",
        prompt_version="compress-test",
        embedding=embedder.embed([search_text(episode)])[0],
        period_start=dt.date(2023, 1, 1),
        period_end=dt.date(2023, 12, 31),
    )
    with db.tenant("acme") as conn:
        super_id = insert_episode(conn, row)
        for source in sources:
            conn.execute(
                "INSERT INTO episode_lineage (tenant_id, user_id, super_episode_id, source_episode_id) "
                "VALUES ('acme', %s, %s, %s)",
                (user, super_id, source),
            )
            conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (super_id, source))
    return super_id


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


def test_export_holds_everything_about_the_user_and_nothing_else(
    llm_db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    ids = populate(llm_db, tmp_path, embedder)
    doc = export_user(llm_db, "acme", ZOE)
    assert doc["counts"] == {"transcripts": 3, "episodes": 3, "super_summaries": 1, "model_calls": 4}
    assert [t["session_id"] for t in doc["transcripts"]] == ["zoe-1", "zoe-2", "zoe-3"]
    assert doc["transcripts"][0]["messages"][0]["content"] == "We'll go with the Zanzibar quokka tour in May."
    first = doc["episodes"][0]
    assert first["session_id"] == "zoe-1" and first["summary"].startswith("Zoe opened the session")
    assert [(e["type"], e["evidence"]) for e in first["events"]] == [("decision", [0]), ("commitment", [1])]
    assert first["events"][0]["evidence_quote"].startswith("We'll go with the Zanzibar")
    assert {"name": "Zoe", "kind": "person"} in first["entities"]
    assert doc["episodes"][1]["compressed_into"] == ids["zoe_super"] and "embedding" not in first
    assert doc["super_summaries"][0]["replaces"] == sorted([ids["zoe-1"], ids["zoe-2"]])
    assert {c["template"] for c in doc["model_calls"]} == {"extract_episode_user.j2", "compress_sessions_user.j2"}
    assert {c.get("session_id") for c in doc["model_calls"]} == {"zoe-1", "zoe-2", "zoe-3", None}
    text = json.dumps(doc)
    for absent in [*BOB_WORDS, *GLOBEX_WORDS, BOB]:
        assert absent not in text
    with_vectors = export_user(llm_db, "acme", ZOE, with_embeddings=True)
    assert len(with_vectors["episodes"][0]["embedding"]) == 384
    assert export_user(llm_db, "acme", "nobody")["counts"] == {
        "transcripts": 0,
        "episodes": 0,
        "super_summaries": 0,
        "model_calls": 0,
    }


def cli(command: click.Command, *args: str) -> Result:
    """Invoke one of our commands as the main group would (a Context as obj), closing it after."""
    obj = Context(False)
    try:
        return CliRunner().invoke(command, list(args), obj=obj)
    finally:
        obj.close()


def test_cli_export_and_forget(llm_db: Database, tmp_path: Path, embedder: Embedder) -> None:
    populate(llm_db, tmp_path, embedder)
    out = tmp_path / "export" / "zoe.json"
    result = cli(export_command, "--tenant", "acme", "--user", ZOE, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "wrote 3 transcripts, 3 episodes, 1 super-summary, 4 model calls" in result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_text())["user_id"] == ZOE
    printed = cli(export_command, "--tenant", "acme", "--user", ZOE)
    assert json.loads(printed.stdout)["counts"]["episodes"] == 3

    dry = cli(forget_command, "--tenant", "acme", "--user", ZOE, "--dry-run")
    assert dry.exit_code == 0 and dry.stdout.splitlines()[-1].startswith("would erase 3 transcripts, 5 episodes")
    # This machine's Claude Code records of the erased sessions are part of what forget says it does.
    assert dry.stdout.startswith("this machine's Claude Code records of these sessions: would remove 0 sync-ledger")
    done = cli(forget_command, "--tenant", "acme", "--user", ZOE)
    assert done.exit_code == 0, done.output
    assert any(
        line.startswith("erased 3 transcripts, 5 episodes (2 super-summaries)") for line in done.stdout.splitlines()
    ), done.stdout
    assert "its 3 sessions are refused from then on" in done.stdout
    assert "recorded as erasure #" in done.stdout
    empty = cli(forget_command, "--tenant", "acme", "--user", ZOE)
    assert empty.exit_code == 0 and "nothing held about user" in empty.stderr
    # Exporting a user nothing is held about fails, as GET /v1/users/{user}/export answers 404 (issue 31:
    # the CLI printed an empty document and exited 0); nothing is written.
    gone = cli(export_command, "--tenant", "acme", "--user", ZOE, "--out", str(tmp_path / "gone.json"))
    assert gone.exit_code == 1 and not (tmp_path / "gone.json").exists()
    assert "Nothing is held about user" in str(gone.exception) and gone.stdout == ""
