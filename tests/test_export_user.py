"""Exporting a user holds everything about the user and nothing else; the export and forget commands, against a
real PostgreSQL with data made by the real pipeline (tests/support/forget_data.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from support.forget_data import BOB, BOB_WORDS, GLOBEX_WORDS, ZOE, populate

from jobs.cli import Context
from jobs.cli.privacy import export_command, forget_command
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.rights.export import export_user

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


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
