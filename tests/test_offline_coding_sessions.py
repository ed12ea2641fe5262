"""The offline extractor on coding sessions (issue 36): decisions with their objects, facts the user states,
noun-phrase topics, no working narration as events, and nothing but the user's own words quoted as the user.

The cases were written here for these rules, except "I'll make a note to follow up on that.", quoted verbatim from
sde-bench's decoy_conversations.json (vectorize-io/sde-bench, MIT licence, copyright 2026 Vectorize, Inc.;
../shared/data/sde-bench/README.md), tuning data; the real sessions are measured by
``python bench/offline_extractor_quality.py --coding``.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.extract.rules.agent import clean_said, is_narration
from jobs.extract.rules.cues import cue
from jobs.extract.rules.salience import key_phrases
from jobs.extract.rules.topics import is_topic, verbs_in
from jobs.formats.claude_code import read_session_file
from jobs.formats.shapes import normalise_messages
from jobs.models import EpisodeExtraction, Message, Transcript

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
ENDED = dt.datetime(2026, 11, 24, 17, 0, tzinfo=dt.UTC)  # a Tuesday


def extract(embedder: Embedder, *said: tuple[str, str]) -> EpisodeExtraction:
    messages = [Message.model_validate({"role": role, "content": text}) for role, text in said]
    transcript = Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id="s",
        purpose="general",
        started_at=None,
        ended_at=ENDED,
        messages=messages,
    )
    return OfflineExtractor(embedder).extract(transcript).extraction


def whats(episode: EpisodeExtraction, kind: str) -> list[str]:
    return [e.what for e in episode.key_events if e.type == kind]


# -- 1. decisions with their objects --------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "what"),
    [
        (
            "Let's use PostgreSQL 17 for the billing service.",
            "The user decided to use PostgreSQL 17 for the billing service.",
        ),
        (
            "We'll go with Celery 5.3 for the import jobs.",
            "The user decided to go with Celery 5.3 for the import jobs.",
        ),
        ("OK, switch to uv for packaging.", "The user decided to switch to uv for packaging."),
        ("Use Redis 7 for the session cache.", "The user decided to use Redis 7 for the session cache."),
        (
            "We decided to pin numpy below 2.0 in the worker image.",
            "The user decided to pin numpy below 2.0 in the worker image.",
        ),
        ("Settled: the nightly export runs at 02:00 UTC.", 'The user decided: "the nightly export runs at 02:00 UTC."'),
    ],
)
def test_a_users_decision_keeps_its_object_verbatim(embedder: Embedder, said: str, what: str) -> None:
    episode = extract(embedder, ("user", said), ("assistant", "Understood."))
    assert whats(episode, "decision") == [what]


def test_the_issue_prompt_is_a_decision_not_a_list_of_words(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        ("user", "Let's use PostgreSQL 17 for the billing service. Write the migration plan by Friday."),
        ("assistant", "I'll do it in sections."),
    )
    assert whats(episode, "decision") == ["The user decided to use PostgreSQL 17 for the billing service."]
    assert episode.key_events[0].type == "decision" and episode.key_events[0].evidence == [0]
    assert "billing service" in episode.topic_tags and "write" not in episode.topic_tags


def test_what_is_said_before_the_cue_is_kept_by_quoting(embedder: Embedder) -> None:
    episode = extract(embedder, ("user", "For the billing service, let's use PostgreSQL 17."), ("assistant", "Ok."))
    assert whats(episode, "decision") == ['The user decided: "For the billing service, let\'s use PostgreSQL 17."']


def test_an_assistants_settled_rule_is_a_decision_only_when_the_user_agrees(embedder: Embedder) -> None:
    rule = "Settled: retries back off with full jitter, capped at 30 s, five attempts."
    agreed = extract(
        embedder, ("user", "How should the webhook retries back off?"), ("assistant", rule), ("user", "Yes, agreed.")
    )
    [decision] = [e for e in agreed.key_events if e.type == "decision"]
    assert decision.what == 'The user decided: "retries back off with full jitter, capped at 30 s, five attempts."'
    assert decision.who == "user" and decision.evidence == [1, 2]
    amended = extract(
        embedder,
        ("user", "Sounds good, write it down."),
        ("assistant", "Amended rule: the retry cap is 60 s from now on."),
    )
    assert whats(amended, "decision") == ['The user decided: "the retry cap is 60 s from now on."']
    unanswered = extract(embedder, ("user", "How should the webhook retries back off?"), ("assistant", rule))
    assert not whats(unanswered, "decision")
    refused = extract(
        embedder,
        ("user", "How should the webhook retries back off?"),
        ("assistant", rule),
        ("user", "No, not like that."),
    )
    assert not whats(refused, "decision")


@pytest.mark.parametrize(
    ("chat", "decision"),
    [
        (
            [
                ("user", "How many retries for the webhook sender?"),
                ("assistant", "I'd suggest 5 retries with exponential backoff capped at 30 seconds."),
                ("user", "Agreed, let's do that."),
            ],
            'The user decided: "5 retries with exponential backoff capped at 30 seconds."',
        ),
        (
            [
                ("user", "Finance says 0.125 must become 0.13."),
                ("assistant", "Got it: money rounds half up to two decimals, using Decimal with ROUND_HALF_UP."),
                ("user", "Exactly."),
            ],
            'The user decided: "Money rounds half up to two decimals, using Decimal with ROUND_HALF_UP."',
        ),
        (
            [("user", "The rule is: slugs are lowercase ASCII, words joined by single hyphens."), ("assistant", "Ok.")],
            'The user decided: "The rule is: slugs are lowercase ASCII, words joined by single hyphens."',
        ),
        (
            [("user", "Going forward, deploy waves are 10% of hosts."), ("assistant", "Ok.")],
            'The user decided: "Going forward, deploy waves are 10% of hosts."',
        ),
        (
            [("user", "Cache keys must always include the tenant id."), ("assistant", "Makes sense.")],
            'The user decided: "Cache keys must always include the tenant id."',
        ),
    ],
)
def test_a_rule_settled_in_a_dev_chat_is_the_users_decision(
    embedder: Embedder, chat: list[tuple[str, str]], decision: str
) -> None:
    assert whats(extract(embedder, *chat), "decision") == [decision]


def test_a_proposal_the_user_turns_down_is_no_decision(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        ("user", "How many retries for the webhook sender?"),
        ("assistant", "I'd suggest 5 retries with exponential backoff capped at 30 seconds."),
        ("user", "No, not that many."),
    )
    assert not whats(episode, "decision")


def test_an_assistants_own_choice_is_not_the_users_decision(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        ("user", "The import is slow."),
        ("assistant", "We'll use a COPY statement for the import instead of INSERTs."),
    )
    assert not whats(episode, "decision")


# -- 2. facts the user states ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "what"),
    [
        ("We're on Django 4.2.", 'The user said: "We\'re on Django 4.2."'),
        ("The API runs on port 8080.", 'The user said: "The API runs on port 8080."'),
        ("My daughter is 7.", "The user's daughter is 7."),
        ("We use Celery 5.3 with Redis as the broker.", 'The user said: "We use Celery 5.3 with Redis as the broker."'),
    ],
)
def test_a_fact_the_user_states_is_a_fact_event_verbatim(embedder: Embedder, said: str, what: str) -> None:
    episode = extract(embedder, ("user", said), ("assistant", "Thanks, good to know."))
    assert whats(episode, "fact") == [what]
    assert [e.evidence for e in episode.key_events if e.type == "fact"] == [[0]]


def test_every_fact_of_a_message_counts_and_the_assistants_statements_do_not(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        ("user", "We're on Django 4.2. The API runs on port 8080."),
        ("assistant", "The settings module is at config/settings.py and it runs on port 8000."),
    )
    assert sorted(whats(episode, "fact")) == [
        'The user said: "The API runs on port 8080."',
        'The user said: "We\'re on Django 4.2."',
    ]
    assert all(e.who == "user" for e in episode.key_events)


@pytest.mark.parametrize(
    "sentence",
    [
        "The weather is nice today.",  # no specific
        "The issue is that Django caches it.",  # a claim about the problem, not the setup
        "Maybe we're on Django 4.2, I'm not sure.",  # hedged
        "Are we on Django 4.2?",  # a question
    ],
)
def test_not_a_fact(sentence: str) -> None:
    found = cue(sentence)
    assert found is None or found[0] != "fact"


def test_a_preference_stays_a_preference(embedder: Embedder) -> None:
    episode = extract(embedder, ("user", "I prefer pytest over unittest for the new services."), ("assistant", "Ok."))
    assert [e.type for e in episode.key_events] == ["preference"]


# -- 3. topics are noun phrases -------------------------------------------------------------------


@pytest.mark.parametrize("word", ["add", "update", "read", "tests", "task", "write", "fix", "file", "three"])
def test_generic_words_are_never_topics(word: str) -> None:
    assert not is_topic(word)


@pytest.mark.parametrize(
    ("phrase", "topic"),
    [
        ("billing service", True),
        ("migration plan", True),
        ("config file", True),
        ("postgresql", True),
        ("update config", False),
        ("config update", False),
        ("fix tests", False),
        ("test file", False),
    ],
)
def test_work_verbs_never_start_or_end_a_topic(phrase: str, topic: bool) -> None:
    assert is_topic(phrase) is topic


def test_the_transcripts_own_verbs_are_not_topics() -> None:
    verbs = verbs_in(
        [
            "Write the migration plan by Friday.",
            "Let me deploy it.",
            "Maybe the outer web catches it.",
            "The deploy failed twice.",
        ]
    )
    assert {"write", "catches"} <= verbs and "deploy" not in verbs  # "the deploy" is a noun here
    assert not is_topic("catches", verbs) and is_topic("deploy", verbs)


def test_a_coding_sessions_topics_name_its_subject() -> None:
    said = [
        "Please update the tests and fix the task runner file.",
        "Let me read the file first.",
        "I'll update the tests now.",
        "Now I'll add the task.",
        "The task runner reads jobs from the Redis queue.",
        "Fixed the flaky test in the task runner.",
    ]
    tags = key_phrases([(s, 0.5) for s in said], [])
    assert tags and "task runner" in tags
    assert not {"add", "update", "read", "tests", "task", "write", "fix", "file"} & set(tags)


# -- 4. working narration is never an event, what was done survives ---------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "I'll make a note to follow up on that.",
        "The assistant will make a note to follow up on that.",
        "I'll keep that in mind for later.",
        "I'll do it in sections.",
        "I'll look into it later.",
    ],
)
def test_note_taking_and_vague_later_are_narration(sentence: str) -> None:
    assert is_narration(sentence, ENDED.date())


def test_narration_makes_no_event_and_no_open_item(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        ("user", "The login test fails on CI since the upgrade."),
        (
            "assistant",
            "Let me check the CI logs. I'll do it in sections. I'll make a note to follow up "
            "on that. Now I'll update the fixture.",
        ),
        ("assistant", "I've fixed the login test by freezing the clock in tests/conftest.py."),
        ("user", "Thanks."),
    )
    assert not [e for e in episode.key_events if e.who == "assistant" and e.type in ("commitment", "open_question")]
    assert "fixed the login test by freezing the clock" in episode.summary


def test_a_real_promise_with_a_time_stays_a_commitment(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        ("user", "Can you draft the rollout notes?"),
        ("assistant", "I'll send you the rollout notes by Friday."),
    )
    [commitment] = [e for e in episode.key_events if e.type == "commitment"]
    assert commitment.due == dt.date(2026, 11, 27)


# -- 5. compaction summaries, hook output and tool results are never the user's --------------------

COMPACTED = (
    "This session is being continued from a previous conversation that ran out of context. The "
    "conversation is summarized below: the user decided to rewrite the scheduler in Rust."
)


def _line(kind: str, content: object, ts: str, **extra: object) -> str:
    return json.dumps(
        {
            "type": kind,
            "sessionId": "s-1",
            "cwd": "/work/shop",
            "timestamp": ts,
            "message": {"role": kind, "content": content},
            **extra,
        }
    )


def test_the_claude_code_reader_drops_compaction_summaries_and_hook_feedback(tmp_path: Path) -> None:
    path = tmp_path / "s-1.jsonl"
    path.write_text(
        "\n".join(
            [
                _line("user", "Let's use PostgreSQL 17 for the billing service.", "2026-11-24T10:00:00Z"),
                _line("user", COMPACTED, "2026-11-24T10:05:00Z", isCompactSummary=True),
                _line("user", COMPACTED.replace("Rust", "Go"), "2026-11-24T10:06:00Z"),  # an older file: no flag
                _line("user", "Stop hook feedback:\nthe user wants every test to pass", "2026-11-24T10:07:00Z"),
                _line(
                    "user",
                    [{"type": "tool_result", "tool_use_id": "t1", "content": "we decided to drop the table"}],
                    "2026-11-24T10:08:00Z",
                ),
                _line("assistant", "Noted.", "2026-11-24T10:09:00Z"),
            ]
        )
        + "\n"
    )
    [(_, record)] = list(read_session_file(path, tenant_id="t", user_id="u", idle_close_seconds=None, closed=True))
    assert isinstance(record, dict)
    stored = json.dumps(record["messages"])
    assert "continued from a previous conversation" not in stored and "Stop hook feedback" not in stored
    messages = normalise_messages(record["messages"])
    users = [m for m in messages if m["role"] == "user"]
    assert [m["content"] for m in users] == ["Let's use PostgreSQL 17 for the billing service."]
    assert any(m["role"] == "tool" and "drop the table" in m["content"] for m in messages)


def test_host_text_in_a_plain_transcript_is_nobodys_words(embedder: Embedder) -> None:
    assert clean_said(COMPACTED) == ""
    assert clean_said("PreToolUse:Bash hook error: blocked rm -rf") == ""
    episode = extract(
        embedder,
        ("user", COMPACTED),
        ("user", "Stop hook feedback:\nwe decided to ship on Friday"),
        ("user", "We're on Django 4.2."),
        ("assistant", "Ok."),
    )
    text = episode.summary + " ".join(e.what for e in episode.key_events)
    assert "Rust" not in text and "ship on Friday" not in text
    assert [e.evidence for e in episode.key_events] == [[2]]


# -- 8. the bench runs ------------------------------------------------------------------------------


@pytest.mark.skipif(
    not (SHARED / "claude-code").is_dir() or not (SHARED / "sde-bench").is_dir(),
    reason="../shared/data/claude-code and sde-bench are not beside the repository",
)
def test_bench_coding_smoke() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "offline_extractor_quality.py"), "--coding", "--limit", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "narration" in done.stdout and "sde-bench single-chat tasks" in done.stdout
