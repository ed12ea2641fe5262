"""Entities: capitalised names in English text, each with a kind (person, org, place ...) from its shape
and context. Capitals are weak evidence, so a candidate needs more than a capital letter."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.concepts import EntityKind
from jobs.extract.rules.agent import is_service
from jobs.extract.rules.records import alternation, by_name, word_list
from jobs.extract.rules.text import CALENDAR_WORDS, STOPWORDS, words

_NAME_WORD = r"(?:[A-Z][\w&'-]*[\w]|[A-Z]|[a-z]+[A-Z]\w*)"
_CONNECTORS = frozenset(word_list("name_connectors"))  # "Bank of America": rules/words.toml [name_connectors]
_NAME_SEQ = re.compile(rf"{_NAME_WORD}(?:(?:\s+{alternation('name_connectors')}\s+|\s+){_NAME_WORD}){{0,4}}")
# The words that give a name its kind are data (rules/words.toml); the engine reads each as a pattern here.
_ORG_SUFFIX = re.compile(r"\b" + alternation("org_suffixes") + r"\.?$")  # "Acme Labs", "Northwind Ltd."
_PLACE_SUFFIX = re.compile(r"\b" + alternation("place_suffixes") + r"\.?$")  # "Central Park"
_PRODUCT_AFTER = re.compile(r"^\s+(" + "|".join(map(re.escape, word_list("product_words"))) + r")\b")  # "the Team plan"
_PROJECT = re.compile(r"^Project\b|\bProject$")
_CONTEXT = by_name("entities")  # the context rules are data: rules/entities.toml
_PERSON_BEFORE = _CONTEXT["PERSON_BEFORE"].compiled  # "my sister Maya", "Dr. Okafor", "Hey Jon"
_PLACE_BEFORE = _CONTEXT["PLACE_BEFORE"].compiled  # "flew to Lisbon", "based in Tallinn"
_PERSON_AFTER = _CONTEXT["PERSON_AFTER"].compiled  # "Ingrid, our release manager", "Melanie said"
_NOT_NAMES = frozenset(word_list("not_names"))  # capitalised chat words: rules/words.toml [not_names]
_CALENDAR = frozenset(w.capitalize() for w in CALENDAR_WORDS)  # "Friday", "Sept", "Today" (rules/words.toml)
_GAZETTEER = frozenset(word_list("gazetteer"))  # places known by name: rules/words.toml [gazetteer]


@dataclass
class EntityHit:
    name: str
    kind: EntityKind
    count: int
    first: int  # position of the first mention (global sentence order) for stable ranking


def find_entities(sentences: list[str], speakers: Iterable[str]) -> list[EntityHit]:
    """Capitalised names, with a kind from simple context rules, most mentioned first.

    Capitals are weak evidence on their own, so: a word the transcript also writes in lowercase
    ("Settings" / "settings", "Team" / "team") is not a name, nor is a sentence-initial word
    unless it shows up mid-sentence or has a name's shape (CamelCase, digits, a company suffix,
    several words); acronyms need two mentions and rank last.
    """
    speaker_set = {s for s in speakers if s}
    drop = _NOT_NAMES | _CALENDAR
    lowercase = {w for text in sentences for w in words(text) if w[0].islower()}
    hits: dict[str, EntityHit] = {}
    kinds: dict[str, list[EntityKind]] = {}
    mid_sentence: set[str] = set()
    for pos, sentence in enumerate(sentences):
        for m in _NAME_SEQ.finditer(sentence):
            parts = [(w.group(0), m.start() + w.start()) for w in re.finditer(r"\S+", m.group(0))]
            while parts and (
                _not_name(parts[0][0], drop)
                or (
                    len(parts) > 1
                    and parts[0][0].lower() in lowercase
                    and not re.search(r"[A-Za-z]", sentence[: parts[0][1]])
                )
            ):
                parts = parts[1:]  # "Open Settings" at a sentence start, with "open" written elsewhere
            while parts and _not_name(parts[-1][0], drop):
                parts = parts[:-1]
            if not parts:
                continue
            begin, end = parts[0][1], parts[-1][1] + len(parts[-1][0])
            name = sentence[begin:end]
            if name.endswith("'s"):
                name, end = name[:-2], end - 2
            kind = _kind(name, sentence[:begin], sentence[end:], speaker_set)
            if product := _PRODUCT_AFTER.match(sentence[end:]):  # "the Team plan"
                name, end = name + product.group(0), end + len(product.group(0))
            if len(name) < 2 or len(name) > 120:
                continue
            if re.search(r"[A-Za-z]", sentence[:begin]):
                mid_sentence.add(name)
            kinds.setdefault(name, []).append(kind)
            hit = hits.setdefault(name, EntityHit(name, "other", 0, pos))
            hit.count += 1
    for name in [n for n in hits if n not in mid_sentence and " " in n]:
        rest = name.split(" ", 1)[1]
        if rest in hits:  # "Ask Nadia" opening a sentence, "Nadia" elsewhere: the name is "Nadia"
            gone = hits.pop(name)
            hits[rest].count += gone.count
            hits[rest].first = min(hits[rest].first, gone.first)
            kinds[rest] += kinds[name]
            mid_sentence.add(rest)
    out = []
    for name, hit in hits.items():
        acronym = name.isupper() and " " not in name
        shape = bool(
            _ORG_SUFFIX.search(name)
            or re.search(r"[a-z][A-Z]|\d", name)
            or name in speaker_set
            or name in _GAZETTEER
            or " " in name
            or _PROJECT.search(name)
        )
        if (name not in mid_sentence and not shape) or (acronym and (hit.count < 2 or len(name) > 6)):
            continue
        if " " not in name and name.lower() in lowercase and not shape:
            continue
        hit.kind = min(kinds[name], key=KIND_PRIORITY.index)
        out.append(hit)
    out.sort(key=lambda h: (h.name.isupper(), -h.count, h.first, h.name))
    return out


def _not_name(word: str, drop: frozenset[str]) -> bool:
    if _ORG_SUFFIX.search(word):  # "Ltd" is a stopword for tags, but part of "Smith & Sons Ltd"
        return False
    return word in drop or word.lower() in STOPWORDS or word.lower() in _CONNECTORS


# Which kind a name found as several takes, first wins; every kind of jobs.concepts.ENTITY_KINDS.
KIND_PRIORITY: tuple[EntityKind, ...] = ("person", "org", "project", "product", "place", "other")


def _kind(name: str, before: str, after: str, speakers: set[str]) -> EntityKind:
    if name in speakers or name.split()[0] in speakers:
        return "person"
    if _ORG_SUFFIX.search(name):
        return "org"
    if _PROJECT.search(name):
        return "project"
    if _PRODUCT_AFTER.match(after) or re.search(r"[a-z][A-Z]|\d", name) or is_service(after):
        return "product"
    if _PLACE_SUFFIX.search(name) or name in _GAZETTEER:
        return "place"
    if _PERSON_BEFORE.search(before) or _PERSON_AFTER.match(after):
        return "person"
    if _PLACE_BEFORE.search(before):
        return "place"
    return "other"
