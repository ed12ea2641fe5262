"""`episodes init` and `episodes status` on the Citus cluster (tests/support/citus_cluster.py): init distributes a
blank database by tenant, status shows the nodes and the shards of every table. Cluster only."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from jobs.citus import cluster
from jobs.cli import cli
from jobs.db import one

pytestmark = pytest.mark.slow  # needs the Citus cluster (skips without it)


@pytest.fixture
def blank_cluster_url() -> Iterator[str]:
    """A database on every node of the cluster with citus and vector but no schema (skips without a cluster)."""
    from support import citus_cluster

    if (reason := citus_cluster.unreachable()) is not None:
        pytest.skip(reason)
    with citus_cluster.blank_database(f"episodes_citus_{os.getpid()}_init") as url:
        yield url


def test_init_distributes_and_status_shows_the_shards(
    blank_cluster_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", blank_cluster_url)
    runner = CliRunner()
    first = runner.invoke(cli, ["init", "--shard-count", "4"])
    assert first.exit_code == 0, first.output
    assert (
        "Distributed on the Citus cluster: " + ", ".join((*cluster.REFERENCE_TABLES, *cluster.TENANT_TABLES)) + "."
        in first.stdout
    )
    again = runner.invoke(cli, ["init"])
    assert again.exit_code == 0 and "no migration to apply" in again.stdout and "Distributed" not in again.stdout

    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps(
            {
                "tenant_id": "t",
                "user_id": "u",
                "session_id": "s",
                "ended_at": "2025-01-01T00:00:00Z",
                "messages": [{"role": "user", "content": "hi"}],
            }
        )
        + "\n"
    )
    assert runner.invoke(cli, ["ingest", str(path)]).exit_code == 0

    status = runner.invoke(cli, ["status"])
    assert status.exit_code == 0, status.output
    out = status.stdout
    assert re.search(
        r"^cluster      Citus: 2 workers · \S+ coordinator · \S+ worker · \S+ worker$", out, re.MULTILINE
    ), out
    shards = dict(re.findall(r"^  (\w+) +(\d+) shards, ", out, re.MULTILINE))
    assert shards == {**dict.fromkeys(cluster.REFERENCE_TABLES, "1"), **dict.fromkeys(cluster.TENANT_TABLES, "4")}
    assert "transcripts  open 0 · pending 1 · running 0 · done 0 · dead 0" in out
    assert "queue        1 due · 0 backing off after failures" in out
    assert "last hour    0 episodes · 0 model calls (0 failed)" in out
    assert "episodes     none yet" in out


def test_reembed_refuses_on_a_cluster_and_says_what_to_do(citus_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from support import citus_cluster

    citus_cluster.empty(citus_url)
    monkeypatch.setenv("DATABASE_URL", citus_url)
    result = CliRunner().invoke(cli, ["reembed", "--embedder", "hashing:64"])
    assert result.exit_code != 0
    assert "does not run on a Citus cluster yet" in result.output and "Re-embed before distributing" in result.output
    with psycopg.connect(citus_url) as conn:  # nothing was started
        assert one(conn.execute("SELECT count(*) FROM reembed_state"))[0] == 0
