"""A rule the assistant applied is the user's decision, however the user phrased it (issue 36).

Coding chats state settings plainly ("The thumbnail worker should run with a concurrency of 4.", "Refresh tokens
expire after 7 days.") and the assistant's reply applies or records them ("Set concurrency=4 for the thumbnail
worker."). The reply's acknowledgement and its echo of the user's specific are what make the sentence a decision,
not the user's wording; the reply is the decision's evidence, and a short decision ("Let's make it 30 days.") is
matched with it when a later amendment looks for what it replaces. The cases were written here for these
rules (the end-to-end sessions are tests/data/amendments/cases.json), except one label quoted verbatim from sde-bench
(vectorize-io/sde-bench, MIT licence, copyright 2026 Vectorize, Inc.; ../shared/data/sde-bench/README.md), tuning data:
"Amending the rule, superseding the old subtract-all-maintenance behaviour:" (tasks/boltons-slalog-amended.json).
"""

from __future__ import annotations

import pytest
from support.offline_sessions import DAY, decisions, extract

from jobs.embeddings import Embedder
from jobs.extract.replacements import CHANGE_CUE, _in_context
from jobs.extract.rules.agent import clean_said
from jobs.extract.rules.applied import applied, echoed, specifics
from jobs.extract.rules.cues import DECISION_LABEL, cue
from jobs.models import KeyEvent, Message, OpenItem


@pytest.mark.parametrize(
    ("said", "reply"),
    [
        (
            "The thumbnail queue worker should run with a concurrency of 4.",
            "Set concurrency=4 for the thumbnail worker.",
        ),
        ("Refresh tokens for the mobile app expire after 7 days.", "Okay, refresh_token_ttl is 7 days."),
        ("We'll cache the pricing API responses for one hour.", "Cache TTL for pricing set to 1 hour."),
        (
            "Deploy freeze: no production deploys after 17:00 on Fridays.",
            "Noted, the pipeline blocks deploys after 17:00.",
        ),
        ("Branch naming: feature branches are named feature/<slug>.", "I'll add a check for feature/<slug> in CI."),
    ],
)
def test_a_setting_the_assistant_applied_is_the_users_decision(embedder: Embedder, said: str, reply: str) -> None:
    episode = extract(embedder, [("user", "Context first."), ("user", said), ("assistant", reply)])
    [decision] = decisions(episode)
    assert decision.evidence == [1, 2] and decision.who == "user"
    assert said.rstrip(".") in decision.what


@pytest.mark.parametrize(
    ("said", "reply"),
    [
        # the reply objects, asks, or echoes nothing of the user's
        (
            "The worker should run with a concurrency of 4.",
            "Set it to 4, but the database pool only has 3 connections.",
        ),
        ("The worker should run with a concurrency of 4.", "Set the concurrency to 4?"),
        ("The worker should run with a concurrency of 4.", "Done, the worker restarts on deploy."),
        # no specific at all
        ("The worker should be faster somehow.", "Okay, noted."),
        # the speaker's own life, and a task asked of the agent, which the reply echoes too
        ("I ran a 10K last weekend, 52 minutes!", "Okay, 52 minutes is impressive."),
        ("Fix the failing test in tests/test_api.py please.", "I'll update tests/test_api.py so the fixture closes."),
        ("Read src/app.py and explain the startup.", "Sure. src/app.py builds the app in create_app()."),
        # a problem report, which the reply echoes too
        ("The build is broken since we bumped Node to 22.", "Okay, Node 22 drops the old OpenSSL flag; I'll pin it."),
        # a question is no statement
        ("Should the worker run with a concurrency of 4?", "Set concurrency=4 for now."),
    ],
)
def test_no_decision_without_an_applied_echo_of_a_statement(embedder: Embedder, said: str, reply: str) -> None:
    assert decisions(extract(embedder, [("user", said), ("assistant", reply)])) == []


