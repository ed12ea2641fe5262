"""`episodes resummarize`: requeue chosen sessions for a new episode under the current prompt."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.lifecycle_helpers import RenamedExtractor, load, rows, session

from jobs.cli import cli
from jobs.compress import OfflineCompressor, run_compress
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor, prompt_version
from jobs.extract.offline import OfflineExtractor
from jobs.lifecycle import Selection, plan_resummarize, prune_transcripts
from jobs.lifecycle.resummarize import fixed_prompt_tokens, resummarize
from jobs.summarize import run_summarize

# Python logic through the database: runs on one PostgreSQL only; the tests marked citus below are SQL shape.

CLAUDE = prompt_version()


def test_dry_run_counts_and_prices_without_changing_anything(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(3)] + [session(9, user="u2")], embedder)
    plan = plan_resummarize(db, Selection(tenant="acme", user="u1"), CLAUDE)
    assert (plan.requeue, plan.already_current, plan.already_queued, plan.messages_gone) == (3, 0, 0, 0)
    chars = sum(len(m["content"]) for i in range(3) for m in session(i)["messages"])
    assert plan.input_tokens == 3 * fixed_prompt_tokens() + (chars + 3) // 4 + 8 * 9
    assert plan.output_tokens == 3 * 700  # offline episodes record no output tokens: the default applies
    assert plan.cost_live_usd > 0 and abs(plan.cost_batch_usd - plan.cost_live_usd / 2) < 1e-6
    assert {r["status"] for r in rows(db, "SELECT status FROM transcripts")} == {"done"}
    # Under the offline prompt every episode is current already: nothing to do.
    assert plan_resummarize(db, Selection(), OfflineExtractor.prompt_version).already_current == 4


@pytest.mark.citus  # the requeue UPDATE and supersession
def test_requeue_is_idempotent_and_new_episodes_supersede(llm_db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(llm_db, tmp_path, [session(i) for i in range(3)], embedder)
    first = resummarize(llm_db, Selection(tenant="acme"), CLAUDE)
    second = resummarize(llm_db, Selection(tenant="acme"), CLAUDE)
    assert (first.requeued, second.requeued, second.already_queued) == (3, 0, 3)
    assert {r["status"] for r in rows(llm_db, "SELECT status FROM transcripts")} == {"pending"}
    with AnthropicExtractor(llm_db.settings) as claude:
        assert run_summarize(llm_db, extractor=claude, embedder=embedder).counts["done"] == 3
    current = rows(llm_db, "SELECT prompt_version FROM episodes WHERE status = 'current'")
    assert [r["prompt_version"] for r in current] == [CLAUDE] * 3
    old = rows(llm_db, "SELECT superseded_by FROM episodes WHERE status = 'superseded'")
    assert len(old) == 3 and all(r["superseded_by"] is not None for r in old)
    again = plan_resummarize(llm_db, Selection(tenant="acme"), CLAUDE)
    assert (again.requeue, again.already_current) == (0, 3)


@pytest.mark.citus  # the selection query's filters
def test_filters_by_user_time_and_prompt_version(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(4)] + [session(0, user="u2")], embedder)
    cut = dt.datetime(2024, 3, 3, tzinfo=dt.UTC)  # sessions 0 and 1 of u1 ended before it
    assert plan_resummarize(db, Selection(user="u1", until=cut), CLAUDE).requeue == 2
    assert plan_resummarize(db, Selection(user="u1", since=cut), CLAUDE).requeue == 2
    # Every version is below one not used yet; none is below itself.
    assert plan_resummarize(db, Selection(prompt_version_below="extract-next"), CLAUDE).requeue == 5
    assert plan_resummarize(db, Selection(prompt_version_below=OfflineExtractor.prompt_version), CLAUDE).requeue == 0


def test_sessions_whose_messages_are_gone_are_skipped_and_counted(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    load(db, tmp_path, [session(i) for i in range(3)], embedder)
    with db.admin() as conn:  # one session ended long ago; the others are recent
        conn.execute(
            "UPDATE transcripts SET ended_at = now() - interval '2 days', started_at = NULL "
            "WHERE session_id <> 'acme-u1-0'"
        )
    prune_transcripts(db, 86400 * 30)
    done = resummarize(db, Selection(), CLAUDE)
    assert (done.requeued, done.messages_gone) == (2, 1)
    assert rows(db, "SELECT status FROM transcripts WHERE session_id = 'acme-u1-0'")[0]["status"] == "done"


@pytest.mark.citus  # lineage and rebuild
def test_a_compressed_period_is_rebuilt_from_the_new_episodes(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(3)], embedder)
    now = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    compressor = OfflineCompressor(embedder)
    assert run_compress(db, now=now, compressor=compressor, embedder=embedder).counts["created"] == 1
    assert resummarize(db, Selection(), "offline-next").requeued == 3
    run_summarize(db, extractor=RenamedExtractor(embedder), embedder=embedder)
    assert run_compress(db, now=now, compressor=compressor, embedder=embedder).counts["rebuilt"] == 1
    sources = rows(
        db,
        "SELECT e.prompt_version, s.status FROM episodes e JOIN episodes s "
        "ON s.tenant_id = e.tenant_id AND s.id = e.compressed_into "
        "WHERE e.status = 'current'",
    )
    assert [(r["prompt_version"], r["status"]) for r in sources] == [("offline-next", "current")] * 3


def test_cli_dry_run_and_help(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(2)], embedder)
    runner = CliRunner()
    assert "--prompt-version-below" in runner.invoke(cli, ["resummarize", "--help"]).output
    out = runner.invoke(cli, ["resummarize", "--extractor", "anthropic", "--dry-run"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("would requeue 2 sessions for prompt " + CLAUDE)
    assert "(dry run, nothing changed)" in out.output


def test_the_offline_extractor_is_not_priced(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    """Requeueing for the offline extractor costs nothing: no token or cost estimate (issue 46, finding 22)."""
    load(db, tmp_path, [session(i) for i in range(2)], embedder)
    with db.admin() as conn:  # made by an older offline prompt: under the current one they are due again
        conn.execute("UPDATE episodes SET prompt_version = 'offline-0'")
    plan = plan_resummarize(db, Selection(), OfflineExtractor.prompt_version)
    assert plan.requeue == 2 and not plan.priced
    assert (plan.input_tokens, plan.output_tokens, plan.cost_live_usd, plan.cost_batch_usd) == (0, 0, 0.0, 0.0)
    out = CliRunner().invoke(cli, ["resummarize", "--extractor", "offline", "--dry-run"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith(f"would requeue 2 sessions for prompt {OfflineExtractor.prompt_version}")
    assert "no tokens, no cost" in out.output and "$" not in out.output, out.output
