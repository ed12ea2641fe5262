"""The offline extractor: deterministic rule + embedding episodes, with the real MiniLM embedder.

No database: the extractor is a pure function of the transcript. The embedder is loaded once for the
module (about 10 s); everything else runs in well under a second per transcript.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from jobs.embeddings import Embedder, Vectors, get_embedder
from jobs.extract.offline import (
    EMBED_BUDGET,
    EMBED_WORDS,
    MAX_EMBEDDED,
    OfflineExtractor,
)
from jobs.models import EpisodeExtraction, KeyEvent, Message, OpenItem, Transcript

TUESDAY = dt.datetime(2025, 3, 4, 15, 0, tzinfo=dt.UTC)

SUPPORT = [
    Message(
        role="user",
        name="Dana",
        content="Hi, I'm Dana from Acme Corp. We're evaluating your product for our support team of 12 people.",
    ),
    Message(
        role="assistant",
        content="Welcome Dana! For a team of 12 the Team plan at $49/seat or the Business "
        "plan at $79/seat would fit. The Business plan adds SSO.",
    ),
    Message(role="user", name="Dana", content="We don't need SSO yet. We'll go with the Team plan at $49/seat."),
    Message(role="assistant", content="Great choice. I'll prepare the contract and email it to you today."),
    Message(
        role="user",
        name="Dana",
        content="Thanks. I'll send the signed contract by Friday. Does the Team plan "
        "include priority support in Berlin?",
    ),
    Message(role="assistant", content="I'm not sure about regional support, I'll check with our team."),
    Message(role="user", name="Dana", content="Wow, I didn't expect the onboarding to be free. That's great."),
]


def transcript(messages: list[Message], ended_at: dt.datetime = TUESDAY) -> Transcript:
    return Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id="s",
        purpose="general",
        started_at=None,
        ended_at=ended_at,
        messages=messages,
    )


class CountingEmbedder:
    """Wraps the real embedder to record what the extractor asks it to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder("minilm")


@pytest.fixture(scope="module")
def extractor(embedder: Embedder) -> OfflineExtractor:
    return OfflineExtractor(embedder)


@pytest.fixture(scope="module")
def support(extractor: OfflineExtractor) -> EpisodeExtraction:
    return extractor.extract(transcript(SUPPORT)).extraction


def events_of(episode: EpisodeExtraction, kind: str) -> list[KeyEvent]:
    return [e for e in episode.key_events if e.type == kind]


def assert_grounded(episode: EpisodeExtraction, messages: list[Message]) -> None:
    """What the pipeline's grounding step checks, plus the model's own validation."""
    EpisodeExtraction.model_validate(episode.model_dump())
    haystack = "\n".join(f"{m.name or ''}\n{m.content}" for m in messages)
    for entity in episode.entities:
        assert entity.name in haystack, entity
    for event in episode.key_events:
        assert event.evidence and all(0 <= i < len(messages) for i in event.evidence), event
    assert len(episode.summary) >= 10 and episode.summary.strip()
    assert all(t == t.lower() and t.strip() for t in episode.topic_tags) and len(episode.topic_tags) <= 5


# -- labelling and determinism -------------------------------------------------------------------


def test_result_is_labelled_offline_and_valid(extractor: OfflineExtractor) -> None:
    result = extractor.extract(transcript(SUPPORT))
    assert (result.model, result.prompt_version, result.calls) == ("offline", extractor.prompt_version, [])
    assert extractor.name == "offline" and extractor.prompt_version.startswith("offline-")
    assert_grounded(result.extraction, SUPPORT)


def test_same_input_gives_identical_output(extractor: OfflineExtractor, embedder: Embedder) -> None:
    first = extractor.extract(transcript(SUPPORT)).extraction.model_dump()
    assert extractor.extract(transcript(SUPPORT)).extraction.model_dump() == first
    assert OfflineExtractor(embedder).extract(transcript(SUPPORT)).extraction.model_dump() == first


def test_default_embedder_is_the_shared_minilm_loaded_lazily(embedder: Embedder) -> None:
    lazy = OfflineExtractor()
    assert lazy._embedder is None  # constructing must not load a model
    assert lazy.embedder is embedder


