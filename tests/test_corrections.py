"""Correcting one episode, against a real PostgreSQL, with episodes made by the real pipeline.

Sessions are summarised by ``run_summarize`` with the Claude extractor talking to the local fake
server. A correction must be re-embedded and re-indexed (a warm recall copy finds the new words and
not the removed ones), audited, all or nothing, confined to its tenant, and must survive the
session's re-summarisation.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner, Result
from psycopg.types.json import Jsonb

from jobs.cli import cli
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.errors import CorrectionInvalid, EpisodeNotFound
from jobs.extract.claude import AnthropicExtractor
from jobs.recall import Recaller
from jobs.rights.correct import EpisodeCorrection, EventChange, correct_episode, correction_from, corrections_of
from jobs.rights.standing import same_text
from jobs.summarize import run_summarize

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

MESSAGES = [
    {"role": "user", "name": "Maria", "content": "We'll go with the quokka plan at $49 per seat."},
    {"role": "assistant", "content": "Done. I'll send the marzipan invoice by Friday."},
    {"role": "user", "name": "Maria", "content": "Thanks!"},
]
SUMMARY = "Maria chose the kilimanjaro plan at $49 per seat and thanked the agent."
DECISION = "Maria decided on the kilimanjaro plan at $49 per seat."


def add(db: Database, session: str, tenant: str = "acme", user: str = "u1") -> None:
    with db.tenant(tenant) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, "
            "content_hash) VALUES (%s, %s, %s, 'support', '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s, %s)",
            (tenant, user, session, Jsonb(MESSAGES), f"hash-{session}"),
        )


def summarise(db: Database, embedder: Embedder) -> dict[str, Any]:
    with AnthropicExtractor(db.settings) as extractor:
        return run_summarize(db, extractor=extractor, embedder=embedder).counts


def current(db: Database, session: str = "s1") -> dict[str, Any]:
    """The session's current episode with its events (by ordinal) and its text-search lexemes."""
    with db.admin() as conn:
        episode = one(
            conn.execute(
                "SELECT id, tenant_id, summary, tsvector_to_array(search_tsv) AS lexemes FROM episodes "
                "WHERE session_id = %s AND status = 'current'",
                (session,),
            )
        )
        events = conn.execute(
            "SELECT id, type, what, status FROM episode_events WHERE episode_id = %s ORDER BY ordinal", (episode["id"],)
        ).fetchall()
    return {**episode, "events": events}


def by_type(episode: dict[str, Any], kind: str) -> dict[str, Any]:
    (event,) = [e for e in episode["events"] if e["type"] == kind]
    found: dict[str, Any] = event
    return found


def text_score(recaller: Recaller, words: str, episode_id: int) -> float | None:
    result = recaller.recall("acme", "u1", words, budget_tokens=100_000)
    (found,) = [e for e in result.episodes if e.id == episode_id]
    return found.text_score


def test_a_correction_is_reindexed_audited_and_seen_by_a_warm_recall(llm_db: Database, embedder: Embedder) -> None:
    add(llm_db, "s1")
    assert summarise(llm_db, embedder) == {"done": 1}
    before = current(llm_db)
    decision, commitment = by_type(before, "decision"), by_type(before, "commitment")
    assert "quokka" in before["lexemes"] and "marzipan" in before["lexemes"]
    warm = Recaller(llm_db, embedder)
    assert text_score(warm, "quokka", before["id"]) is not None
    assert text_score(warm, "kilimanjaro", before["id"]) is None

    change = EpisodeCorrection(
        summary=SUMMARY, drop_events=[commitment["id"]], events={decision["id"]: EventChange(text=DECISION)}
    )
    report = correct_episode(llm_db, "acme", before["id"], change, actor="user:u1", embedder=embedder)

    assert report.changes == ["summary", f"event {decision['id']} text", f"event {commitment['id']} dropped"]
    after = current(llm_db)
    assert after["id"] == before["id"] and after["summary"] == SUMMARY
    assert [(e["type"], e["what"]) for e in after["events"]] == [("decision", DECISION)]
    assert "kilimanjaro" in after["lexemes"] and "quokka" not in after["lexemes"]
    assert "marzipan" not in after["lexemes"]
    # The same warm copy: the corrected words are found, the removed ones are not.
    assert text_score(warm, "kilimanjaro", before["id"]) is not None
    assert text_score(warm, "quokka", before["id"]) is None
    with llm_db.admin() as conn:
        vector = one(conn.execute("SELECT embedding FROM episodes WHERE id = %s", (before["id"],)))["embedding"]
    assert float(vector.to_numpy() @ embedder.embed([SUMMARY])[0]) > 0.7
    audit = corrections_of(llm_db, "acme", before["id"])
    assert [(a["field"], a["old_value"], a["new_value"], a["actor"]) for a in audit] == [
        ("summary", before["summary"], SUMMARY, "user:u1"),
        ("event.text", decision["what"], DECISION, "user:u1"),
        ("event.drop", commitment["what"], None, "user:u1"),
    ]
    assert [a["id"] for a in audit] == report.correction_ids
    # The same correction again changes nothing and records nothing.
    again = correct_episode(
        llm_db, "acme", before["id"], EpisodeCorrection(summary=SUMMARY), actor="user:u1", embedder=embedder
    )
    assert again.changes == [] and "nothing changed" in again.line()
    assert len(corrections_of(llm_db, "acme", before["id"])) == 3