def test_the_acknowledgement_and_the_echo() -> None:
    assert applied("Done, the list endpoints now cap page_size at 100.")
    assert applied("The pipeline now blocks Friday deploys after 15:00.")
    assert applied("Raised it to 45 seconds.") and applied("Scheduled the report email for 07:00 local time.")
    assert not applied("Great question! What should the limit be?")
    assert not applied("I'll look into why the build fails.")  # doing something else, not applying
    assert echoed("a concurrency of 4", "Set concurrency=4.") and echoed("for one hour", "set to 1 hour")
    assert echoed("Twelve failures in a minute.", "Set the threshold to 12.") and echoed(
        "no deploys on Friday", "Blocked deploys every Friday."
    )
    assert not echoed("a concurrency of 4", "Set concurrency=8.")
    assert specifics("use feat/<ticket>-<slug> in CI") >= {"feat/<ticket>-<slug>", "ci"}


def test_a_short_applied_decision_is_matched_with_the_reply_that_names_its_subject(embedder: Embedder) -> None:
    first = extract(
        embedder,
        [
            ("user", "Refresh tokens for the mobile app expire after 7 days."),
            ("assistant", "Okay, refresh_token_ttl is 7 days."),
        ],
    )
    [rule] = decisions(first)
    offered = [OpenItem(event_id=3, type="decision", what=rule.what, since=DAY)]
    said = [
        ("user", "The field team goes offline for weeks and gets logged out."),
        ("user", "Let's make it 30 days."),
        ("assistant", "Changed the refresh token lifetime to 30 days."),
    ]
    [amended] = decisions(extract(embedder, said, offered))
    assert "30 days" in amended.what and amended.evidence == [1, 2] and amended.replaces == 3
    messages = [Message(role=r, content=t) for r, t in said]  # type: ignore[arg-type]
    context = _in_context(
        KeyEvent(type="decision", what="Let's make it 30 days.", evidence=[1, 2], who="user"), messages
    )
    assert context == "Let's make it 30 days. Changed the refresh token lifetime to 30 days."


@pytest.mark.parametrize(
    "said",
    [
        "Raised the upload cap to 500 MB.",
        "Reduced the pool size to 10.",
        "Increased the timeout to 45 seconds.",
        "Changed the default page size to 50.",
        "Updated the CI check to feat/<ticket>-<slug>.",
        "Set the breaker threshold to 12 failures per minute.",
        "We're tightening the deploy freeze.",
    ],
)
def test_a_change_reported_in_any_tense_is_a_change_cue(said: str) -> None:
    assert CHANGE_CUE.search(said)


def test_a_rule_about_an_api_may_say_should_now() -> None:
    # "(?<!i )should now" once read the end of "API " as the pronoun I
    assert cue("The cache TTL for the pricing API should now be 5 minutes instead of an hour.") == ("decision", 34)
    assert cue("Patch updates may now be merged automatically when CI passes.") is not None
    assert cue("I should now go to bed.") is None


def test_a_placeholder_the_speaker_wrote_is_kept_and_markup_is_not() -> None:
    assert clean_said("Name branches feat/<ticket>-<slug>.") == "Name branches feat/<ticket>-<slug>."
    assert clean_said("Keys are pricing:<sku>, see <a href='x'>docs</a>.") == "Keys are pricing:<sku>, see  docs ."
    assert clean_said("<system-reminder>Be brief.</system-reminder>Hi") == "Be brief. Hi"  # tags closed later go


@pytest.mark.parametrize(
    "label",
    [
        "Amending the rule, superseding the old subtract-all-maintenance behaviour: ",
        "Revising the cache policy: ",
        "Updating the deploy rule, replacing last month's: ",
    ],
)
def test_an_amendment_in_the_gerund_labels_a_rule(label: str) -> None:
    assert DECISION_LABEL.match(label + "maintenance is excluded only when announced 24h before.")
    assert not DECISION_LABEL.match("Changing the plan: we go hiking.")  # a plan is no rule noun


def test_the_users_answer_to_what_a_setting_should_be_is_a_decision(embedder: Embedder) -> None:
    said = [("assistant", "What should the threshold be?"), ("user", "12 failures in a minute, then stay open 30 s.")]
    [decision] = decisions(extract(embedder, [("user", "The breaker opens on every hiccup."), *said]))
    assert decision.evidence == [2] and "12 failures" in decision.what