# -- key events ----------------------------------------------------------------------------------


def test_decision_cites_the_message_that_states_it(support: EpisodeExtraction) -> None:
    decisions = events_of(support, "decision")
    assert len(decisions) == 1
    decision = decisions[0]
    assert decision.evidence == [2] and decision.who == "user (Dana)"
    assert "Team plan" in decision.what and "$49/seat" in decision.what and "Dana" in decision.what


def test_commitment_has_due_date_resolved_from_the_weekday(support: EpisodeExtraction) -> None:
    dana = [e for e in events_of(support, "commitment") if e.who == "user (Dana)"]
    assert len(dana) == 1
    assert dana[0].evidence == [4]
    assert dana[0].due == dt.date(2025, 3, 7)  # the Friday after Tuesday 4 March
    assert dana[0].what == "Dana will send the signed contract by Friday."


def test_assistant_commitment_is_attributed_to_the_assistant(support: EpisodeExtraction) -> None:
    mine = [e for e in events_of(support, "commitment") if e.who == "assistant"]
    assert [e.evidence for e in mine] == [[3]]
    assert mine[0].due == dt.date(2025, 3, 4)  # "today"
    assert mine[0].what.startswith("The assistant")


def test_question_met_with_not_sure_is_open(support: EpisodeExtraction) -> None:
    questions = events_of(support, "open_question")
    assert [q.evidence for q in questions] == [[4, 5]]  # the question and the "not sure" reply
    assert "priority support in Berlin" in questions[0].what and questions[0].who == "user (Dana)"


def test_surprise_is_found_and_rewritten_in_the_third_person(support: EpisodeExtraction) -> None:
    surprises = events_of(support, "surprise")
    assert [s.evidence for s in surprises] == [[6]]
    assert surprises[0].what == "Dana didn't expect the onboarding to be free."


def test_answered_question_is_not_open_but_a_last_unanswered_one_is(extractor: OfflineExtractor) -> None:
    messages = [
        Message(role="user", content="Does the Business plan include audit logs for every workspace?"),
        Message(role="assistant", content="Yes, audit logs are included in the Business plan for all workspaces."),
        Message(role="user", content="Good. And can we export audit logs to our own S3 bucket?"),
    ]
    episode = extractor.extract(transcript(messages)).extraction
    assert [(e.type, e.evidence) for e in episode.key_events] == [("open_question", [2])]


def test_small_talk_questions_and_pleasantries_are_not_events(extractor: OfflineExtractor) -> None:
    messages = [
        Message(role="user", name="Mel", content="Hey Caroline! How have you been?"),
        Message(role="user", name="Caroline", content="Good to see you, Mel! All good here. What about you?"),
    ]
    episode = extractor.extract(transcript(messages)).extraction
    assert episode.key_events == []
    assert episode.importance <= 0.3


def test_events_are_ordered_by_salience_and_capped(extractor: OfflineExtractor) -> None:
    messages = [
        Message(role="user", name="Ann", content=f"I'll send invoice number {n} to the finance team by Friday.")
        for n in range(30)
    ]
    episode = extractor.extract(transcript(messages)).extraction
    assert len(episode.key_events) == 20
    assert all(e.type == "commitment" and e.due == dt.date(2025, 3, 7) for e in episode.key_events)
    assert len({e.evidence[0] for e in episode.key_events}) == 20  # one per message


# -- summary, tags, entities, importance ---------------------------------------------------------


def test_summary_is_dated_third_person_and_bounded(support: EpisodeExtraction) -> None:
    summary = support.summary
    # The session's decision opens it (a block with room for one sentence shows the first), with the lead.
    assert summary.startswith(
        "On 4 March 2025, Dana decided to go with the Team plan at $49/seat; Dana and the assistant talked about "
    )
    assert "Dana will send the signed contract by Friday." in summary
    assert not summary.startswith("I ") and " I'll " not in summary.replace('"', " ").split("said:")[0]
    assert len(summary) <= 800


