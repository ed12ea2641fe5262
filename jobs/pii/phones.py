"""Detecting phone numbers (``[PHONE]``): international and national formats, judged by digit
count, grouping and the words before the number ("call", "mobile" versus "order", "invoice",
"ISBN"), so that dates, prices, versions and reference numbers survive."""

from __future__ import annotations

import re
from collections.abc import Iterator

from jobs.pii.detector import Clues, Finding

_PHONE = re.compile(
    r"(?<![\w@#$€£¥.,/+)-])(?<!\d[ .\-\u00a0])"  # start where a number starts, not inside a run
    r"(?P<num>(?:\+|00)?(?:\(\d{1,5}\)|\d)(?:[ \u00a0.\-]?(?:\(\d{1,5}\)|\d)){5,20}+)"
    r"(?P<ext>\s*(?:x|ext\.?|extension)\s*\d{1,6})?"
    r"(?![\w@/%$€£¥-]|[.,:]\d)"
)
# The last words before a number decide what it is. Strong phone words win over a farther
# "order"/"invoice" label; weak ones ("my number is") count only when no such label is near.
_PHONE_WORDS = frozenset(
    "phone phones telephone tel tél tel. mobile mob cell cellphone call calling fax whatsapp sms text ring dial"
    " landline hotline handy telefon telefono teléfono téléphone móvil movil portable reach".split()
)
_WEAK_PHONE_WORDS = frozenset("number numbers numéro número nummer contact".split())
_NOT_PHONE_WORDS = frozenset(
    "order orders invoice inv ticket case ref reference tracking parcel shipment account acct isbn issn sku serial"
    " part po id confirmation booking reservation customer member membership policy claim transaction receipt"
    " version build zip postcode postal routing sort swift bic iban batch lot model item product patent population"
    " total amount balance price cost revenue units rows records bytes ssn #".split()
)
_LABEL_TOKEN = re.compile(r"[^\W\d_]+\.?|#")
_UNIT_AFTER = re.compile(
    r"(?i)^\s*(?:%|‰|usd|eur|gbp|chf|jpy|dollars?|euros?|pounds?|€|\$|£|kg|g\b|km|m\b|mb|gb|tb|kb|ms|px"
    r"|items?|units?"
    r"|people|persons|times|words|tokens|rows|bytes|records|users|visits|views|downloads|points|votes|calories)"
)
_CURRENCY_BEFORE = re.compile(r"(?i)(?:[$€£¥₹]|\b(?:usd|eur|gbp|chf|jpy|inr|aud|cad|rs\.?))\s?$")


_DATE_PREFIX = re.compile(r"(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4})(?:\D|$)")


def _is_date(groups: list[str], seps: set[str]) -> bool:
    if seps - {"-", ".", " "} or len(groups) != 3:
        return False
    lengths = [len(g) for g in groups]
    if lengths[0] == 4 and lengths[1] <= 2 and lengths[2] <= 2:
        return 1 <= int(groups[1]) <= 12 and 1 <= int(groups[2]) <= 31
    if lengths[2] in (2, 4) and lengths[0] <= 2 and lengths[1] <= 2:
        a, b = int(groups[0]), int(groups[1])
        return (1 <= a <= 31 and 1 <= b <= 12) or (1 <= a <= 12 and 1 <= b <= 31)
    return False


def _label_distances(left: str) -> tuple[int | None, int | None, int | None]:
    """Distances from the number back to the nearest strong, weak and negative label among the
    last three words of ``left`` (None where there is none)."""
    found: list[int | None] = [None, None, None]
    for token in list(_LABEL_TOKEN.finditer(left))[-3:]:
        word = token.group().lower()
        distance = len(left) - token.start()
        for slot, words in enumerate((_PHONE_WORDS, _WEAK_PHONE_WORDS, _NOT_PHONE_WORDS)):
            if word in words or word.rstrip(".") in words:
                found[slot] = distance  # later tokens are nearer: keep overwriting
    return found[0], found[1], found[2]


