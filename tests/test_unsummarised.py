"""Sessions not yet summarised (issue 16 B): a session that is still open, or closed and waiting for
summarize, shows in the recall block as one redacted line of its last user messages, until its
episode takes its place. Real transcripts, the offline extractor, the real PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb

from jobs import config
from jobs.cli.summarize import serve
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.errors import ConfigError
from jobs.extract.offline import OfflineExtractor
from jobs.recall import RecallConfig, Recaller
from jobs.serve import ServeOptions
from jobs.summarize import run_summarize
from jobs.tokens import estimate_tokens

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

NOW = dt.datetime(2025, 3, 4, 10, 0, tzinfo=dt.UTC)
OPENING = "Hi again, where were we?"


def transcript(
    db: Database,
    session: str,
    messages: list[tuple[str, str]],
    *,
    tenant: str = "acme",
    user: str = "maria",
    started: str = "2025-03-04 09:00Z",
    ended: str | None = "2025-03-04 09:20Z",
    purpose: str = "support",
) -> None:
    with db.tenant(tenant) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, "
            "content_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (
                tenant,
                user,
                session,
                purpose,
                started,
                ended,
                Jsonb([{"role": role, "content": text} for role, text in messages]),
                f"hash-{session}",
            ),
        )


PRICING = [
    ("user", "We want to move from the Team plan to Business for the SSO requirement."),
    ("assistant", "Business is $79 per seat per month and includes Okta SSO."),
    ("user", "Good. We'll go with Business for 14 seats, annual billing."),
    ("assistant", "Noted. I'll send the order form today."),
    ("user", "Send it to maria.keller@acme-corp.com or call me on +44 20 7946 0958."),
]


def test_a_pending_session_shows_until_its_episode_takes_its_place(db: Database, embedder: Embedder) -> None:
    transcript(db, "pricing", PRICING)
    recaller = Recaller(db, embedder)
    before = recaller.recall("acme", "maria", OPENING, now=NOW)
    assert before.episodes == [] and [s.session_id for s in before.sessions] == ["pricing"]
    (line,) = [ln for ln in before.render().splitlines() if ln.startswith("- 2025-03-04")]
    assert line.startswith("- 2025-03-04 [support] (closed), the user's last words: ")
    assert "Business for 14 seats" in line and len(line) < 300
    assert "Not yet summarised (newest first):" in before.render()
    assert before.to_dict()["sessions"][0]["status"] == "pending"

    assert run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder).counts["done"] == 1
    after = recaller.recall("acme", "maria", OPENING, now=NOW)
    assert after.sessions == [] and "Not yet summarised" not in after.render()
    assert [ep.session_id for ep in after.episodes] == ["pricing"]


def test_pii_in_the_last_messages_does_not_reach_the_block(db: Database, embedder: Embedder) -> None:
    transcript(db, "pricing", PRICING)
    result = Recaller(db, embedder).recall("acme", "maria", OPENING, now=NOW)
    block, data = result.render(), json.dumps(result.to_dict(), default=str)
    assert "the user's last words:" in block
    for secret in ("maria.keller@acme-corp.com", "7946 0958", "acme-corp"):
        assert secret not in block and secret not in data
    assert "Send it to [EMAIL] or call me on [PHONE]." in block


def test_a_row_inserted_by_hand_in_content_blocks_shows_its_words_not_the_blocks(
    db: Database, embedder: Embedder
) -> None:
    # A host may INSERT Anthropic content blocks (docs/transcripts.md); they are normalised at claim time,
    # so until then the line reads the text blocks themselves (a tool result is no word of the user's).
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages) "
            "VALUES ('acme', 'maria', 'blocks', 'support', '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s)",
            (
                Jsonb(
                    [
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "Ship the Business plan order."},
                                {"type": "tool_result", "tool_use_id": "t1", "content": "SECRET-TOOL-OUTPUT"},
                            ],
                        }
                    ]
                ),
            ),
        )
    block = Recaller(db, embedder).recall("acme", "maria", OPENING, now=NOW).render()
    (line,) = [ln for ln in block.splitlines() if ln.startswith("- 2025-03-04")]
    assert line.endswith("the user's last words: Ship the Business plan order.")
    assert "type" not in line and "SECRET-TOOL-OUTPUT" not in block


def test_an_open_session_shows_and_the_line_is_bounded_and_budgeted(db: Database, embedder: Embedder) -> None:
    long = "Our Snowflake bill doubled last month " * 20
    transcript(
        db,
        "open",
        [("user", "Short first question?"), ("user", long)],
        ended=None,
        started="2025-03-04 09:50Z",
        purpose="general",
    )
    cfg = RecallConfig(compact_chars=120)
    result = Recaller(db, embedder, cfg).recall("acme", "maria", OPENING, now=NOW, budget_tokens=400)
    (session,) = result.sessions
    assert session.ended_at is None and len(session.text) <= 120 and session.text.endswith("...")
    assert session.text.startswith("Our Snowflake bill doubled")  # the newest message first
    block = result.render()
    assert "- 2025-03-04 (still open), the user's last words: Our Snowflake" in block
    assert estimate_tokens(block) <= 400
    # A budget too small for the section leaves it out rather than overflowing.
    tiny = Recaller(db, embedder, cfg).recall("acme", "maria", OPENING, now=NOW, budget_tokens=60)
    assert tiny.sessions == [] and estimate_tokens(tiny.render()) <= 60


def test_tenant_user_purpose_and_now_are_respected(db: Database, embedder: Embedder) -> None:
    transcript(db, "mine", [("user", "About my invoice.")])
    transcript(db, "colleague", [("user", "Colleague's secret plans.")], user="dave")
    transcript(db, "other-tenant", [("user", "Globex secret plans.")], tenant="globex")
    transcript(db, "marketing", [("user", "Campaign budget.")], purpose="marketing")
    transcript(db, "later", [("user", "Tomorrow's question.")], started="2025-03-05 09:00Z", ended=None)
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, "
            "messages, content_hash, status, attempts) VALUES ('acme', 'maria', 'dead', 'support', "
            "'2025-03-04 08:00Z', '2025-03-04 08:10Z', %s, 'hash-dead', 'dead', 5)",
            (Jsonb([{"role": "user", "content": "Dead-lettered."}]),),
        )
    result = Recaller(db, embedder).recall("acme", "maria", OPENING, purpose="support", now=NOW)
    assert [s.session_id for s in result.sessions] == ["mine"]
    block = result.render()
    assert "About my invoice." in block
    for other in ("Colleague", "Globex", "Campaign", "Tomorrow", "Dead-lettered"):
        assert other not in block
    assert [s.session_id for s in Recaller(db, embedder).recall("globex", "maria", OPENING, now=NOW).sessions] == [
        "other-tenant"
    ]


def test_idle_close_defaults_to_30_minutes_and_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load().idle_close_seconds == 1800
    assert ServeOptions.from_settings(config.load()).idle_close_seconds == 1800
    for off in ("off", "0"):
        monkeypatch.setenv("EPISODES_IDLE_CLOSE", off)
        assert config.load().idle_close_seconds is None
    monkeypatch.setenv("EPISODES_IDLE_CLOSE", "5m")
    assert config.load().idle_close_seconds == 300
    monkeypatch.setenv("EPISODES_IDLE_CLOSE", "soon")
    with pytest.raises(ConfigError, match="EPISODES_IDLE_CLOSE"):
        config.load()
    assert ServeOptions.from_settings(config.Settings(), idle_close_seconds=0.0).idle_close_seconds == 0.0
    bad = CliRunner().invoke(serve, ["--idle-close", "later"])
    assert bad.exit_code == 2 and "not a duration" in bad.output


def test_newest_first_is_by_the_day_each_line_shows(db: Database, embedder: Embedder) -> None:
    """A session left open since January is older than one closed in March (issue 31: a 2025 session was
    listed above a 2026 one because open sessions came first whatever their age)."""
    transcript(db, "left-open", [("user", "Half a question from January.")], started="2025-01-10 09:00Z", ended=None)
    transcript(db, "closed-today", [("user", "This morning's question.")])
    transcript(
        db,
        "closed-yesterday",
        [("user", "Yesterday's question.")],
        started="2025-03-03 09:00Z",
        ended="2025-03-03 09:20Z",
    )
    shown = Recaller(db, embedder).recall("acme", "maria", OPENING, purpose="support", now=NOW)
    assert [s.session_id for s in shown.sessions] == ["closed-today", "closed-yesterday"]  # the two newest
    result = Recaller(db, embedder, RecallConfig(max_unsummarised=3)).recall(
        "acme", "maria", OPENING, purpose="support", now=NOW
    )
    assert [s.session_id for s in result.sessions] == ["closed-today", "closed-yesterday", "left-open"]
    days = [
        line[2:12]
        for line in result.render().split("Not yet summarised (newest first):\n")[1].splitlines()
        if line.startswith("- ")
    ]
    assert days == ["2025-03-04", "2025-03-03", "2025-01-10"]
