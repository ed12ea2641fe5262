"""Every script in bench/ runs with tiny arguments, exits 0 and prints its figures (it asserts nothing
about time: the figures themselves are read by people, docs/benchmarks.md).

A bench nothing runs rots; this runs each one as a user would (a new process, its own scratch
database), small enough that the whole lot takes a few minutes. They share the suite's embedded server (one
server per test session, not one per bench): each makes and drops its own database on it. Benches that need the
Citus cluster or the LoCoMo / Claude Code data beside the repository skip when those are missing, saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from support.citus_cluster import unreachable

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SHARED = ROOT.parent / "shared" / "data"
TINY_DATA = ["--episodes", "2000", "--users", "40", "--heavy-users", "2", "--heavy-size", "300"]
# The benches of bench/_data.py's data take the shared server as DATABASE_URL (they make and drop episodes_bench on
# it); the others make theirs through bench/_common.py's bench_database (EPISODES_BENCH_SERVER). api_load and
# hook_latency measure an embedded server of their own and ingest_rate its start, so they still start one.
BY_DATABASE_URL = {"recall latency", "recall cpu"}
SMALLEST_LOCOMO = "{a folder holding only LoCoMo's 30.json}"  # made per run: the bench reads every file of a folder
OUT_FILE = "{a file in the run's own folder}"

# script, tiny arguments, a line its output must hold, what it needs beyond the embedded server
CASES: dict[str, tuple[str, list[str], str, str | None]] = {
    "agent_session_quality": ("agent_session_quality.py", ["--limit", "1"], "narration", "claude-code"),
    "answer_coverage": (
        "answer_coverage.py",
        # LoCoMo's smallest conversation alone (30: 81 questions; the first, 26, has 150), in a folder of its own
        ["--locomo", SMALLEST_LOCOMO, "--conversations", "1", "--sde-tasks", "2", "--sde-decoys", "5"],
        "LoCoMo (1 conversations)",
        "locomo",
    ),
    "api_load": (
        "api_load.py",
        [
            *TINY_DATA,
            "--lines",
            "3",
            "--clients",
            "2",
            "--warmup",
            "0.5",
            "--seconds",
            "1",
            "--sample",
            "5",
            "--write-rate",
            "5",
            "--background",
            "1",
        ],
        "without the background",
        None,
    ),
    "cli_start": ("cli_start.py", ["--runs", "1"], "episodes --help", None),
    "cluster_scaleout": (
        "cluster_scaleout.py",
        [
            *TINY_DATA,
            "--queries",
            "5",
            "--transcripts",
            "6",
            "--overhead-transcripts",
            "3",
            "--latency",
            "0.1",
            "--concurrency",
            "2",
            "--shards",
            "4",
        ],
        "recall p95 ms",
        "citus",
    ),
    "compressed_recall": (
        "compressed_recall.py",
        [*TINY_DATA, "--lines", "3", "--queries", "2", "--periods", "year"],
        "the largest holds",
        None,
    ),
    "compress_scale": (
        "compress_scale.py",
        ["--episodes", "100", "--users", "5", "--heavy", "20", "--budget", "6000", "--concurrency", "2"],
        "model calls",
        None,
    ),
    "fake_anthropic": (
        "fake_anthropic.py",
        ["--runs", "1", "--concurrent", "4", "--latency", "0.1"],
        "in flight at once",
        None,
    ),
    "hook_latency": (
        "hook_latency.py",
        ["--runs", "1", "--sessions", "1"],
        "SessionStart hook, local, embedded server",
        None,
    ),
    "ingest_rate": ("ingest_rate.py", ["--transcripts", "50", "--messages", "4"], "transcripts/s", None),
    "offline_long_session": ("offline_long_session.py", ["--sizes", "50,100"], "ms / 1k msgs", None),
    "redact_worst_cases": ("redact_worst_cases.py", ["--sizes", "200,400", "--repeat", "1"], "ms / 100k chars", None),
    "offline_extractor_quality": ("offline_extractor_quality.py", ["--limit", "2"], "ROUGE", "locomo"),
    "rule_ledger": ("rule_ledger.py", [], "voice.decision_subject", "locomo"),
    # writes two episodes of each source and diffs the file with itself
    "offline_snapshot": (
        "offline_snapshot.py",
        [OUT_FILE, "--per-source", "2", "--diff", OUT_FILE],
        "0 of 6 episodes differ",
        "locomo",
    ),
    "recall latency": (
        "recall.py",
        [*TINY_DATA, "--queries", "5", "--lines", "3", "--cluster"],  # the rewrite in user order keeps the lines
        "clustered episodes by user",
        None,
    ),
    "recall cpu": (
        "recall_cpu.py",
        # 50 episodes a user as before (a typical user's ~60), over 10 users instead of 40: a quarter of the data to load
        ["--episodes", "500", "--users", "10", "--requests", "16", "--rounds", "2"],
        "the web layer alone",
        None,
    ),
    "repository_ancestry": (
        "repository_ancestry.py",
        ["--commits", "50", "--branches", "4", "--candidates", "20", "--runs", "2"],
        "classify 20 candidates",
        None,
    ),
    "reembed": ("reembed.py", ["--episodes", "400", "--users", "4", "--batch", "50"], "vectors written in total", None),
    "retention": ("retention.py", ["--transcripts", "200", "--messages", "4", "--batch", "50"], "touched: 0", None),
    "serve_latency": (
        "serve_latency.py",
        ["--latency", "0", "--sessions", "2", "--drain", "20", "--workers", "1"],
        "exactly once",
        None,
    ),
    "spend_cap": ("spend_cap.py", ["--sessions", "200", "--checks", "3", "--claims", "100"], "far from the cap", None),
    "summarize_statements": (
        "summarize_statements.py",
        ["--transcripts", "2", "--backend", "single"],
        "client round trips",
        None,
    ),
    "summarize_throughput": (
        "summarize_throughput.py",
        ["--transcripts", "6", "--latency", "0.1", "--concurrency", "2", "--overhead-transcripts", "3"],
        "of the limit C/L",
        None,
    ),
}


def test_every_bench_script_has_a_smoke_case() -> None:
    scripts = {path.name for path in BENCH.glob("*.py") if not path.name.startswith("_")}
    assert scripts == {script for script, *_ in CASES.values()}


def _skip_reason(needs: str | None) -> str | None:
    if needs == "citus":
        return unreachable()
    if needs in ("locomo", "claude-code") and not (SHARED / needs).is_dir():
        return f"{SHARED / needs} is not beside the repository (it is not shipped with it)"
    return None


def _bench_databases(admin_url: str) -> list[str]:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'bench\\_%' OR datname = 'episodes_bench' ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_bench_runs_with_tiny_arguments(case: str, admin_url: str, tmp_path: Path) -> None:
    script, args, expected, needs = CASES[case]
    if (reason := _skip_reason(needs)) is not None:
        pytest.skip(reason)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["EPISODES_BENCH_SERVER"] = admin_url  # the session's server: the bench makes its database there
    if case in BY_DATABASE_URL:
        env["DATABASE_URL"] = admin_url
    if SMALLEST_LOCOMO in args:
        (tmp_path / "locomo").mkdir()
        (tmp_path / "locomo" / "30.json").symlink_to(SHARED / "locomo" / "30.json")
        args = [str(tmp_path / "locomo") if arg == SMALLEST_LOCOMO else arg for arg in args]
    args = [str(tmp_path / "out.jsonl") if arg == OUT_FILE else arg for arg in args]
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert expected in done.stdout, done.stdout[-3000:]
    assert _bench_databases(admin_url) == [], "the bench left its database on the shared server"