def _labelled(left: str) -> bool | None:
    """Whether the words before the number call it a phone: True, False, or None (a negative label
    nearer than any phone word: not a phone at all)."""
    positive, weak, negative = _label_distances(left)
    if positive is None and negative is None:
        positive = weak
    labelled = positive is not None and (negative is None or positive < negative)
    if negative is not None and not labelled:
        return None
    return labelled


def _not_a_phone(text: str, m: re.Match[str], left: str, body: str, groups: list[str], intl: bool) -> bool:
    """What the context or the punctuation says is no phone: a price, a measure, a date, a version, a range."""
    seps = set(re.findall(r"[ \u00a0.\-]", body))
    if _CURRENCY_BEFORE.search(left) or _UNIT_AFTER.match(text[m.end() : m.end() + 12]):
        return True
    if _is_date(groups, seps) or _DATE_PREFIX.match(body):
        return True
    if len(seps) > 1 and not seps <= {" ", "-"} and not intl and "(" not in body:
        return True  # "1 299.00", "12.345-6": mixed punctuation is a number, not a phone
    if "." in seps and not intl and any(len(g) == 1 for g in groups):
        return True  # version strings: 10.0.19041.1
    return len(groups) == 2 and all(len(g) == 4 and g[:2] in ("19", "20") for g in groups)  # years: 2019-2023


def _grouped_national(groups: list[str], digits: str, labelled: bool) -> bool:
    """A national number written in groups (7 to 12 digits, no country code)."""
    if len(groups[-1]) == 1:
        return False  # ISBN-10 and check-digit codes end in one digit
    if len(groups[0]) == 1 and groups[0] not in ("0", "1"):
        return False
    if len(groups) >= 3 and all(len(g) == 4 for g in groups):
        return False  # 1234-5678-9012: a code, not a phone
    if all(len(g) == 3 for g in groups[1:]) and len(groups[0]) <= 3 and not groups[0].startswith("0"):
        return labelled  # 100 000 000 reads as a thousands-grouped number
    if any(len(g) > 5 for g in groups) and not (len(groups) == 2 and groups[0].startswith(("0", "("))):
        return labelled
    return labelled or len(digits) > 8


def _phone_ok(text: str, m: re.Match[str]) -> bool:
    raw = m.group("num")
    if raw.startswith(("+0", "000")):
        return False  # no country code starts with 0: a zero-padded code (GTIN, account), not a phone
    intl = raw.startswith(("+", "00"))
    body = raw[1:] if raw.startswith("+") else raw[2:] if raw.startswith("00") else raw
    digits = re.sub(r"\D", "", body)
    groups = [g for g in re.split(r"[ \u00a0.\-()]+", body) if g]
    left = text[max(0, m.start() - 40) : m.start()]
    if left.endswith(":") and left[-2:-1].isdigit():
        return False  # the tail of a time: 10:30 5551234
    labelled = _labelled(left)
    if labelled is None or _not_a_phone(text, m, left, body, groups, intl):
        return False
    if intl:
        return 8 <= len(digits) <= 15 and len(groups) <= 7
    if not 7 <= len(digits) <= 12:
        return False
    if len(groups) > 1:
        return _grouped_national(groups, digits, labelled)
    # One bare run of digits: only with a label, or a national trunk prefix (0 then 9-10 digits).
    if labelled:
        return True
    return raw.startswith("0") and not raw.startswith("00") and len(digits) in (10, 11)


def find_phones(text: str, clues: Clues) -> Iterator[Finding]:
    """``PHONE`` findings: numbers that :func:`_phone_ok` judges phones by shape and label."""
    if clues.digits < 6:
        return  # _PHONE's number is six or more units, each \d or (\d{1,5})
    for m in _PHONE.finditer(text):
        if _phone_ok(text, m):
            yield Finding("PHONE", m.start(), m.end())
