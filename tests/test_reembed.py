"""`episodes reembed`: new vectors beside the old, resumable after kill -9, recall answering
throughout, a row corrected between its read and its write left for the switch, one switch that
catches up and stops stale writers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from support.lifecycle_helpers import load, rows, session

from jobs import migrate
from jobs.cli import cli
from jobs.config import Settings
from jobs.db import Database
from jobs.embeddings import Embedder, HashingEmbedder, Vectors, get_embedder
from jobs.errors import EmbedderChanged, EmbeddingDimensionMismatch, ReembedInProgress
from jobs.extract.offline import OfflineExtractor
from jobs.lifecycle.reembed import reembed, reembed_progress
from jobs.models import episode_text
from jobs.recall import Recaller
from jobs.rights.correct import EpisodeCorrection, correct_episode
from jobs.serve import ServeOptions, Server

# One PostgreSQL only: on a Citus cluster `episodes reembed` refuses (tests/test_cluster.py), as Citus
# does not propagate the RENAME COLUMN of its switch.

QUESTION = "Does the Snowflake renewal include SSO?"


def _dims(db: Database) -> set[int]:
    return {r["d"] for r in rows(db, "SELECT vector_dims(embedding) AS d FROM episodes WHERE embedding IS NOT NULL")}


def _recorded(db: Database) -> dict[str, str]:
    return {r["key"]: r["value"] for r in rows(db, "SELECT key, value FROM episodes_settings")}


def test_reembed_switches_with_recall_answering_before_during_and_after(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    load(db, tmp_path, [session(i) for i in range(10)], embedder)
    recaller = Recaller(db, embedder)  # a warm in-process copy from before the re-embed
    before = recaller.recall("acme", "u1", QUESTION)
    assert before.episodes and not before.nothing_relevant
    during: list[list[int]] = []
    status: list[str] = []
    corrected = rows(db, "SELECT id FROM episodes ORDER BY id LIMIT 1")[0]["id"]

    def progress(n: int) -> None:
        answer = recaller.recall("acme", "u1", QUESTION)  # from the old vectors, 384-d
        assert answer.episodes and not answer.nothing_relevant
        during.append([e.id for e in answer.episodes])
        status.append(CliRunner().invoke(cli, ["status"]).output)
        if len(during) == 1:  # a correction re-embeds an already re-embedded episode with the old embedder
            correct_episode(
                db,
                "acme",
                corrected,
                EpisodeCorrection(summary="Maria asked about SSO for Snowflake."),
                actor="operator:test",
                embedder=embedder,
            )

    report = reembed(db, HashingEmbedder(64), "hashing:64", batch_size=3, progress=progress)
    assert len(during) == 4 and during[0] == [e.id for e in before.episodes]  # then the correction changes it
    assert any("reembed      re-embedding to hashing:64 (64-d): 3 / 10 episodes" in s for s in status), status[0]
    assert report.written == 10 and report.caught_up == 1 and report.total == 10
    assert _dims(db) == {64} and _recorded(db) == {**_recorded(db), "embedder": "hashing:64", "embedding_dim": "64"}
    assert rows(db, "SELECT count(*) AS n FROM episodes WHERE embedding IS NULL")[0]["n"] == 0
    # The episodes' lines (migration 0032) are embedded again too, after the switch.
    lines = rows(db, "SELECT text, embedding FROM episode_lines ORDER BY tenant_id, episode_id, ordinal")
    assert lines and report.lines == len(lines) and {len(r["embedding"].to_numpy()) for r in lines} == {64}
    np.testing.assert_allclose(
        lines[0]["embedding"].to_numpy(), HashingEmbedder(64).embed([lines[0]["text"]])[0], atol=1e-6
    )
    with db.admin() as conn:
        assert reembed_progress(conn) is None
    # The same Recaller notices the switch: the new embedder, the same answer.
    after = recaller.recall("acme", "u1", QUESTION)
    assert recaller.embedder.name == "hashing:64" and recaller.embedder.dim == 64
    # (Whether anything is labelled relevant depends on the floors, chosen for all-MiniLM-L6-v2, not for a
    # 64-d hashing embedder; what must hold is that the switched recaller answers from the new vectors.)
    assert {e.id for e in after.episodes} and all(e.distance is not None for e in after.episodes)
    # The corrected episode's vector is of its corrected text, not of the text it had at the fill.
    assert _summary_embedded_as_its_text(db, corrected) == "Maria asked about SSO for Snowflake."


def _summary_embedded_as_its_text(db: Database, episode_id: int) -> str:
    """The episode's summary, after checking that its vector is hashing:64's of its text as it is now
    (summary, topics, events, entities: :func:`episode_text`)."""
    row = rows(
        db,
        """SELECT summary, topic_tags, embedding,
                  ARRAY(SELECT what FROM episode_events WHERE episode_id = e.id ORDER BY ordinal) AS events,
                  ARRAY(SELECT name FROM episode_entities WHERE episode_id = e.id ORDER BY id) AS entities
           FROM episodes e WHERE id = %s""",
        episode_id,
    )[0]
    text = episode_text(row["summary"], row["topic_tags"], row["events"], row["entities"])
    np.testing.assert_allclose(row["embedding"].to_numpy(), HashingEmbedder(64).embed([text])[0], atol=1e-6)
    return str(row["summary"])


class _CorrectedWhileEmbedding:
    """hashing:64, under whose first batch the user corrects an episode of that batch (as the memory page
    does: the summary, and the vector with the embedder in use): after `episodes reembed` read the batch and
    before it writes the new vectors."""

    def __init__(self, db: Database, episode_id: int, in_use: Embedder) -> None:
        self.inner = HashingEmbedder(64)
        self.name, self.dim = self.inner.name, self.inner.dim
        self.db, self.episode_id, self.in_use = db, episode_id, in_use
        self.batches = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches += 1
        if self.batches == 1:
            correct_episode(
                self.db,
                "acme",
                self.episode_id,
                EpisodeCorrection(summary="Maria asked whether SSO comes with the Enterprise plan."),
                actor="user:u1",
                embedder=self.in_use,
            )
        return self.inner.embed(texts)


def test_a_row_corrected_between_the_read_and_the_write_is_left_for_the_switch(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    """The write goes only to rows whose changed_version is still the one read (migration 0035: every update of
    the row moves it). The corrected row keeps no vector of its old text: the switch embeds its new one."""
    load(db, tmp_path, [session(i) for i in range(6)], embedder)
    corrected = rows(db, "SELECT id FROM episodes ORDER BY id LIMIT 1")[0]["id"]
    after_first_batch: list[dict[str, object]] = []

    def progress(n: int) -> None:
        if not after_first_batch:
            after_first_batch.append(
                {
                    "written": n,
                    **rows(db, "SELECT embedding_next IS NULL AS left FROM episodes WHERE id = %s", corrected)[0],
                }
            )

    report = reembed(
        db, _CorrectedWhileEmbedding(db, corrected, embedder), "hashing:64", batch_size=3, progress=progress
    )
    assert after_first_batch == [{"written": 2, "left": True}]  # the other two of the batch were written
    assert (report.written, report.caught_up, report.total) == (5, 1, 6)
    assert _summary_embedded_as_its_text(db, corrected) == "Maria asked whether SSO comes with the Enterprise plan."


def test_a_recaller_made_after_a_switch_to_an_embedder_of_the_same_dimension_follows_it(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    """The recaller checks its embedder against the one the database records, not against the first it
    saw: one made after the switch (as recall(db=...) makes one per call) embeds with the new embedder,
    although MiniLM and hashing:384 both make 384-dimension vectors."""
    load(db, tmp_path, [session(i) for i in range(6)], embedder)
    reembed(db, HashingEmbedder(384), "hashing:384", batch_size=4)
    assert _dims(db) == {384} and _recorded(db)["embedder"] == "hashing:384"
    late = Recaller(db, embedder)
    answer = late.recall("acme", "u1", QUESTION)
    assert late.embedder.name == "hashing:384"
    expected = Recaller(db, HashingEmbedder(384)).recall("acme", "u1", QUESTION)
    assert [(e.id, e.relevance_rank) for e in answer.episodes] == [(e.id, e.relevance_rank) for e in expected.episodes]
    assert any(e.relevance_rank for e in answer.episodes)


def test_a_kill_9_mid_run_resumes_without_redoing_finished_batches(
    db: Database, settings: Settings, tmp_path: Path, embedder: Embedder
) -> None:
    load(db, tmp_path, [session(i) for i in range(12)], embedder)
    script = textwrap.dedent("""
        import os, signal
        from jobs.config import load
        from jobs.db import Database
        from jobs.embeddings import get_embedder
        from jobs.lifecycle.reembed import reembed
        batches = []
        def progress(n):
            batches.append(n)
            if len(batches) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        reembed(Database(load()), get_embedder("hashing:32"), "hashing:32", batch_size=4, progress=progress)
    """)
    env = {**os.environ, "DATABASE_URL": settings.database_url or ""}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=120)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    with db.admin() as conn:
        progress = reembed_progress(conn)
    assert progress is not None and (progress.embedder, progress.done, progress.total) == ("hashing:32", 8, 12)
    assert _dims(db) == {384}  # nothing switched: recall still on the old vectors
    assert Recaller(db, embedder).recall("acme", "u1", QUESTION).episodes
    with pytest.raises(ReembedInProgress, match="re-embed to hashing:32 is in progress"):
        reembed(db, HashingEmbedder(64), "hashing:64")
    resumed = reembed(db, get_embedder("hashing:32"), "hashing:32", batch_size=4)
    assert resumed.written == 4 and resumed.caught_up == 0 and resumed.total == 12
    assert _dims(db) == {32}


def test_serve_with_the_old_embedder_stops_clearly_after_the_switch(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    load(db, tmp_path, [session(i) for i in range(2)], embedder)
    server = Server(db, OfflineExtractor(embedder), ServeOptions())
    server.check_embedder()
    assert server.fatal is None
    reembed(db, HashingEmbedder(48), "hashing:48")
    server.check_embedder()
    assert isinstance(server.fatal, EmbedderChanged) and server.stopping.is_set()
    assert "Restart it with EPISODES_EMBEDDER=hashing:48" in str(server.fatal)
    # A write of the old dimension cannot slip through anyway: the column is vector(48) now.
    with pytest.raises(psycopg.errors.DataException), db.admin() as conn:
        conn.execute("UPDATE episodes SET embedding = %s", (embedder.embed(["x"])[0],))


def test_init_refuses_another_dimension_and_names_reembed(db: Database) -> None:
    with (
        db.connect() as conn,
        pytest.raises(EmbeddingDimensionMismatch, match=r"Run `episodes reembed --embedder hashing:64`"),
    ):
        migrate.migrate(conn, embedding_dim=64, embedder="hashing:64")


def test_reembed_cli_help_dry_run_abort_and_errors(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(3)], embedder)
    runner = CliRunner()
    assert "--batch-size" in runner.invoke(cli, ["reembed", "--help"]).output
    dry = runner.invoke(cli, ["reembed", "--embedder", "hashing:16", "--dry-run"])
    assert dry.exit_code == 0 and dry.output.strip() == (
        "would re-embed 3 episodes from all-MiniLM-L6-v2 (384-d) to hashing:16 (16-d) (dry run, nothing changed)"
    )
    assert _dims(db) == {384}
    bad = runner.invoke(cli, ["reembed", "--embedder", "hashing:3"])
    assert bad.exit_code == 1 and "hashing takes a dimension between 8 and 4096" in bad.output
    assert (
        runner.invoke(cli, ["reembed"]).output.strip()
        == "episodes: Pass --embedder NAME (e.g. --embedder minilm), or --abort."
    )
    assert runner.invoke(cli, ["reembed", "--abort"]).output.strip() == "no re-embed in progress; nothing changed"
    done = runner.invoke(cli, ["reembed", "--embedder", "hashing:16", "--batch-size", "2"])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1].startswith("re-embedded with hashing:16 (16-d): 3 vectors written in this run")
    assert _dims(db) == {16}
