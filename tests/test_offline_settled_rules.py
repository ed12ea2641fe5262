"""The offline extractor's settled rules and amendments (issue 36): a rule an assistant writes down as the
session's last word after the user stated its terms is the user's decision, a labelled rule keeps all of its
message, a reply that only points back ("That's the rule going forward") is no event of its own, and a later
session's amendment of such a rule links to it, so recall marks the old one replaced.

Every case is synthetic, written for these rules; sde-bench (tuning half only) showed the phrasings.
"""

from __future__ import annotations

import datetime as dt

import pytest

from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.extract.rules.cues import AGREEMENT, DECISION_LABEL, REFERS_BACK
from jobs.models import EpisodeExtraction, KeyEvent, Message, OpenItem, Transcript

DAY = dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.UTC)


def extract(
    embedder: Embedder, said: list[tuple[str, str]], offered: list[OpenItem] | None = None, when: dt.datetime = DAY
) -> EpisodeExtraction:
    transcript = Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id=f"s-{when:%Y%m%d}",
        purpose="general",
        started_at=None,
        ended_at=when,
        messages=[Message(role=role, content=text) for role, text in said],  # type: ignore[arg-type]
    )
    return OfflineExtractor(embedder).extract(transcript, offered).extraction


def decisions(episode: EpisodeExtraction) -> list[KeyEvent]:
    return [e for e in episode.key_events if e.type == "decision"]


@pytest.mark.parametrize(
    "label",
    [
        "Settled then: ",
        "Final: ",
        "Final policy: ",
        "Amended rule, superseding the weekly run: ",
        "Amended rule in full, superseding the original: ",
        "Updated convention: ",
    ],
)
def test_a_rule_label_may_carry_a_qualifier(label: str) -> None:
    assert DECISION_LABEL.match(label + "thumbnails are cached for 12 hours.")


@pytest.mark.parametrize(
    "said",
    [
        "The policy we had is fine: no change needed.",  # "the policy" with a qualifier is prose, not a label
        "The rule is that nobody deploys on Fridays.",
        "Finally: the build passed.",
    ],
)
def test_prose_with_a_colon_is_no_rule_label(said: str) -> None:
    assert not DECISION_LABEL.match(said)


def test_a_reply_pointing_back_agrees_and_is_no_event_of_its_own(embedder: Embedder) -> None:
    assert AGREEMENT.match("That's the rule going forward, yes.") and REFERS_BACK.match("That's the one. Ship it.")
    assert not AGREEMENT.match("That's right, but not for the admin pages.")
    episode = extract(
        embedder,
        [
            ("user", "Thumbnails time out on the gallery page."),
            ("assistant", "Understood: thumbnails are cached for 12 hours and rebuilt on upload."),
            ("user", "That's the rule going forward, yes."),
        ],
    )
    [decision] = decisions(episode)
    assert decision.what == 'The user decided: "Thumbnails are cached for 12 hours and rebuilt on upload."'
    assert decision.evidence == [1, 2] and decision.who == "user"


def test_a_label_closing_a_session_after_the_users_terms_is_the_users_decision(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        [
            ("user", "The exporter keeps timing out on big reports."),
            ("assistant", "How many rows per page, and how long may one page take?"),
            ("user", "Five hundred rows per page, and cut a page off after 20 seconds."),
            ("assistant", "Settled: the exporter pages 500 rows at a time. A page that takes over 20 s is aborted."),
        ],
    )
    [decision] = decisions(episode)
    assert decision.what == (
        'The user decided: "the exporter pages 500 rows at a time. A page that takes over 20 s is aborted."'
    ), "the whole labelled message, not its first sentence"
    assert decision.evidence == [3, 2] and decision.who == "user"


def test_a_restatement_closing_a_session_after_the_users_terms_is_a_decision(embedder: Embedder) -> None:
    episode = extract(
        embedder,
        [
            ("user", "Search results jump around between pages."),
            ("assistant", "Should ties be broken by title?"),
            ("user", "No, by creation date, newest first, then by id."),
            ("assistant", "Got it: results sort by score, then creation date newest first, then id."),
        ],
    )
    assert [e.what for e in decisions(episode)] == [
        'The user decided: "Results sort by score, then creation date newest first, then id."'
    ]


@pytest.mark.parametrize(
    "said",
    [
        [  # the label only answers a question: nobody settled anything
            ("user", "How should search results be sorted?"),
            ("assistant", "Settled: results sort by score, then creation date, then id."),
        ],
        [  # a suggestion nobody answered
            ("user", "Search results jump around between pages."),
            ("assistant", "I'd suggest sorting by score, then creation date, then id."),
        ],
        [  # the label is not the session's last word and the user objects
            ("user", "Search results jump around between pages, sort them by date."),
            ("assistant", "Settled: results sort by score, then creation date, then id."),
            ("user", "No, not by score at all."),
        ],
    ],
)
def test_an_unanswered_or_refused_rule_is_no_decision(embedder: Embedder, said: list[tuple[str, str]]) -> None:
    assert not decisions(extract(embedder, said))


def test_an_amendment_a_month_later_links_to_the_settled_rule(embedder: Embedder) -> None:
    """Session 1 closes with a "Settled:" after the user's terms; session 2 amends one term ("amending the
    policy ..., superseding the old 60-second cap") and the user confirms by pointing back. The amendment
    replaces the settled rule, not an unrelated decision offered beside it."""
    one = extract(
        embedder,
        [
            ("user", "The webhook sender retried 401s until the partner blocked us."),
            ("assistant", "Which responses should it retry, and how often?"),
            ("user", "Only 5xx and 429, three attempts, backoff capped at 60 seconds."),
            ("assistant", "Settled: the webhook sender retries 5xx and 429 only, 3 attempts, backoff capped at 60 s."),
        ],
    )
    [rule] = decisions(one)
    offered = [
        OpenItem(21, "decision", "The user decided to use Redis 7 for the session cache.", DAY),
        OpenItem(20, "decision", rule.what, DAY),
    ]
    two = extract(
        embedder,
        [
            ("user", "The partner's gateway now drops idle connections at 45 seconds."),
            (
                "assistant",
                "Understood — amending the policy: retry 5xx and 429 only, 3 attempts, backoff now capped at "
                "40 s, superseding the old 60-second cap.",
            ),
            ("user", "That's the rule going forward, yes."),
        ],
        offered,
        DAY + dt.timedelta(days=30),
    )
    [amendment] = decisions(two)
    assert amendment.replaces == 20 and "40 s" in amendment.what


@pytest.mark.parametrize(
    ("reply", "decided"),
    [("Yes, do that.", True), ("No, keep it at 100.", False), ("Hmm, what would that cost us?", False)],
)
def test_an_assistant_asking_to_make_a_change_is_the_users_decision_once_agreed(
    embedder: Embedder, reply: str, decided: bool
) -> None:
    episode = extract(
        embedder,
        [
            ("user", "The rate limiter blocks our own dashboard at peak."),
            ("assistant", "Should I raise the public API limit to 200 requests per minute per key?"),
            ("user", reply),
        ],
    )
    expected = ['The user decided: "Raise the public API limit to 200 requests per minute per key."']
    assert [e.what for e in decisions(episode)] == (expected if decided else [])
