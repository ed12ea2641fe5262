"""The offline extractor's remaining tables are data (issue 48, third part): the entity, calendar, voice, action,
grounding and boilerplate tables live in jobs/extract/rules/{words,entities,events}.toml, each defined once, and
every module reads them from there. The word lists' and records' own examples run in test_rule_records.py; this file
checks that the engine reads the data (not a copy), the word tables, and the rules applied beside a name."""

from __future__ import annotations

import re

import pytest

from jobs.errors import ConfigError
from jobs.extract import actions, grounding, offline_events, replacements
from jobs.extract.rules import agent, applied, dates, entities, records, text, topics, voice
from jobs.extract.rules.records import RuleRecord, by_name, word_list, word_map

CALENDAR = ("weekdays", "months", "weekday_abbreviations", "month_abbreviations", "relative_days")


def test_the_calendar_is_defined_once_and_read_by_every_stage() -> None:
    words = {w for name in CALENDAR for w in word_list(name)}
    assert text.CALENDAR_WORDS == words
    assert words <= text.STOPWORDS and words & set(word_list("stopwords")) == {"may"}  # added, not copied ("may":
    # the modal verb is a stopword of its own)
    assert entities._CALENDAR == {w.capitalize() for w in words}
    assert dates.WEEKDAYS == list(word_list("weekdays")) and dates.MONTHS == list(word_list("months"))
    assert grounding._ANY_SUMMARY >= set(word_list("weekdays")) | set(word_list("months"))
    # dates read a month by its abbreviation, and every month has one
    assert all(any(m.startswith(a) for a in word_list("month_abbreviations")) for m in dates.MONTHS)


def test_every_module_reads_its_tables_from_the_data() -> None:
    assert entities._NOT_NAMES == set(word_list("not_names"))
    assert entities._GAZETTEER == set(word_list("gazetteer"))
    assert entities._PERSON_BEFORE is by_name("entities")["PERSON_BEFORE"].compiled
    assert entities._PLACE_BEFORE is by_name("entities")["PLACE_BEFORE"].compiled
    assert entities._PERSON_AFTER is by_name("entities")["PERSON_AFTER"].compiled
    assert voice._ADVERBS == set(word_list("adverbs")) and voice._LABEL_WORDS == set(word_list("label_words"))
    assert voice._KEEP_VERB == set(word_list("same_in_third_person"))
    assert voice._SPECIAL_3RD == word_map("third_singular") and voice._PLURAL == word_map("plural_after_i")
    assert actions._LOOKING == set(word_list("looking_commands"))
    assert actions._FILE_ARGS == word_list("file_arguments") and actions._COMMAND_ARGS == word_list("command_arguments")
    assert applied._OBJECTS is by_name("events")["OBJECTION"].compiled
    assert voice._DECISION_OPENER is by_name("voice")["DECISION_OPENER"].compiled
    assert topics._DETERMINER == records.alternation("determiners")
    assert text._ABBREV.pattern == r"(?:\b" + records.alternation("abbreviations") + r"\.)$"
    assert replacements._BOILERPLATE is by_name("events")["BOILERPLATE"].compiled


def test_the_agent_tables_are_read_from_the_data() -> None:
    assert agent.FORMAT_WORDS == set(word_list("format_words"))
    assert agent._SUBCOMMANDS == set(word_list("subcommands")) and agent._CLI == list(word_list("cli_tools"))
    # the bare tools are the tools less the everyday English words: derived, not copied
    assert records._words_file()["cli_bare"]["base"] == "cli_tools" and "words" not in records._words_file()["cli_bare"]
    assert (
        agent._CLI_BARE == set(word_list("cli_bare"))
        and agent._CLI_BARE < set(agent._CLI)
        and "go" not in agent._CLI_BARE
    )
    assert set(agent._EXTENSIONS) == set(word_list("file_extensions"))
    assert agent.is_service(" servers are down") and not agent.is_service(" team is down")
    assert offline_events._ROLE_WORDS == set(word_list("role_words"))


@pytest.mark.parametrize(
    ("name", "word", "kind"),
    [
        ("org_suffixes", "Acme Labs", "org"),  # "Labs?" in the old pattern: both words are in the list
        ("org_suffixes", "Acme Lab.", "org"),
        ("place_suffixes", "Rocky Mountain", "place"),
        ("place_suffixes", "Blue Mountains", "place"),
    ],
)
def test_a_suffix_list_gives_a_name_its_kind(name: str, word: str, kind: str) -> None:
    assert word.rstrip(".").split()[-1] in word_list(name)
    assert entities._kind(word, "We met at ", ".", set()) == kind


