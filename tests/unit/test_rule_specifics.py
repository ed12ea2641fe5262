"""One definition of "a specific" (issue 48): every stage's definition is composed from the parts in
jobs/extract/rules/specifics.toml, and where a stage's part is a variant of a base part, the difference is pinned
here so that editing one without the other fails."""

from __future__ import annotations

import re

import pytest

from jobs.extract import grounding, lines, offline_events, replacements
from jobs.extract.rules import applied, cues, salience, specifics, text
from jobs.extract.rules.specifics import PARTS, compose


def test_every_stage_reads_the_composed_definition() -> None:
    uses = {
        cues: {"SPECIFIC": specifics.SPECIFIC, "TECHNICAL": specifics.TECHNICAL},
        offline_events: {"SPECIFIC": specifics.SPECIFIC, "TECHNICAL": specifics.TECHNICAL},
        lines: {"_SPECIFIC": specifics.LINE_SPECIFIC},
        applied: {"ECHO": specifics.ECHO, "DAY": specifics.DAY, "NUMBER": specifics.NUMBER},
        replacements: {"NUMBER": specifics.NUMBER},
        salience: {"CAPITALISED": specifics.CAPITALISED},
        grounding: {"_NAMED": specifics.SUMMARY_NAME},
    }
    for module, names in uses.items():
        assert all(vars(module)[name] is pattern for name, pattern in names.items()), module.__name__
    assert text.DIGIT.pattern == PARTS["DIGIT"].pattern


def test_the_stages_share_their_parts() -> None:
    base = {"DIGIT", "CODE_SPAN", "IDENTIFIER"}  # in SPECIFIC, TECHNICAL and LINE_SPECIFIC alike
    for pattern in (specifics.SPECIFIC, specifics.TECHNICAL, specifics.LINE_SPECIFIC):
        assert all(PARTS[n].pattern in pattern.pattern.split("|") for n in base)
    assert specifics.ECHO.pattern.startswith(PARTS["NUMBER"].pattern + "|" + PARTS["CODE_SPAN"].pattern)


@pytest.mark.parametrize(
    ("variant", "base", "both", "variant_only", "base_only"),
    [
        # names in episode lines: two letters and more, also after ; and :, never after a digit or a capital
        ("NAME_WORD", "NAME", "We chart it in Grafana.", "The dog's name: Biscuit.", "Then I chart it."),
        # the salience bonus: a capital then a lowercase letter; "I" and acronyms are not names there
        ("CAPITALISED", "NAME", "We flew to Lisbon.", "", "So I called the API."),
        # what a reply echoes: the whole token, with = too
        ("TOKEN_IDENTIFIER", "IDENTIFIER", "Use feature/x here.", "Set concurrency=4 now.", "Use v1.x here."),
        # TECHNICAL's acronyms: plurals, no digits
        ("ACRONYM_PLURAL", "ACRONYM", "Run it in CI.", "Both APIs return JSON", "Store it in S3."),
        # a whole number: every number holds a digit, and only them
        ("NUMBER", "DIGIT", "Cap it at 1,000.", "", ""),
    ],
)
def test_a_variant_differs_from_its_base_only_where_it_says(
    variant: str, base: str, both: str, variant_only: str, base_only: str
) -> None:
    v, b = PARTS[variant].compiled, PARTS[base].compiled
    assert v.search(both) and b.search(both)
    if variant_only:
        assert [m.group() for m in v.finditer(variant_only)] != [m.group() for m in b.finditer(variant_only)]
    if base_only:
        assert b.search(base_only) and not v.search(base_only)
    assert variant in PARTS and f"derived from specific.{base.lower()}" in PARTS[variant].source


def test_order_decides_what_a_line_counts() -> None:
    # a digit first: "3.11" is three specifics in a line's worth, as before; an identifier first would be one
    assert len(specifics.LINE_SPECIFIC.findall("Python 3.11")) == 3
    assert len(compose("IDENTIFIER", "DIGIT").findall("Python 3.11")) == 1


def test_a_reply_echoes_a_number_with_its_thousands_separator_whole() -> None:
    """One number (specific.number) for the echo and for the later-wins rule: "1,000" is one specific, not two (it
    was "1" and "000" in applied.py while replacements.py read "1,000")."""
    assert "1,000" in applied.specifics("Cap the export at 1,000 rows.")
    assert "000" not in applied.specifics("Cap the export at 1,000 rows.")
    assert applied.specifics("Cap the export at 1,000 rows.") & {"1,000"} == replacements._specifics("at 1,000 rows")


def test_has_number_is_a_digit() -> None:
    assert text.has_number("£5") and text.has_number("v2") and not text.has_number("five")
    assert re.fullmatch(r"\\d", text.DIGIT.pattern)


def test_a_summary_name_differs_from_its_parts_only_where_it_says() -> None:
    """specific.summary_name (jobs.extract.grounding) composes the code span, identifier, number and name parts with
    three differences, pinned here: the whole dotted token, no ':' inside a number, and any capitalised word."""
    named = specifics.SUMMARY_NAME
    assert [m.group(2) for m in named.finditer("Edit jobs.extract.rules now")] == [None, "jobs.extract.rules"]
    assert PARTS["IDENTIFIER"].compiled.findall("jobs.extract.rules") == ["jobs.extract"]
    assert [m.group(3) for m in named.finditer("at 17:00")] == ["17", "00"]
    assert PARTS["NUMBER"].compiled.findall("at 17:00") == ["17:00"]
    assert named.match("Caroline joined.") and not PARTS["NAME"].compiled.match("Caroline joined.")
    assert [m.group(1) for m in named.finditer("set `pool_size` to 4")] == ["pool_size", None]
    assert "derived from specific.code, specific.identifier, specific.number and specific.name" in (
        PARTS["SUMMARY_NAME"].source
    )