def test_tags_are_lowercase_deduplicated_and_at_most_five(support: EpisodeExtraction) -> None:
    assert 1 <= len(support.topic_tags) <= 5
    assert support.topic_tags[0] == "team plan"
    assert len(set(support.topic_tags)) == len(support.topic_tags)
    assert "plan" not in support.topic_tags  # covered by "team plan"


def test_entities_occur_in_the_text_with_sensible_kinds(support: EpisodeExtraction) -> None:
    kinds = {e.name: e.kind for e in support.entities}
    assert kinds["Dana"] == "person"
    assert kinds["Acme Corp"] == "org"
    assert kinds["Team plan"] == "product"
    assert kinds["Berlin"] == "place"
    assert "We're" not in kinds and "Welcome Dana" not in kinds and "Thanks" not in kinds


def test_importance_rises_with_decisions_and_commitments(
    support: EpisodeExtraction, extractor: OfflineExtractor
) -> None:
    chat = extractor.extract(
        transcript(
            [
                Message(role="user", content="Just saying hello, nothing else today."),
                Message(role="assistant", content="Hello! Nice to hear from you."),
            ]
        )
    )
    assert 0.1 <= chat.extraction.importance < 0.3
    assert support.importance >= 0.7


# -- open items from earlier sessions ------------------------------------------------------------


def test_earlier_open_items_are_resolved_conservatively(extractor: OfflineExtractor) -> None:
    since = dt.datetime(2025, 3, 4, tzinfo=dt.UTC)
    items = [
        OpenItem(11, "commitment", "Dana will send the signed contract by Friday.", since),
        OpenItem(
            12,
            "open_question",
            'Dana asked "Does the Team plan include priority support in Berlin?", which was left unanswered.',
            since,
        ),
        OpenItem(13, "commitment", "The assistant will email the invoice for March.", since),
        OpenItem(14, "open_question", 'Dana asked "Can we pay annually?", which was left unanswered.', since),
    ]
    messages = [
        Message(role="user", name="Dana", content="Hi again! I've sent the signed contract this morning."),
        Message(
            role="assistant",
            content="Thanks Dana, got it. About your question: yes, the Team plan includes priority support in Berlin.",
        ),
        Message(role="user", name="Dana", content="Great. Can you also tell me about the invoice?"),
        Message(role="assistant", content="The invoice will follow next week."),
    ]
    episode = extractor.extract(transcript(messages, dt.datetime(2025, 3, 7, tzinfo=dt.UTC)), items).extraction
    resolved = {(r.item_id, r.outcome, tuple(r.evidence)) for r in episode.resolved_items}
    assert resolved == {(11, "fulfilled", (0,)), (12, "answered", (1,))}  # not 13 (only promised), not 14


# -- edge cases ----------------------------------------------------------------------------------