def test_a_correction_survives_re_summarisation(llm_db: Database, embedder: Embedder) -> None:
    add(llm_db, "s1")
    summarise(llm_db, embedder)
    first = current(llm_db)
    decision, commitment = by_type(first, "decision"), by_type(first, "commitment")
    correct_episode(
        llm_db,
        "acme",
        first["id"],
        EpisodeCorrection(summary=SUMMARY, events={decision["id"]: EventChange(text=DECISION)}),
        actor="user:u1",
        embedder=embedder,
    )
    correct_episode(
        llm_db,
        "acme",
        first["id"],
        EpisodeCorrection(events={commitment["id"]: EventChange(status="done")}),
        actor="user:u1",
        embedder=embedder,
    )
    # A later correction of the corrected event still finds it after the re-run (corrections chain).
    correct_episode(
        llm_db,
        "acme",
        first["id"],
        EpisodeCorrection(events={decision["id"]: EventChange(text=DECISION + " Final.")}),
        actor="user:u1",
        embedder=embedder,
    )
    with llm_db.admin() as conn:  # the transcript changes: the session is summarised again
        conn.execute(
            "UPDATE transcripts SET status = 'pending', content_hash = 'changed', "
            'messages = messages || \'[{"role": "user", "content": "One more thing."}]\'::jsonb'
        )
    assert summarise(llm_db, embedder) == {"done": 1}

    second = current(llm_db)
    assert second["id"] != first["id"] and second["summary"] == SUMMARY
    assert [(e["type"], e["what"], e["status"]) for e in second["events"]] == [
        ("decision", DECISION + " Final.", "n/a"),
        ("commitment", commitment["what"], "done"),
    ]
    assert "kilimanjaro" in second["lexemes"] and "quokka" not in second["lexemes"]
    with llm_db.admin() as conn:  # so is a new prompt version's episode: dropping an event stands too
        conn.execute("UPDATE transcripts SET status = 'pending', content_hash = 'changed-again'")
    correct_episode(
        llm_db,
        "acme",
        second["id"],
        EpisodeCorrection(drop_events=[by_type(second, "commitment")["id"]]),
        actor="user:u1",
        embedder=embedder,
    )
    assert summarise(llm_db, embedder) == {"done": 1}
    third = current(llm_db)
    assert [e["type"] for e in third["events"]] == ["decision"] and third["summary"] == SUMMARY


