"""A specific (issue 48: one definition per concept): a number, a code span, an identifier, a name, a quoted value or
a day. The parts are data, one record each in ``rules/specifics.toml``; this module composes them, in code, into what
each stage of the offline extractor asks for. Every stage's definition is a named composition of the same parts;
where a stage needs a part another way (episode lines do not count "I" as a name), the variant is a record of its
own that says which base part it derives from and why (tests/unit/test_rule_specifics.py pins the difference)."""

from __future__ import annotations

import re

from jobs.extract.rules.records import RuleRecord, by_name

PARTS: dict[str, RuleRecord] = by_name("specifics")


def compose(*names: str) -> re.Pattern[str]:
    """The parts ``names`` as one case-sensitive alternation, in that order (the order decides what ``findall``
    counts: a digit first splits "3.11" into digits, an identifier first keeps it whole)."""
    return re.compile("|".join(PARTS[n].pattern for n in names))


# A sentence names a specific: the cues' condition ("specific_after"), an assistant's offer, a settled answer.
SPECIFIC = compose("DIGIT", "CODE_SPAN", "NAME", "IDENTIFIER")
# A sentence is about a system, not a feeling: the applied-reply and settled-answer stages.
TECHNICAL = compose("DIGIT", "CODE_SPAN", "ACRONYM_PLURAL", "HEADER_NAME", "IDENTIFIER")
# How much an episode line is worth (its count, up to 6): SPECIFIC's parts with names of two letters and more, and
# quoted values, which later questions ask about (jobs.extract.lines).
LINE_SPECIFIC = compose("DIGIT", "NAME_WORD", "IDENTIFIER", "CODE_SPAN", "QUOTED")
# What an assistant's reply can say back of a user's sentence (jobs.extract.rules.applied): whole numbers and tokens.
ECHO = compose("NUMBER", "CODE_SPAN", "TOKEN_IDENTIFIER", "ACRONYM")
NUMBER = PARTS["NUMBER"].compiled  # what a decision restated with other numbers changes (jobs.extract.replacements)
DAY = PARTS["DAY"].compiled  # a day a rule names, any case
CAPITALISED = PARTS["CAPITALISED"].compiled  # a capitalised word inside a sentence (the salience bonus)
# What a model's summary sentence names, each part captured (jobs.extract.grounding: the transcript must hold it).
SUMMARY_NAME = PARTS["SUMMARY_NAME"].compiled