EDGE_CASES = {
    "one message": [Message(role="user", content="Hello")],
    "only system": [
        Message(role="system", content="You are a helpful assistant."),
        Message(role="system", content="Session closed after inactivity."),
    ],
    "empty content": [Message(role="user", content=""), Message(role="assistant", content="   ")],
    "emoji and dots": [Message(role="user", content="👍"), Message(role="assistant", content="...")],
    "very long message": [
        Message(
            role="user",
            name="Ann",
            content=" ".join(
                f"I tried option {n} for the Orion project in Lisbon and it failed again." for n in range(2500)
            ),
        )
    ],
    "german": [
        Message(
            role="user",
            name="Jörg",
            content="Ich habe mich für den Team-Tarif entschieden. Wir treffen uns am Freitag in München.",
        ),
        Message(role="assistant", content="Danke, Jörg! Ich schicke Ihnen den Vertrag bis Freitag."),
    ],
    "japanese": [
        Message(role="user", content="明日までに契約書を送ります。東京のオフィスで会いましょう。"),
        Message(role="assistant", content="ありがとうございます！"),
    ],
    "code and tool output": [
        Message(
            role="user", content="Here is my code:\n```python\nprint('I will')\n```\nWhy does it fail with a KeyError?"
        ),
        Message(role="tool", content='{"error": "KeyError: \'id\'"}'),
        Message(role="assistant", content="I'm not sure yet, I'll check the logs."),
    ],
    "shouting": [Message(role="user", content="I NEED HELP WITH MY ACCOUNT RIGHT NOW!!! WHY IS IT LOCKED???")],
    "curly apostrophes": [
        Message(role="user", name="O’Brien", content="I’m O’Brien from Smith & Sons Ltd. We’ll go with the Pro plan.")
    ],
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_cases_give_valid_grounded_episodes(extractor: OfflineExtractor, case: str) -> None:
    messages = EDGE_CASES[case]
    episode = extractor.extract(transcript(messages)).extraction
    assert_grounded(episode, messages)
    assert 0.1 <= episode.importance <= 0.95
    assert episode == extractor.extract(transcript(messages)).extraction


def test_edge_case_details(extractor: OfflineExtractor) -> None:
    empty = extractor.extract(transcript(EDGE_CASES["empty content"])).extraction
    assert "no substantive text" in empty.summary and empty.key_events == [] and empty.topic_tags == []
    system = extractor.extract(transcript(EDGE_CASES["only system"])).extraction
    assert system.key_events == []  # system messages state no decisions
    german = extractor.extract(transcript(EDGE_CASES["german"])).extraction
    assert {e.name for e in german.entities} <= {"Jörg", "München"}  # German capitalises every noun
    japanese = extractor.extract(transcript(EDGE_CASES["japanese"])).extraction
    assert japanese.topic_tags == [] and "明日までに契約書を送ります" in japanese.summary
    shouting = extractor.extract(transcript(EDGE_CASES["shouting"])).extraction
    assert shouting.entities == [] and "LOCKED" not in {e.name for e in shouting.entities}
    curly = extractor.extract(transcript(EDGE_CASES["curly apostrophes"])).extraction
    assert {e.name: e.kind for e in curly.entities} == {
        "O’Brien": "person",
        "Smith & Sons Ltd": "org",
        "Pro plan": "product",
    }
    assert [e.type for e in curly.key_events] == ["decision"] and curly.key_events[0].who == "user (O’Brien)"


def test_long_transcripts_cost_bounded_embedding_work(embedder: Embedder) -> None:
    counting = CountingEmbedder(embedder)
    messages = [
        Message(
            role="user" if n % 2 else "assistant",
            content=f"Message {n}: we compared plan {n} with "
            "plan {n+1}, looked at the invoice totals for last quarter and the seat counts per team.",
        )
        for n in range(200)
    ]
    episode = OfflineExtractor(counting).extract(transcript(messages)).extraction
    assert_grounded(episode, messages)
    assert len(counting.calls) == 2  # short and long sentences apart, to pad less
    texts = [t for call in counting.calls for t in call]
    assert len(texts) <= MAX_EMBEDDED and all(len(t.split()) <= EMBED_WORDS for t in texts)
    assert sum(len(t.split()) for t in texts) <= EMBED_BUDGET


# -- rules ---------------------------------------------------------------------------------------


def test_summary_sentences_are_embedded_centrality_matters(extractor: OfflineExtractor) -> None:
    """The summary prefers the sentences that carry the session's topic over an off-topic aside."""
    messages = [
        Message(role="user", name="Ann", content="I want to migrate our billing database from MySQL to Postgres."),
        Message(
            role="assistant",
            content="Migrating billing from MySQL to Postgres works well with logical "
            "replication and a short cutover window.",
        ),
        Message(role="user", name="Ann", content="My cat knocked a plant off the windowsill this morning."),
        Message(
            role="assistant",
            content="For the billing migration, test the Postgres cutover on a staging copy of the MySQL data first.",
        ),
        Message(role="user", name="Ann", content="I decided we will rehearse the Postgres cutover on staging first."),
    ]
    episode = extractor.extract(transcript(messages)).extraction
    assert "windowsill" not in episode.summary and "Postgres" in episode.summary
    assert [(e.type, e.evidence) for e in episode.key_events] == [("decision", [4])]