def test_an_abbreviation_ends_no_sentence_and_an_opener_no_decision() -> None:
    assert text.split_sentences("Ask Dr. Okafor about it. Then ship.") == ["Ask Dr. Okafor about it.", "Then ship."]
    assert (
        voice.decision_what("Okay, so let's use Caddy for the proxy.", "Dana")
        == "Dana decided to use Caddy for the proxy."
    )


def test_a_name_with_a_connector_is_one_name() -> None:
    found = entities.find_entities(["We banked with Bank of America for years."], [])
    assert [h.name for h in found] == ["Bank of America"]
    assert "of" in word_list("name_connectors")


def test_a_word_table_maps_each_of_its_examples() -> None:
    raw = records._words_file()
    tables = [n for n, t in raw.items() if isinstance(t, dict) and "map" in t]
    assert set(tables) == {"third_singular", "plural_after_i", "object_pronouns", "first_mention", "continuing_forms"}
    for name in tables:
        table = raw[name]
        assert table["source"] and set(table["positives"]) <= set(word_map(name)), name
        assert not set(table["negatives"]) & set(word_map(name)), name
    assert voice._agree("have", singular=True) == "has" and voice._agree("was", singular=False) == "were"
    assert voice._NAMES_THE_SPEAKER == set(word_map("first_mention")) < set(word_map("object_pronouns"))


@pytest.mark.parametrize(
    ("sentence", "rewritten"),
    [
        ("My sister called me.", "Dana's sister called them."),  # named first by "my", then "them"
        ("I told my sister about it myself.", "Dana told their sister about it themselves."),
        ("That bike is mine.", "That bike is Dana's."),
    ],
)
def test_the_object_words_read_their_tables(sentence: str, rewritten: str) -> None:
    assert voice.third_person(sentence, "Dana") == rewritten


def test_a_continuing_form_reads_as_a_decision() -> None:
    what = voice.decision_what("We're sticking with Postgres for billing.", "Dana")
    assert what == "Dana decided to stick with Postgres for billing."


def test_a_missing_word_table_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"no table \[nope\] with a map"):
        word_map("nope")


def _record(context: str, pattern: str, anchored: bool = False) -> RuleRecord:
    return RuleRecord(
        id="x", name="X", type="entity", priority=0, pattern=pattern, vetoes=(), source="", positives=(),
        negatives=(), anchored=anchored, ignore_case=False, context=context,
    )  # fmt: skip


def test_a_rule_beside_a_name_fires_where_the_engine_applies_it() -> None:
    before = _record("before_name", r"\bmy sister\s+$")
    assert before.fires("Lunch with my sister Maya.")
    assert not before.fires("My sister had lunch with Maya.")  # "my sister" is not right before a name
    assert not before.fires("Lunch with my sister today.")
    after = _record("after_name", r"^\s+said\b", anchored=True)
    assert after.fires("Then Maya said no.")
    assert not after.fires("Then she said no to Maya.")
    assert _record("sentence", r"\bmy sister\s+$").fires("Lunch with my sister ")  # a sentence rule is searched


def test_an_unknown_context_is_refused_with_its_location() -> None:
    rule = {"id": "x", "name": "X", "type": "entity", "priority": 0, "context": "around", "vetoes": [], "source": "s"}
    rule |= {"pattern": ["a"], "positives": ["a", "a"], "negatives": ["b"]}
    with pytest.raises(ConfigError, match=r"x.toml rule 1 \(x\): context is one of sentence, before_name, after_name"):
        records.parse({"rule": [rule]}, "x.toml")
    assert records.parse({"rule": [rule | {"context": "after_name"}]}, "x.toml")[0].context == "after_name"


def test_the_boilerplate_and_objection_rules_do_what_their_stages_ask() -> None:
    assert replacements.core("The user decided to keep the cap at 50 MB.", set()) == "keep the cap at 50 MB."
    assert not applied.applied("Raised the cap to 50 MB, but the admins keep theirs.")
    assert applied.applied("Raised the cap to 50 MB.")
    assert re.fullmatch(r"\(\?:.*\)", records.alternation("name_connectors"))
