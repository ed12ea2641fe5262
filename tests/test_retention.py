"""Transcript retention: message bodies of old summarised transcripts go; rows, hashes, counts and
every episode stay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.lifecycle_helpers import load, rows, session

from jobs import config
from jobs.cli import cli
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.errors import ConfigError
from jobs.ingest import ingest
from jobs.lifecycle import prune_transcripts

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

DAY = 86400.0


def _episodes(db: Database) -> list[dict[str, Any]]:
    return rows(
        db,
        "SELECT e.id, e.summary, e.changed_version::text, ev.evidence_quote FROM episodes e "
        "LEFT JOIN episode_events ev ON ev.tenant_id = e.tenant_id AND ev.episode_id = e.id "
        "ORDER BY e.id, ev.id",
    )


def test_prune_keeps_rows_hashes_counts_and_episodes(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    records = [session(i) for i in range(5)]
    load(db, tmp_path, records, embedder)
    with db.admin() as conn:  # an open session is never pruned (not summarised)
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, messages, content_hash) "
            "VALUES ('acme', 'u1', 'open', '[{\"role\": \"user\", \"content\": \"hi\"}]', 'h')"
        )
    before = rows(db, "SELECT session_id, content_hash, message_count FROM transcripts ORDER BY id")
    episodes = _episodes(db)
    dry = prune_transcripts(db, 30 * DAY, dry_run=True)
    assert dry.transcripts == 5 and dry.bytes_before > 0
    assert rows(db, "SELECT count(*) AS n FROM transcripts WHERE messages_pruned_at IS NOT NULL")[0]["n"] == 0
    report = prune_transcripts(db, 30 * DAY, batch_size=2)  # three batches
    assert (report.transcripts, report.bytes_before) == (5, dry.bytes_before) and report.reclaimed > 0
    assert rows(db, "SELECT session_id, content_hash, message_count FROM transcripts ORDER BY id") == before
    assert _episodes(db) == episodes  # not even touched (changed_version is unchanged)
    pruned = rows(db, "SELECT messages FROM transcripts WHERE session_id = 'acme-u1-0'")[0]["messages"]
    assert pruned == [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]
    assert prune_transcripts(db, 30 * DAY).transcripts == 0  # nothing left to do


def test_reingest_after_prune(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    records = [session(i) for i in range(2)]
    load(db, tmp_path, records, embedder)
    prune_transcripts(db, 30 * DAY)
    path = tmp_path / "again.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert ingest(db, [path]).unchanged == 2  # same content: still a no-op, nothing to summarise
    changed = dict(records[0], messages=records[0]["messages"] + [{"role": "user", "content": "One more thing."}])
    path.write_text(json.dumps(changed) + "\n")
    assert ingest(db, [path]).updated == 1
    row = rows(
        db,
        "SELECT status, messages_pruned_at, message_count FROM transcripts WHERE session_id = %s",
        changed["session_id"],
    )[0]
    assert (row["status"], row["messages_pruned_at"], row["message_count"]) == ("pending", None, 4)


def test_recent_transcripts_are_kept(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(0)], embedder)
    assert prune_transcripts(db, 20_000 * DAY).transcripts == 0  # ended in 2024: younger than 20,000 days


def test_store_redacted(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = session(0)
    record["messages"][0]["content"] = "Mail me at maria@example.com please."
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record) + "\n")
    monkeypatch.setenv("EPISODES_STORE_REDACTED", "true")
    redacting = Database(config.load(), url=db.url)
    try:
        assert ingest(redacting, [path]).inserted == 1
        assert ingest(redacting, [path]).unchanged == 1  # the hash is that of the record as sent
    finally:
        redacting.close()
    stored = rows(db, "SELECT messages FROM transcripts")[0]["messages"][0]["content"]
    assert stored == "Mail me at [EMAIL] please."


def test_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load().transcript_retention_seconds is None  # default: keep
    monkeypatch.setenv("EPISODES_TRANSCRIPT_RETENTION", "90d")
    assert config.load().transcript_retention_seconds == 90 * DAY
    monkeypatch.setenv("EPISODES_TRANSCRIPT_RETENTION", "soon")
    with pytest.raises(ConfigError, match="EPISODES_TRANSCRIPT_RETENTION"):
        config.load()
    monkeypatch.setenv("EPISODES_TRANSCRIPT_RETENTION", "1h")
    with pytest.raises(ConfigError, match="EPISODES_TRANSCRIPT_RETENTION"):
        config.load()


def test_cli(db: Database, tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    load(db, tmp_path, [session(i) for i in range(2)], embedder)
    runner = CliRunner()
    assert "--dry-run" in runner.invoke(cli, ["prune", "--help"]).output
    missing = runner.invoke(cli, ["prune", "--transcripts"])
    assert missing.exit_code == 1 and "EPISODES_TRANSCRIPT_RETENTION" in missing.output
    dry = runner.invoke(cli, ["prune", "--transcripts", "--older-than", "30d", "--dry-run"])
    assert dry.exit_code == 0 and "would prune the messages of 2 summarised transcripts" in dry.output
    monkeypatch.setenv("EPISODES_TRANSCRIPT_RETENTION", "30d")
    done = runner.invoke(cli, ["prune", "--transcripts"])
    assert done.exit_code == 0 and "pruned the messages of 2 summarised transcripts" in done.output


def test_serve_maintenance_prunes(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    from jobs.extract.offline import OfflineExtractor
    from jobs.serve import ServeOptions, Server

    load(db, tmp_path, [session(0)], embedder)
    keeping = Server(db, OfflineExtractor(embedder), ServeOptions.from_settings(db.settings))
    assert "pruned_transcripts" not in (keeping.maintenance() or {})
    pruning_db = Database(db.settings.with_(transcript_retention_seconds=30 * DAY), url=db.url)
    try:
        server = Server(pruning_db, OfflineExtractor(embedder), ServeOptions.from_settings(pruning_db.settings))
        assert (server.maintenance() or {})["pruned_transcripts"] == 1
    finally:
        pruning_db.close()