def test_not_found_and_invalid_corrections_change_nothing(llm_db: Database, embedder: Embedder) -> None:
    add(llm_db, "s1")
    add(llm_db, "s2")
    add(llm_db, "g1", tenant="globex")
    summarise(llm_db, embedder)
    s1, s2, g1 = current(llm_db, "s1"), current(llm_db, "s2"), current(llm_db, "g1")

    def state() -> list[object]:
        with llm_db.admin() as conn:
            return [
                conn.execute("SELECT id, summary, search_tsv::text FROM episodes ORDER BY id").fetchall(),
                conn.execute("SELECT id, what, status FROM episode_events ORDER BY id").fetchall(),
                one(conn.execute("SELECT count(*) AS n FROM episode_corrections"))["n"],
            ]

    before = state()
    with pytest.raises(EpisodeNotFound, match=f"episode {g1['id']} not found in tenant 'acme'"):
        correct_episode(llm_db, "acme", g1["id"], EpisodeCorrection(summary=SUMMARY), actor="u", embedder=embedder)
    with pytest.raises(EpisodeNotFound):
        correct_episode(llm_db, "acme", 999_999, EpisodeCorrection(summary=SUMMARY), actor="u", embedder=embedder)
    other = by_type(s2, "decision")["id"]
    with pytest.raises(CorrectionInvalid, match=rf"^drop_events\[0\]: event {other} is not an event of episode"):
        correct_episode(
            llm_db,
            "acme",
            s1["id"],
            EpisodeCorrection(summary=SUMMARY, drop_events=[other]),
            actor="u",
            embedder=embedder,
        )
    with pytest.raises(CorrectionInvalid, match=rf"^events\.{other}: event {other} is not an event"):
        correct_episode(
            llm_db,
            "acme",
            s1["id"],
            EpisodeCorrection(events={other: EventChange(text="Something else.")}),
            actor="u",
            embedder=embedder,
        )
    decision = by_type(s1, "decision")["id"]
    with pytest.raises(CorrectionInvalid, match=rf"^events\.{decision}\.status: .* is a decision"):
        correct_episode(
            llm_db,
            "acme",
            s1["id"],
            EpisodeCorrection(events={decision: EventChange(status="done")}),
            actor="u",
            embedder=embedder,
        )
    dry = correct_episode(
        llm_db, "acme", s1["id"], EpisodeCorrection(summary=SUMMARY), actor="u", embedder=embedder, dry_run=True
    )
    assert dry.changes == ["summary"] and dry.line().startswith(f"would correct episode {s1['id']}: summary")
    assert state() == before
    invalid: list[tuple[dict[str, Any], str]] = [
        ({"summary": "   "}, "summary"),
        ({"summary": "x" * 1201}, "summary"),
        ({}, "correction"),
        ({"drop_events": [1, 1]}, "correction"),
        ({"events": {"7": {}}}, "events.7"),
        ({"events": {"7": {"status": "closed"}}}, "events.7.status"),
        ({"summary": SUMMARY, "colour": "red"}, "colour"),
    ]
    for data, field in invalid:
        with pytest.raises(CorrectionInvalid) as caught:
            correction_from(data)
        assert caught.value.field == field, data
    # A superseded episode points at its replacement.
    with llm_db.admin() as conn:
        conn.execute("UPDATE transcripts SET status = 'pending', content_hash = 'changed' WHERE session_id = 's1'")
    summarise(llm_db, embedder)
    with pytest.raises(CorrectionInvalid, match=f"replaced by episode {current(llm_db)['id']}"):
        correct_episode(llm_db, "acme", s1["id"], EpisodeCorrection(summary=SUMMARY), actor="u", embedder=embedder)


def test_cli_correct(llm_db: Database, embedder: Embedder) -> None:
    add(llm_db, "s1")
    summarise(llm_db, embedder)
    episode = current(llm_db)
    commitment = by_type(episode, "commitment")["id"]

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, ["correct", *args])

    dry = run(
        "--tenant",
        "acme",
        "--episode",
        str(episode["id"]),
        "--summary",
        SUMMARY,
        "--drop-event",
        str(commitment),
        "--dry-run",
    )
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith(f"would correct episode {episode['id']}: summary, event {commitment} dropped")
    assert dry.stdout.rstrip().endswith("(dry run, nothing changed)") and "correct_dry_run" not in dry.stderr
    # Errors name the command's options, not the HTTP API's fields (issue 31: drop_events, events.68.text).
    short = run("--tenant", "acme", "--episode", str(episode["id"]), "--event-text", str(commitment), "x")
    assert short.exit_code == 1
    assert short.stderr.strip() == f"episodes: --event-text {commitment}: String should have at least 3 characters"
    foreign = run("--tenant", "acme", "--episode", str(episode["id"]), "--drop-event", "999999")
    assert foreign.stderr.strip() == f"episodes: --drop-event: event 999999 is not an event of episode {episode['id']}"
    status = run("--tenant", "acme", "--episode", str(episode["id"]), "--event-status", "999999", "done")
    assert status.stderr.strip().startswith("episodes: --event-status 999999: event 999999 is not an event")
    nothing = run("--tenant", "acme", "--episode", str(episode["id"]))
    assert nothing.exit_code == 2 and "give --summary, --drop-event, --event-text or --event-status" in nothing.stderr
    twice = run("--tenant", "acme", "--episode", str(episode["id"]), "--drop-event", "7", "--drop-event", "7")
    assert twice.exit_code == 2 and "--drop-event" in twice.stderr and "given twice" in twice.stderr
    for outcome in (short, foreign, status, nothing, twice):
        assert "drop_events" not in outcome.stderr and "events." not in outcome.stderr, outcome.stderr
    done = run("--tenant", "acme", "--episode", str(episode["id"]), "--summary", SUMMARY)
    assert done.exit_code == 0 and "recorded as correction #" in done.stdout
    bad = run("--tenant", "acme", "--episode", str(episode["id"]), "--summary", "short")
    assert bad.exit_code == 1 and "episodes: --summary: String should have at least 10 characters" in bad.stderr
    missing = run("--tenant", "globex", "--episode", str(episode["id"]), "--summary", SUMMARY)
    assert missing.exit_code == 1 and f"episode {episode['id']} not found in tenant 'globex'" in missing.stderr
    assert current(llm_db)["summary"] == SUMMARY


def test_near_identical_texts() -> None:
    assert same_text("Maria decided: go with the Team plan.", "maria decided:  go with the team plan")
    assert not same_text("Maria decided: go with the Team plan.", "Maria decided: go with the Basic plan instead.")
