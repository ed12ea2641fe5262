"""The offline extractor's weights and thresholds are data (issue 48): jobs/extract/rules/values.toml holds each with
what it weighs and where it came from; the engine reads every one of them by its id, and each module holds the value
its record gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobs.errors import ConfigError
from jobs.extract import lines, offline, offline_events, replacements
from jobs.extract.rules import salience, values
from jobs.extract.rules.values import count, value, value_map

ROOT = Path(__file__).resolve().parents[2]
RECORDS = values.load()


def _engine_source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "jobs" / "extract").rglob("*.py"))


@pytest.mark.parametrize("record", list(RECORDS.values()), ids=list(RECORDS))
def test_every_value_says_what_it_weighs_and_where_it_came_from(record: values.Value) -> None:
    assert len(record.weighs) > 10
    assert re.search(r"\b[0-9a-f]{7}\b", record.source), "name the commit that set it (git log -S)"


def test_every_value_is_read_by_the_engine() -> None:
    source = _engine_source()
    read = set(re.findall(r"""\b(?:value|count|value_map)\(\s*f?["']([\w.{}]+)["']""", source))
    read |= {f"importance.{k}" for k in ("base", "density", "per_entity", "floor", "ceiling")}  # read in a loop
    assert set(RECORDS) - read == set(), "a value nobody reads: remove its record or read it"
    assert {r for r in read if "{" not in r} <= set(RECORDS)


def test_the_modules_hold_the_values_of_their_records() -> None:
    assert replacements.REPLACE_SIMILARITY == 0.45 == value("replace.similarity")
    assert replacements.AMEND_SIMILARITY == value("replace.amend_similarity")
    assert replacements.RESTATE_SIMILARITY == value("replace.restate_similarity")
    assert replacements.NEW_RULE_SIMILARITY == value("replace.new_rule_similarity")
    assert lines.ACTION_WEIGHT == {"write": 4.0, "edit": 4.0, "command": 3.0, "read": 1.0}
    assert offline_events.EVENT_WEIGHT == value_map("events.weight")
    assert offline.RESOLVE_SIMILARITY == {"commitment": 0.6, "open_question": 0.65}
    assert (offline.TFIDF_WEIGHT, offline.NARRATION_PENALTY) == (value("offline.tfidf_weight"), 0.5)
    assert salience._LENGTH_WEIGHT == (1.0, 1.6, 1.8)
    assert isinstance(count("salience.content_words_counted"), int)


def test_the_weights_score_a_sentence_as_they_say() -> None:
    plain = salience.lexical_score("the weather was fine all week long here", by_assistant=False)
    named = salience.lexical_score("the weather was fine all week long in Lisbon", by_assistant=False)
    asked = salience.lexical_score("was the weather fine all week long here?", by_assistant=False)
    assert named - plain == pytest.approx(value("salience.capitalised") + value("salience.per_content_word"))
    assert asked - plain == pytest.approx(value("salience.question"))


def test_importance_is_read_from_the_records() -> None:
    assert offline._importance([], 10, 0) == value("importance.base")
    assert offline._importance([], 10, 50) == round(value("importance.base") + 5 * value("importance.per_entity"), 2)


@pytest.mark.parametrize(
    ("record", "error"),
    [
        ({"id": "x", "weighs": "w", "source": "s"}, "give a number as 'value' or a table of numbers as 'map'"),
        ({"id": "x", "weighs": "w", "source": "s", "value": 1, "map": {"a": 1}}, "one of them"),
        ({"id": "x", "weighs": "w", "source": "s", "value": "high"}, "give a number"),
        ({"id": "x", "weighs": "w", "source": "s", "map": {"a": "b"}}, "every entry of 'map' is a number"),
        ({"id": "x", "value": 1}, "what it weighs and where it came from"),
    ],
)
def test_a_bad_value_is_refused_with_its_location(record: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError, match=rf"v.toml value 1 \(x\): .*{re.escape(error)}"):
        values.parse({"value": [record]}, "v.toml")


def test_a_value_read_the_wrong_way_is_refused() -> None:
    with pytest.raises(ConfigError, match="no value 'nope'"):
        value("nope")
    with pytest.raises(ConfigError, match="is a map; read it with value_map"):
        value("lines.action_weight")
    with pytest.raises(ConfigError, match="is a single value"):
        value_map("replace.similarity")
    with pytest.raises(ConfigError, match="not a whole number"):
        count("replace.similarity")
