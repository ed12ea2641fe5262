"""The optional pruning policy: the grammar, the dry run, the run (pins survive, supers rebuilt,
nothing dangles), `serve` applying EPISODES_PRUNE_POLICY, and the CLI. Real PostgreSQL, episodes
written by the offline pipeline; importance is set per episode to make the policy's choices visible."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.lifecycle_helpers import load, rows, session

from jobs import config
from jobs.cli import cli
from jobs.compress import OfflineCompressor, run_compress
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.errors import ConfigError, PolicyInvalid
from jobs.lifecycle import apply_policy, pin, plan_policy
from jobs.prune_policy import parse_policy

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

DAY = 86400
POLICY = "keep 30d; keep importance>=0.7; delete importance<0.5 after 90d"
NOW = dt.datetime(2024, 9, 1, tzinfo=dt.UTC)


# --- the grammar ----------------------------------------------------------------------------


def test_every_clause_form_parses() -> None:
    policy = parse_policy(
        " KEEP 30d ;keep importance >= 0.7;; delete importance<0.5 after 90d; delete after 2y;"
        "keep 12h; keep 1w; keep importance<=0.1; delete importance>0.95 after 1d"
    )
    assert [c.as_json() for c in policy.clauses] == [
        {"n": 1, "action": "keep", "newer_than": 30 * DAY},
        {"n": 2, "action": "keep", "op": ">=", "importance": 0.7},
        {"n": 4, "action": "delete", "older_than": 90 * DAY, "op": "<", "importance": 0.5},
        {"n": 5, "action": "delete", "older_than": 730 * DAY},
        {"n": 6, "action": "keep", "newer_than": 12 * 3600},
        {"n": 7, "action": "keep", "newer_than": 7 * DAY},
        {"n": 8, "action": "keep", "op": "<=", "importance": 0.1},
        {"n": 9, "action": "delete", "older_than": DAY, "op": ">", "importance": 0.95},
    ]
    assert policy.clauses[0].text == "KEEP 30d"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "keep 30d; keep importance>=0.7; delete importance<0.5 afer 90d",
            'policy clause 3 "delete importance<0.5 afer 90d": expected "after <duration>"',
        ),
        ("remove after 90d", 'policy clause 1 "remove after 90d": expected "keep" or "delete"'),
        (
            "keep; delete after 1d",
            'policy clause 1 "keep": expected "keep <duration>" or "keep importance<op><number>"',
        ),
        (
            "keep 30 days; delete after 1d",
            'policy clause 1 "keep 30 days": expected a duration: a whole number with h, d, w or y (e.g. 90d)',
        ),
        ("keep 3m; delete after 1d", "expected a duration: a whole number with h, d, w or y"),
        ("keep 0d; delete after 1d", 'policy clause 1 "keep 0d": expected a duration longer than zero'),
        (
            "keep importance=0.7; delete after 1d",
            'policy clause 1 "keep importance=0.7": expected importance followed by <, <=, > or >= and a number',
        ),
        ("keep importance>=high; delete after 1d", "expected a number from 0 to 1 after the operator"),
        ("keep importance>=1.5; delete after 1d", "expected a number from 0 to 1 after the operator"),
        (
            "delete topic=billing after 1d",
            'policy clause 1 "delete topic=billing after 1d": expected "importance<op><number>" or "after <duration>"',
        ),
        ("delete importance<0.5 after", 'policy clause 1 "delete importance<0.5 after": expected a duration'),
        ("keep 30d; keep importance>=0.7", 'the pruning policy "keep 30d; keep importance>=0.7" has no delete clause'),
        (" ; ", "the pruning policy is empty"),
    ],
)
def test_every_error_is_one_line_naming_the_clause(text: str, error: str) -> None:
    with pytest.raises(PolicyInvalid) as caught:
        parse_policy(text)
    assert error in str(caught.value) and "\n" not in str(caught.value)


def test_settings_parse_the_policy_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load().prune_policy is None  # off by default
    monkeypatch.setenv("EPISODES_PRUNE_POLICY", POLICY)
    monkeypatch.setenv("EPISODES_PRUNE_CRON", "0 4 * * 0")
    settings = config.load()
    assert settings.prune_policy == parse_policy(POLICY) and settings.prune_cron == "0 4 * * 0"
    monkeypatch.setenv("EPISODES_PRUNE_POLICY", "delete importance<0.5 afer 90d")
    with pytest.raises(ConfigError, match=r'^EPISODES_PRUNE_POLICY: policy clause 1 .* expected "after <duration>"'):
        config.load()


# --- the database ---------------------------------------------------------------------------

# Sessions end 2024-03-01 + n days; NOW is 2024-09-01. Importance by session number:
# 0: 0.2 (old, low: deleted)   1: 0.2, pinned (saved by the pin)   2: 0.9 (old, high: kept by clause 2)
# 3: 0.6 (old, middling: no delete clause selects it)   4: 0.3 (ended 10 days before NOW: kept by clause 1)
# 5: 0.1 (old, low: deleted)   6: 0.1 of another tenant (deleted only without --tenant)
IMPORTANCE = {0: 0.2, 1: 0.2, 2: 0.9, 3: 0.6, 4: 0.3, 5: 0.1}


def populate(db: Database, tmp_path: Path, embedder: Embedder, compress: bool = False) -> dict[str, int]:
    records = [session(n, ended=NOW - dt.timedelta(days=10) if n == 4 else None) for n in IMPORTANCE]
    load(db, tmp_path, [*records, session(6, tenant="globex")], embedder)
    with db.admin() as conn:
        for n, value in IMPORTANCE.items():
            conn.execute("UPDATE episodes SET importance = %s WHERE session_id = %s", (value, f"acme-u1-{n}"))
        conn.execute("UPDATE episodes SET importance = 0.1 WHERE tenant_id = 'globex'")
    if compress:  # as of 2026 every 2024 session is old: super-summaries over them
        report = run_compress(
            db,
            now=dt.datetime(2026, 1, 15, tzinfo=dt.UTC),
            tenant="acme",
            compressor=OfflineCompressor(embedder),
            embedder=embedder,
        )
        assert report.counts["created"] == 1
    ids = {r["session_id"]: r["id"] for r in rows(db, "SELECT session_id, id FROM episodes WHERE kind = 'session'")}
    pin(db, "acme", ids["acme-u1-1"])
    return ids


def current_sessions(db: Database) -> list[str]:
    return [
        r["session_id"]
        for r in rows(
            db, "SELECT session_id FROM episodes WHERE kind = 'session' AND status = 'current' ORDER BY session_id"
        )
    ]


def test_dry_run_counts_per_clause_and_deletes_nothing(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    populate(db, tmp_path, embedder)
    before = current_sessions(db)
    plan = plan_policy(db, parse_policy(POLICY), tenant="acme", now=NOW)
    # clause 3 selects 0, 1, 4 (importance < 0.5 and older than 90d? 4 is not: 10 days) and 5
    assert plan.hits == {1: 0, 2: 0, 3: 3} and (plan.deleted, plan.kept, plan.pinned) == (2, 0, 1)
    assert plan.candidates == 6
    wider = plan_policy(db, parse_policy("keep 30d; keep importance>=0.7; delete after 1d"), now=NOW)
    # all 7 selected; 4 kept by "30d", 2 by importance; 1 pinned
    assert wider.hits == {1: 1, 2: 1, 3: 7} and (wider.deleted, wider.kept, wider.pinned) == (4, 2, 1)
    assert wider.per_tenant == {"acme": 3, "globex": 1}
    assert wider.lines()[1:] == [
        '  clause 1 "keep 30d": saves 1',
        '  clause 2 "keep importance>=0.7": saves 1',
        '  clause 3 "delete after 1d": selects 7',
        "would delete 4 episodes; 2 saved by keep clauses, 1 saved by pins (dry run, nothing changed)",
    ]
    assert current_sessions(db) == before


def test_the_run_erases_what_the_policy_selects_and_rebuilds_supers(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    ids = populate(db, tmp_path, embedder, compress=True)
    supers_before = rows(db, "SELECT id FROM episodes WHERE kind = 'super' AND status = 'current'")
    assert len(supers_before) == 1  # the one super-summary populate() made over acme's 2024 sessions
    report = apply_policy(
        db,
        parse_policy("keep importance>=0.7; delete importance<0.5 after 90d"),
        now=NOW,
        batch_size=1,
        compressor=OfflineCompressor(embedder),
        embedder=embedder,
    )
    assert report.deleted == 3 and report.batches == 3  # acme 0 and 5, globex 6; one per batch
    assert current_sessions(db) == ["acme-u1-1", "acme-u1-2", "acme-u1-3", "acme-u1-4"]
    assert report.plan.pinned == 1 and report.erasures == 3
    # The old super went in the erasures' transaction; its period was rebuilt once from what is left.
    assert not rows(db, "SELECT id FROM episodes WHERE id = ANY(%s)", [r["id"] for r in supers_before])
    assert sum(report.rebuilt.values()) == len(supers_before) and "failed" not in report.rebuilt
    lineage = rows(
        db,
        "SELECT l.source_episode_id AS id FROM episode_lineage l "
        "JOIN episodes s ON s.tenant_id = l.tenant_id AND s.id = l.super_episode_id "
        "WHERE s.status = 'current'",
    )
    assert {r["id"] for r in lineage} == {ids["acme-u1-2"], ids["acme-u1-3"], ids["acme-u1-4"]}
    # Nothing dangles: no row refers to an erased episode, no resolution lost its resolver.
    gone = [ids["acme-u1-0"], ids["acme-u1-5"], ids["globex-u1-6"]]
    assert not rows(db, "SELECT id FROM episode_events WHERE episode_id = ANY(%s) OR resolved_by = ANY(%s)", gone, gone)
    assert not rows(db, "SELECT id FROM episode_events WHERE resolved_at IS NOT NULL AND resolved_by IS NULL")
    assert not rows(
        db,
        "SELECT e.id FROM episode_events e LEFT JOIN episode_events s "
        "ON s.tenant_id = e.tenant_id AND s.id = e.superseded_by "
        "WHERE e.superseded_by IS NOT NULL AND s.id IS NULL",
    )
    assert not rows(
        db,
        "SELECT id FROM episodes WHERE compressed_into IS NOT NULL AND compressed_into NOT IN "
        "(SELECT id FROM episodes WHERE kind = 'super')",
    )
    audit = rows(db, "SELECT tenant_id, scope, counts FROM erasures ORDER BY id")
    assert [(r["tenant_id"], r["scope"]) for r in audit] == [("acme", "policy")] * 2 + [("globex", "policy")]
    forgotten = rows(db, "SELECT session_id FROM transcripts WHERE forgotten_at IS NOT NULL ORDER BY session_id")
    assert [r["session_id"] for r in forgotten] == ["acme-u1-0", "acme-u1-5", "globex-u1-6"]
    # Running it again changes nothing.
    again = apply_policy(db, parse_policy("keep importance>=0.7; delete importance<0.5 after 90d"), now=NOW)
    assert again.deleted == 0 and current_sessions(db) == ["acme-u1-1", "acme-u1-2", "acme-u1-3", "acme-u1-4"]


def test_serve_prunes_only_when_configured(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    from jobs.extract.offline import OfflineExtractor
    from jobs.serve import ServeOptions, Server

    populate(db, tmp_path, embedder)
    idle = Server(db, OfflineExtractor(embedder), ServeOptions.from_settings(db.settings))
    assert idle.prune() is None and len(current_sessions(db)) == 7
    pruning_db = Database(db.settings.with_(prune_policy=parse_policy("delete importance<0.5 after 90d")), url=db.url)
    try:
        server = Server(pruning_db, OfflineExtractor(embedder), ServeOptions.from_settings(pruning_db.settings))
        # serve judges at the current time: session 4 (ended 2024-08-22) is old too
        assert server.prune() == {"pruned_episodes": 4, "kept": 0, "pinned": 1}
        runs = rows(db, "SELECT job, counts, error FROM job_runs WHERE job = 'prune'")
        assert [(r["counts"]["pruned_episodes"], r["error"]) for r in runs] == [(4, None)]
    finally:
        pruning_db.close()
    assert current_sessions(db) == ["acme-u1-1", "acme-u1-2", "acme-u1-3"]


def test_cli(db: Database, tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    populate(db, tmp_path, embedder)
    runner = CliRunner()
    help_text = runner.invoke(cli, ["prune", "--help"]).output
    assert "--policy" in help_text and "--dry-run" in help_text
    neither = runner.invoke(cli, ["prune"])
    assert neither.exit_code == 1 and "Choose what to prune: --transcripts or --policy" in neither.output
    bad = runner.invoke(cli, ["prune", "--policy", "keep 30d; delete importance<0.5 afer 90d"])
    assert bad.exit_code == 1 and bad.output == (
        'episodes: policy clause 2 "delete importance<0.5 afer 90d": expected "after <duration>"\n'
    )
    unset = runner.invoke(cli, ["prune", "--policy", "env"])
    assert unset.exit_code == 1 and "EPISODES_PRUNE_POLICY is not set" in unset.output
    dry = runner.invoke(cli, ["prune", "--policy", "delete after 1d", "--tenant", "acme", "--dry-run"])
    assert dry.exit_code == 0 and dry.output.endswith(
        "would delete 5 episodes; 0 saved by keep clauses, 1 saved by pins (dry run, nothing changed)\n"
    )
    monkeypatch.setenv("EPISODES_PRUNE_POLICY", "keep importance>=0.7; delete after 1d")
    done = runner.invoke(cli, ["prune", "--policy", "env", "--tenant", "acme"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(
        'policy "keep importance>=0.7; delete after 1d": deleted 4 episodes in 1 batch (12 events'
    )
    assert done.output.endswith("1 saved by keep clauses, 1 saved by pins; recorded as 1 erasure\n")
    assert current_sessions(db) == ["acme-u1-1", "acme-u1-2", "globex-u1-6"]
