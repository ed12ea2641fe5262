"""The offline extractor's rules are data (issue 48): tests generated from the records in jobs/extract/rules/*.toml,
and one table test per stage of the engine that applies them (candidates -> vetoes -> the cue chosen)."""

from __future__ import annotations

import pytest

from jobs.errors import ConfigError
from jobs.extract.rules import records
from jobs.extract.rules.cues import CUE_RULES, VETOES, Candidate, candidates, cue, surviving
from jobs.extract.rules.records import RULE_FILES, RuleRecord, load
from jobs.extract.rules.text import normalise

RECORDS = [r for name in RULE_FILES for r in load(name)]


def _examples(kind: str) -> list[object]:
    return [
        pytest.param(r, text, id=f"{r.id}:{text[:40]}")
        for r in RECORDS
        for text in (r.positives if kind == "positive" else r.negatives)
    ]


@pytest.mark.parametrize(("record", "text"), _examples("positive"))
def test_every_positive_example_fires(record: RuleRecord, text: str) -> None:
    assert record.fires(normalise(text))


@pytest.mark.parametrize(("record", "text"), _examples("negative"))
def test_no_negative_neighbour_fires(record: RuleRecord, text: str) -> None:
    assert not record.fires(normalise(text))


def test_records_are_complete_and_say_where_they_came_from() -> None:
    assert len({r.id for r in RECORDS}) == len(RECORDS)
    for r in RECORDS:
        assert len(r.positives) >= 2 and r.negatives, r.id
        assert "outside the tuning data" in r.source, r.id  # one positive was written fresh
        assert set(r.vetoes) <= set(VETOES), r.id
    priorities = [r.priority for r in load("cues") if r.priority]
    assert len(priorities) == len(set(priorities)) == len(CUE_RULES)  # one order among the cue rules


def test_a_bad_record_is_refused_with_its_location() -> None:
    with pytest.raises(ConfigError, match=r"rule 1 \(x\).*unknown fragment <<nope>>"):
        records._expand(["a<<nope>>"], {}, "jobs/extract/rules/cues.toml rule 1 (x)")


# Stage 1, candidates: every cue rule that fires with its conditions met, by priority.
@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Decision: the nightly export moves to 03:30 UTC.", ["decision.label"]),
        ("We'll go with RabbitMQ for the job queue.", ["decision.strong"]),
        ("Not sure, maybe we will switch to Kafka.", ["decision.strong"]),  # found here, vetoed in stage 2
        ("I'll draft the migration runbook before the freeze.", ["commitment"]),
        ("I'll be fine.", []),  # a commitment cue with no substance and no action verb
        ("We're running Redis 7.2 behind the API gateway.", ["fact"]),
        ("Let's book the venue by Friday.", ["decision.weak"]),
    ],
)
def test_stage_candidates(sentence: str, expected: list[str]) -> None:
    assert [c.rule for c in candidates(normalise(sentence))] == expected


def test_stage_candidates_retypes_a_dated_action_as_a_commitment() -> None:
    assert [c.type for c in candidates("Let's book the venue by Friday.")] == ["commitment"]


# Stage 2, vetoes: each veto is checked once for the sentence and strikes every candidate that lists it.
@pytest.mark.parametrize(
    ("sentence", "vetoes", "kept"),
    [
        ("We'll go with Kafka.", ("question", "hedge"), True),
        ("Maybe we'll go with Kafka.", ("question", "hedge"), False),
        ("If we outgrow it, we'll go with Kafka.", ("question", "hedge"), False),
        ("We'll go with Kafka?", ("question", "hedge"), False),
        ("Maybe we'll go with Kafka.", ("question",), True),  # a rule that lists no hedge veto keeps it
        ("Wow, your talk went great.", ("second_person",), False),
    ],
)
def test_stage_vetoes(sentence: str, vetoes: tuple[str, ...], kept: bool) -> None:
    found = [Candidate("r", "decision", 0, vetoes)]
    assert bool(surviving(found, sentence)) is kept


# Stage 3, the cue chosen: the first surviving candidate by priority.
@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Decision: we ship on Tuesday.", "decision"),
        ("I'd rather keep the invoices in euros.", "preference"),
        ("Turns out the staging bucket was public the whole time.", "surprise"),
        ("Not sure yet, but I'd rather use Terraform for the staging cluster.", None),
    ],
)
def test_stage_choice(sentence: str, kind: str | None) -> None:
    found = cue(sentence)
    assert (found[0] if found else None) == kind


# Change verbs (issue 48: one definition): rules/words.toml [change_verbs]; every other verb list derives from it.
VERB_LISTS = ("change_cue_verbs", "applied_verbs", "will_apply_verbs", "lets_verbs", "would_verbs")


@pytest.mark.parametrize("name", VERB_LISTS)
def test_every_verb_list_derives_from_the_change_verbs(name: str) -> None:
    table = records._words_file()[name]
    base = records.word_list("change_verbs")
    assert table["base"] == "change_verbs" and "words" not in table
    derived = records.word_list(name)
    assert derived == tuple(w for w in base if w not in table.get("minus", ())) + tuple(table.get("plus", ()))
    assert not set(table.get("plus", ())) & set(base)  # an addition is an addition, not a copy of the base
    assert len(set(derived)) == len(derived)


def test_the_rules_read_the_verb_lists_not_copies() -> None:
    by_id = {r.id: r for r in RECORDS}
    verbs = records.verb_alternation
    assert verbs("change_verbs", "base") in by_id["decision.strong"].pattern
    assert verbs("lets_verbs", "base") in by_id["decision.weak"].pattern
    assert verbs("would_verbs", "base") in by_id["dialogue.proposal"].pattern
    assert verbs("would_verbs", "base") in by_id["dialogue.suggestion"].pattern
    assert verbs("change_cue_verbs", "all") in by_id["replace.change_cue"].pattern
    assert verbs("applied_verbs", "past") in by_id["applied.reply"].pattern
    assert verbs("will_apply_verbs", "base") in by_id["applied.reply"].pattern


def test_a_verb_list_reads_each_form_once() -> None:
    assert records.verb_alternation("change_verbs", "past").startswith("(?:set|capped|pinned|bumped|raised|")
    assert records.verb_alternation("change_cue_verbs", "all").startswith("(?:set|sets|setting|bump|bumps|")


def test_a_bad_verb_reference_is_refused_with_its_location() -> None:
    with pytest.raises(ConfigError, match=r"rule 2 \(y\).*the form is one of"):
        records._expand(["<<verbs:change_verbs:pluperfect>>"], {}, "jobs/extract/rules/cues.toml rule 2 (y)")
    with pytest.raises(ConfigError, match=r"no list \[nope\]"):
        records._expand(["<<verbs:nope>>"], {}, "jobs/extract/rules/cues.toml rule 2 (y)")


def _word_lists() -> list[object]:
    raw = records._words_file()
    return [pytest.param(n, t, id=n) for n, t in raw.items() if isinstance(t, dict) and "words" in t]


@pytest.mark.parametrize(("name", "table"), _word_lists())
def test_every_word_list_says_where_it_came_from_and_holds_its_examples(name: str, table: dict[str, object]) -> None:
    words = records.word_list(name)
    assert table["source"] and len(set(words)) == len(words), name
    positives, negatives = table.get("positives", []), table.get("negatives", [])
    assert isinstance(positives, list) and isinstance(negatives, list)
    assert len(positives) >= 2 and negatives, f"{name}: two words of the list and a neighbour that is not"
    assert set(positives) <= set(words) and not set(negatives) & set(words), name
