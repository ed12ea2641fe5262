"""Entities: capitalised names in English text, each with a kind (person, org, place ...) from its shape
and context. Capitals are weak evidence, so a candidate needs more than a capital letter."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.concepts import EntityKind
from jobs.extract.rules.agent import is_service
from jobs.extract.rules.dates import MONTHS, WEEKDAYS
from jobs.extract.rules.text import STOPWORDS, words

_NAME_WORD = r"(?:[A-Z][\w&'-]*[\w]|[A-Z]|[a-z]+[A-Z]\w*)"
_NAME_SEQ = re.compile(rf"{_NAME_WORD}(?:(?:\s+(?:of|de|la|van|von|&)\s+|\s+){_NAME_WORD}){{0,4}}")
_ORG_SUFFIX = re.compile(
    r"\b(?:Inc|Ltd|LLC|Corp|Corporation|Company|Co|GmbH|Group|Bank|University|College|"
    r"School|Foundation|Institute|Agency|Association|Club|Church|Hospital|Labs?|Studios?|"
    r"Systems|Technologies|Partners)\.?$"
)
_PLACE_SUFFIX = re.compile(
    r"\b(?:City|Street|St|Avenue|Ave|Road|Park|Lake|River|Beach|Island|Islands|Mountains?|"
    r"County|Valley|Bay|Airport|Canyon|Falls)\.?$"
)
_PRODUCT_AFTER = re.compile(r"^\s+(plan|tier|edition|subscription|package|license|app|model|card|account)\b")
_PROJECT = re.compile(r"^Project\b|\bProject$")
_PERSON_BEFORE = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof)\.?|\bmy (?:friend|sister|brother|mom|mum|dad|mother|father|wife|husband|partner|"
    r"son|daughter|boss|colleague|cousin|aunt|uncle|grandma|grandpa|grandmother|grandfather|neighbou?r|"
    r"roommate|coworker|manager|teacher|mentor|kid|friends)|\b(?:hey|hi|hello|thanks|thank you|dear|bye),?|"
    r"\b(?:I'm|I am|my name is|this is|named))\s+$",
    re.IGNORECASE,
)
# Bare "to/in/from" precede people ("send it to Katrin") and products ("in Snowflake") as often as places,
# so only travel and residence verbs count.
_PLACE_BEFORE = re.compile(
    r"\b(?:trip to|flew to|fly to|flying (?:to|into|out of)|travel(?:l?ed|l?ing)? to|"
    r"visit(?:ed|ing)?|live[sd]? in|living in|based in|back from|went to|go to|going to|arrived (?:in|at)|"
    r"stay(?:ed|ing)? in|born in|grew up in|vacation in|holiday in)\s+$",
    re.IGNORECASE,
)
_PERSON_AFTER = re.compile(
    r"^(?:,\s+(?:our|my|your|the|their) \w+|\s+(?:said|says|told|tells|asked|asks|thinks|thought|wants|wanted|"
    r"confirmed|approved|suggested|suggests|mentioned|replied|wrote|emailed|called|texted|agreed|promised|"
    r"is (?:our|my|your|their|the) \w+|was (?:our|my|your|their) \w+))\b"
)
_NOT_NAMES = frozenset(
    "I I'm I'll I've I'd OK Ok Okay Hey Hi Hello Thanks Thank Yes No Wow Oh Yeah Yep Nope Sure Great Cool Nice "
    "Awesome Lol Haha Omg Bye Please Sorry Well So And But Or The A An This That These Those It It's My Our Your "
    "We You He She They Mr Mrs Ms Dr Also Just Then Now Here There What When Where Why How Who Which "
    "Congrats Congratulations Agreed Absolutely Totally Definitely Good Happy Love Amazing Right Anyway Welcome "
    "Dear Morning Evening Afternoon Night Glad Sorry Hmm Ah Aw Yay Ooh Oops".split()
)
_CALENDAR = (
    frozenset(w.capitalize() for w in WEEKDAYS + MONTHS)
    | {"Today", "Tomorrow", "Yesterday"}
    | set("Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec".split())
)
_GAZETTEER = frozenset(
    "Paris London Berlin Rome Madrid Tokyo Beijing Sydney Toronto Vancouver Chicago Boston Seattle Austin "
    "Denver Miami Dallas Houston Atlanta Portland Brooklyn Manhattan California Texas Florida Oregon Washington "
    "Kyoto Osaka Seoul Singapore Dubai Amsterdam Barcelona Lisbon Prague Vienna Munich Hamburg Oslo Stockholm "
    "Copenhagen Helsinki Dublin Edinburgh Mumbai Delhi Bangalore Shanghai Bangkok Cairo Nairobi Lagos Melbourne "
    "Auckland Montreal Philadelphia Phoenix Nashville Istanbul Athens Warsaw Budapest Zurich Geneva Brussels "
    "Milan Venice Florence Naples Nara Hokkaido Bali Iceland Norway Peru Chile Argentina Colombia Egypt Kenya "
    "Nigeria Morocco Turkey Israel Russia Ukraine Indonesia Philippines Malaysia Taiwan Belgium Hungary "
    "Colorado Nevada Arizona Hawaii Alaska Canada Mexico Brazil France Germany Spain Italy Japan China India "
    "Australia England Ireland Scotland Sweden Norway Denmark Finland Netherlands Switzerland Austria Poland "
    "Greece Portugal Thailand Vietnam Korea Europe Asia Africa America USA UK NYC LA".split()
) | {
    "New York",
    "San Francisco",
    "Los Angeles",
    "New Zealand",
    "South Africa",
    "United States",
    "Las Vegas",
    "Hong Kong",
    "Mexico City",
    "San Diego",
    "New Orleans",
    "Buenos Aires",
    "Rio de Janeiro",
}


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
    return word in drop or word.lower() in STOPWORDS or word.lower() in {"of", "de", "la", "van", "von", "&"}


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
