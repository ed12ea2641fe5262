"""PII redaction before anything derived from a transcript is sent to a model or stored.

Detected and replaced by typed placeholders, each validated beyond its shape:

- ``[EMAIL]`` e-mail addresses, also ``name [at] host [dot] com``; ``icon@2x.png`` is not one.
- ``[PHONE]`` international (``+44 20 7946 0958``, ``0044 …``) and national formats
  (``(555) 123-4567``, ``020 7946 0958``, ``06 12 34 56 78``), judged by digit count, grouping
  and the words before the number ("call", "mobile" versus "order", "invoice", "ISBN").
- ``[CARD]`` payment card numbers of 13-19 digits, bare or grouped by spaces or dashes, that pass
  the Luhn check and start like an issuer's number.
- ``[IBAN]`` IBANs, bare or in groups of four, of the country's length, passing the mod-97 check.
- ``[SECRET]`` API keys and tokens by their known prefixes (``sk-…``, ``sk-ant-…``, ``AKIA…``,
  ``ghp_…``, ``xox…-``, JWTs, ``Bearer …``, private key blocks), values after key / token /
  secret / password / PIN labels when they look like a secret rather than a word, and card
  security codes.
- ``[IP]`` IPv4 and IPv6 addresses (validated by :mod:`ipaddress`); ``version 1.2.3.4`` is not one.

What is deliberately *not* redacted: dates, times, prices, order / invoice / ticket numbers,
ISBNs, version strings, UUIDs, commit hashes and other unlabelled hex strings (identifiers that
support conversations are full of and that carry no personal data on their own), card numbers
failing the Luhn check, and names and postal addresses (no pattern can find those reliably).

Precision matters as much as recall here: a false positive destroys an order number the episode
needed. ``tests/redaction_corpus.py`` is the labelled yardstick; ``tests/test_redact.py`` prints
precision and recall per type.

Redaction is on by default. ``EPISODES_REDACT=false`` turns it off; the variable is read at every
call (so tests and callers can change it), and every function takes ``enabled=`` to override it.
"""

from __future__ import annotations

import bisect
import dataclasses
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from jobs.models import Message, Transcript

KINDS = ("SECRET", "EMAIL", "IBAN", "CARD", "IP", "PHONE")  # also the priority when detections overlap
PLACEHOLDER = {kind: f"[{kind}]" for kind in KINDS}

@dataclass(frozen=True)
class Finding:
    """One detected span: ``text[start:end]`` is replaced by ``PLACEHOLDER[kind]``."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Redacted:
    """The redacted text and how many spans of each kind were replaced."""

    text: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# ------------------------------------------------------------------------------------------------
# Prefilter: cheap facts about a text that prove patterns cannot match it
# ------------------------------------------------------------------------------------------------

_DIGIT = re.compile(r"\d")
_ASCII_DIGITS = b"0123456789"


def _contains_any(text: str, needles: Iterable[str]) -> bool:
    for needle in needles:  # a plain loop: about twice as fast as any() over a generator
        if needle in text:
            return True
    return False


def _count_digits(text: str) -> int:
    """How many characters of ``text`` match ``\\d``, as the patterns use it (Unicode digits too)."""
    if text.isascii():  # the only ASCII characters \d matches are 0-9; bytes.translate counts them fast
        return len(text) - len(text.encode("ascii").translate(None, _ASCII_DIGITS))
    return len(_DIGIT.findall(text))


class _Clues(NamedTuple):
    """Facts about one text, computed once per :func:`find`, that let detectors skip patterns.

    Most messages hold no PII, and running every pattern over one costs 50-100 µs. Each
    test below is a necessary condition read off the pattern it guards, so a skipped pattern is one
    that could not have matched, and no finding changes: a pattern that needs n digits (``\\d{2}``,
    thirteen card digits, four IPv4 octets) cannot match a text with fewer, one that needs three
    dots or two colons cannot match a text with fewer, and one that needs a word cannot match a
    text without it (see :meth:`may_contain` and :meth:`may_match`).

    The word tests look at the lower-cased text, and are exact for ASCII text only: ``(?i)`` also
    matches non-ASCII look-alikes that str.lower() does not turn into the ASCII letter (long s 'ſ'
    matches 's', dotted 'İ' matches 'i'), so a non-ASCII text is never ruled out by them.
    """

    lowered: str
    ascii: bool
    digits: int

    @classmethod
    def of(cls, text: str) -> _Clues:
        return cls(text.lower(), text.isascii(), _count_digits(text))

    def may_contain(self, words: Iterable[str]) -> bool:
        """False only when a case-insensitive pattern that needs one of ``words`` cannot match."""
        return not self.ascii or _contains_any(self.lowered, words)

    def may_match(self, lower_case: re.Pattern[str]) -> bool:
        """False only when a case-insensitive pattern that needs what ``lower_case`` finds (in the
        lower-cased text) cannot match."""
        return not self.ascii or lower_case.search(self.lowered) is not None


# ------------------------------------------------------------------------------------------------
# Secrets
# ------------------------------------------------------------------------------------------------

# Each pattern with the literal(s) it cannot match without: a cheap substring test skips the scan.
_SECRET_PATTERNS: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    (("sk-",), re.compile(r"(?<![\w-])sk-(?:ant-|proj-|live-|test-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    (("k_live_", "k_test_"), re.compile(r"(?<![\w-])[spr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    (("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
     re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![A-Za-z0-9])")),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"(?<![\w-])gh[pousr]_[A-Za-z0-9]{30,}")),
    (("github_pat_",), re.compile(r"(?<![\w-])github_pat_[A-Za-z0-9_]{22,}")),
    (("glpat-",), re.compile(r"(?<![\w-])glpat-[A-Za-z0-9_-]{20,}")),
    (("xox",), re.compile(r"(?<![\w-])xox[abposre]-[A-Za-z0-9-]{10,}")),
    (("AIza",), re.compile(r"(?<![\w-])AIza[0-9A-Za-z_-]{35}")),
    (("eyJ",), re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),  # JWT
    (("hooks.slack.com",), re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}")),
]
# Every literal above contains one of these seven marks, so a text without any of them cannot match
# a pattern above and skips the twenty literal tests; the assert keeps this true as patterns are added.
_SECRET_MARKS = ("_", "A", "sk-", "glpat-", "xox", "eyJ", "hooks.slack.com")
assert all(_contains_any(h, _SECRET_MARKS) for hints, _ in _SECRET_PATTERNS for h in hints)
_LABEL_HINTS = ("key", "token", "secret", "pass", "pwd", "pin", "cvv", "cvc", "csc", "security code", "bearer",
                "basic")
# Authorization headers and "Bearer <token>": only the credential is replaced.
_AUTH_HEADER = re.compile(r"(?i)(?<![\w-])(?:bearer|basic|token)\s+(?P<value>[A-Za-z0-9\-._~+/]{12,}=*)")
_SECRET_LABEL = (
    r"(?:api[_\- ]?key|apikey|api[_\- ]?secret|access[_\- ]?key(?:[_\- ]?id)?|secret(?:[_\- ]?(?:access[_\- ]?)?key)?"
    r"|client[_\- ]?secret|(?:auth|access|refresh|session|bearer|api|bot)[_\- ]?token|token|private[_\- ]?key"
    r"|signing[_\- ]?key|webhook[_\- ]?secret"
    r"|(?P<pw>password|passwd|passphrase|passcode|pwd|pin))"
)
_LABELLED = re.compile(
    rf"(?i)(?<![A-Za-z0-9]){_SECRET_LABEL}(?![A-Za-z0-9])[\"']?"
    r"(?:(?P<tight>[:=])(?=[^\s:=])|\s*(?:[:=]|=>|->)\s*|\s+(?:is|was|=|:)\s+|\s*:\s*)"
    r"[\"'`]?(?P<value>[^\s\"'`,;<>()\[\]{}]{4,512})"
)
# Card verification codes: "CVV 123", "security code: 4821".
_CVV = re.compile(r"(?i)(?<![A-Za-z0-9])(?:cvv2?|cvc2?|csc|card\s+security\s+code|security\s+code)\W{0,3}"
                  r"(?:is\s+|was\s+)?(?P<value>\d{3,4})(?!\d)")
_WORDY = re.compile(r"^[A-Za-z][a-z]*[.!?]?$")  # a plain word: "expired", "incorrect", "Required"
# What each case-insensitive pattern above cannot match without, in lower case (see _Clues). Every
# alternative of _AUTH_HEADER and _CVV contains one of its words. Every _SECRET_LABEL ends in one of
# _LABEL_END's words ("keyid" for "accesskeyid") followed, as _LABELLED requires, by neither letter nor
# digit; that rules out prose which passes the _LABEL_HINTS test ("helping", "passion", "monkey").
_AUTH_HEADER_WORDS = ("bearer", "basic", "token")
_CVV_WORDS = ("cvv", "cvc", "csc", "security")  # "security code" may be split by any \s+
_LABEL_END = re.compile(r"(?:keyid|key|secret|token|password|passwd|passphrase|passcode|pwd|pin)(?![a-z0-9])")


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_like_secret(value: str, password: bool) -> bool:
    value = value.rstrip(".?")
    if password:
        # Passwords are often short and weak; anything that is not a plain word counts.
        return len(value) >= 4 and not _WORDY.match(value) and any(c.isalnum() for c in value)
    if len(value) < 16 or _WORDY.match(value):
        return False
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^A-Za-z0-9]"))
    if re.fullmatch(r"[0-9a-fA-F]{16,}", value):
        return True
    return classes >= 2 and any(c.isdigit() for c in value) and _entropy(value) >= 3.0


_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z ]{0,40}PRIVATE KEY-----")
PEM_MAX_CHARS = 20_000


def _pem_blocks(text: str) -> Iterator[Finding]:
    """Private key blocks, BEGIN to the next END at most PEM_MAX_CHARS later; linear in the text."""
    ends = list(_PEM_END.finditer(text))
    starts = [m.start() for m in ends]
    covered = 0
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < covered:
            continue
        i = bisect.bisect_left(starts, begin.end())
        if i < len(ends) and starts[i] - begin.end() <= PEM_MAX_CHARS:
            yield Finding("SECRET", begin.start(), ends[i].end())
            covered = ends[i].end()


def _secrets(text: str, clues: _Clues) -> Iterator[Finding]:
    if "PRIVATE KEY" in text:
        yield from _pem_blocks(text)
    if _contains_any(text, _SECRET_MARKS):
        yield from _prefixed_secrets(text)
    if not _contains_any(clues.lowered, _LABEL_HINTS):
        return
    if clues.may_contain(_AUTH_HEADER_WORDS):
        for m in _AUTH_HEADER.finditer(text):
            value = m.group("value")
            if any(c.isdigit() for c in value) or len(value) >= 20:
                yield Finding("SECRET", m.start("value"), m.end("value"))
    if clues.digits >= 3 and clues.may_contain(_CVV_WORDS):  # the code is \d{3,4}
        for m in _CVV.finditer(text):
            yield Finding("SECRET", m.start("value"), m.end("value"))
    if clues.may_match(_LABEL_END):
        yield from _labelled_secrets(text)


def _prefixed_secrets(text: str) -> Iterator[Finding]:
    for hints, pattern in _SECRET_PATTERNS:
        if _contains_any(text, hints):
            for m in pattern.finditer(text):
                yield Finding("SECRET", m.start(), m.end())


def _labelled_secrets(text: str) -> Iterator[Finding]:
    for m in _LABELLED.finditer(text):
        value = m.group("value")
        password = m.group("pw") is not None
        if password and m.group("tight") and len(value) >= 4 and any(c.isalnum() for c in value):
            # Configuration syntax (password=letmein, PASSWORD:hunter): any value is the password.
            yield Finding("SECRET", m.start("value"), m.start("value") + len(value.rstrip(".?")))
        elif _looks_like_secret(value, password=password):
            end = m.start("value") + len(value.rstrip(".?"))
            yield Finding("SECRET", m.start("value"), end)


# ------------------------------------------------------------------------------------------------
# E-mail
# ------------------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+'-])[\w%+-][\w.%+'-]{0,63}@(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.){1,8}(?P<tld>[^\W\d_]{2,24})(?![\w-])"
)
_EMAIL_OBFUSCATED = re.compile(
    r"(?i)(?<![\w.+-])[\w.+-]{1,64}\s*[\[(]\s*at\s*[\])]\s*[\w-]{1,63}(?:\s*[\[(]\s*dot\s*[\])]\s*[\w-]{1,63}){1,4}"
)
_FILE_TLDS = {"png", "jpg", "jpeg", "gif", "svg", "webp", "pdf", "js", "css", "ts", "py", "md", "txt", "ico"}


def _emails(text: str, clues: _Clues) -> Iterator[Finding]:
    if "@" in text:
        for m in _EMAIL.finditer(text):
            if m.group("tld").lower() not in _FILE_TLDS:
                yield Finding("EMAIL", m.start(), m.end())
    if "at]" in clues.lowered or "at)" in clues.lowered:
        for m in _EMAIL_OBFUSCATED.finditer(text):
            yield Finding("EMAIL", m.start(), m.end())


# ------------------------------------------------------------------------------------------------
# IBAN
# ------------------------------------------------------------------------------------------------

_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21,
    "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18,
    "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23,
    "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27,
    "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29,
    "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24, "TR": 26,
    "UA": 29, "VG": 24, "XK": 20,
}
_IBAN = re.compile(r"(?<![A-Za-z0-9])(?:[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]){11,30}|[a-z]{2}\d{2}(?:[ -]?[a-z0-9]){11,30})")


def _mod97(iban: str) -> bool:
    rearranged = iban[4:] + iban[:4]
    try:
        return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1
    except ValueError:
        return False


def _ibans(text: str, clues: _Clues) -> Iterator[Finding]:
    if clues.digits < 2:
        return  # every IBAN has its two check digits, \d{2}
    for m in _IBAN.finditer(text):
        raw = m.group()
        positions = [i for i, c in enumerate(raw) if c not in " -"]
        compact = "".join(raw[i] for i in positions).upper()
        length = _IBAN_LENGTHS.get(compact[:2])
        lengths = [length] if length else range(min(len(compact), 34), 14, -1)
        for n in lengths:
            if n > len(compact):
                continue
            end = m.start() + positions[n - 1] + 1
            if end < len(text) and text[end].isalnum():
                continue  # the IBAN would end inside a word
            if _mod97(compact[:n]):
                yield Finding("IBAN", m.start(), end)
                break


# ------------------------------------------------------------------------------------------------
# Payment cards
# ------------------------------------------------------------------------------------------------

_CARD = re.compile(r"(?<![\w+\-.,/])(?<!\d )\d(?:[ -]?\d){12,18}+(?![\w\-/]|[.,]\d)")


_IBAN_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}[ -]?$")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cards(text: str, clues: _Clues) -> Iterator[Finding]:
    if clues.digits < 13:
        return  # _CARD matches 13 to 19 \d
    for m in _CARD.finditer(text):
        raw = m.group()
        digits = re.sub(r"\D", "", raw)
        if not (13 <= len(digits) <= 19) or digits[0] not in "23456" or not luhn_ok(digits):
            continue
        if _IBAN_HEAD.search(text, max(0, m.start() - 6), m.start()):
            continue  # the tail of an IBAN that failed its check, not a card
        separators = set(re.findall(r"[ -]", raw))
        if len(separators) > 1:
            continue
        if separators:
            groups = [len(g) for g in re.split(r"[ -]", raw)]
            if groups[0] != 4 or any(not 4 <= g <= 6 for g in groups[1:-1]) or not 1 <= groups[-1] <= 6:
                continue
        yield Finding("CARD", m.start(), m.end())


# ------------------------------------------------------------------------------------------------
# IP addresses
# ------------------------------------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?:/\d{{1,2}})?(?![\w]|\.\d)")
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?:%[\w.]+)?(?:/\d{1,3})?"
    r"(?![\w:])"
)
_VERSION_CONTEXT = re.compile(
    r"(?i)(?:\bv|\bversions?|\bver\.?|\brelease[sd]?|\bbuild|\bfirmware|\bfw|\bpatch|\bupgraded?\s+to|\bupdated?\s+to"
    r"|==|>=|<=|~=|\bsdk|\bapi|\bos|\bchrome|\bios|\bandroid|\bwindows|\bmacos)\W{0,3}$"
)


def _ips(text: str, clues: _Clues) -> Iterator[Finding]:
    if clues.digits >= 4 and text.count(".") >= 3:  # four octets of at least one \d, three dots
        yield from _ipv4s(text)
    if text.count(":") >= 2:  # (?:[0-9A-Fa-f]{0,4}:){2,7}: at least two colons
        yield from _ipv6s(text)


def _ipv4s(text: str) -> Iterator[Finding]:
    for m in _IPV4.finditer(text):
        if _VERSION_CONTEXT.search(text[max(0, m.start() - 24):m.start()]):
            continue
        yield Finding("IP", m.start(), m.end())


def _ipv6s(text: str) -> Iterator[Finding]:
    for m in _IPV6.finditer(text):
        raw = m.group().split("%")[0].split("/")[0]
        if raw.count(":") < 2 or raw.strip(":") == "" or not re.search(r"[0-9A-Fa-f]", raw):
            continue
        try:
            ipaddress.IPv6Address(raw)
        except ValueError:
            continue
        yield Finding("IP", m.start(), m.end())


# ------------------------------------------------------------------------------------------------
# Phone numbers
# ------------------------------------------------------------------------------------------------

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


def _phone_ok(text: str, m: re.Match[str]) -> bool:
    raw = m.group("num")
    if raw.startswith(("+0", "000")):
        return False  # no country code starts with 0: a zero-padded code (GTIN, account), not a phone
    intl = raw.startswith(("+", "00"))
    body = raw[1:] if raw.startswith("+") else raw[2:] if raw.startswith("00") else raw
    digits = re.sub(r"\D", "", body)
    groups = [g for g in re.split(r"[ \u00a0.\-()]+", body) if g]
    seps = set(re.findall(r"[ \u00a0.\-]", body))
    left = text[max(0, m.start() - 40):m.start()]
    if left.endswith(":") and left[-2:-1].isdigit():
        return False  # the tail of a time: 10:30 5551234
    positive, weak, negative = _label_distances(left)
    if positive is None and negative is None:
        positive = weak
    labelled = positive is not None and (negative is None or positive < negative)
    if negative is not None and not labelled:
        return False
    if _CURRENCY_BEFORE.search(left) or _UNIT_AFTER.match(text[m.end():m.end() + 12]):
        return False
    if _is_date(groups, seps) or _DATE_PREFIX.match(body):
        return False
    if len(seps) > 1 and not seps <= {" ", "-"} and not intl and "(" not in body:
        return False  # "1 299.00", "12.345-6": mixed punctuation is a number, not a phone
    if "." in seps and not intl and any(len(g) == 1 for g in groups):
        return False  # version strings: 10.0.19041.1
    if len(groups) == 2 and all(len(g) == 4 and g[:2] in ("19", "20") for g in groups):
        return False  # year ranges: 2019-2023
    if intl:
        return 8 <= len(digits) <= 15 and len(groups) <= 7
    if not 7 <= len(digits) <= 12:
        return False
    if len(groups) > 1:
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
        if len(digits) <= 8:
            return labelled
        return True
    # One bare run of digits: only with a label, or a national trunk prefix (0 then 9-10 digits).
    if labelled:
        return True
    return raw.startswith("0") and not raw.startswith("00") and len(digits) in (10, 11)


def _phones(text: str, clues: _Clues) -> Iterator[Finding]:
    if clues.digits < 6:
        return  # _PHONE's number is six or more units, each \d or (\d{1,5})
    for m in _PHONE.finditer(text):
        if _phone_ok(text, m):
            yield Finding("PHONE", m.start(), m.end())


# ------------------------------------------------------------------------------------------------

_DETECTORS: dict[str, Callable[[str, _Clues], Iterator[Finding]]] = {
    "SECRET": _secrets, "EMAIL": _emails, "IBAN": _ibans, "CARD": _cards, "IP": _ips, "PHONE": _phones,
}


def find(text: str, kinds: Sequence[str] = KINDS) -> list[Finding]:
    """Non-overlapping findings in ``text``, in order. Overlaps go to the kind listed first in KINDS."""
    if not text:
        return []
    clues = _Clues.of(text)
    accepted: list[Finding] = []  # sorted by start, never overlapping
    starts: list[int] = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        found = list(_DETECTORS[kind](text, clues))
        if not found:
            continue
        found.sort(key=lambda f: (f.start, -f.end))
        for f in _merge_same_kind(found):
            i = bisect.bisect_left(starts, f.start)
            if (i > 0 and accepted[i - 1].end > f.start) or (i < len(accepted) and accepted[i].start < f.end):
                continue
            accepted.insert(i, f)
            starts.insert(i, f.start)
    return accepted


def _merge_same_kind(found: list[Finding]) -> list[Finding]:
    merged: list[Finding] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Finding(last.kind, last.start, max(last.end, f.end))
        else:
            merged.append(f)
    return merged


def redact(text: str, *, enabled: bool = True) -> Redacted:
    """Replace PII in ``text`` by typed placeholders (``enabled``: Settings.redact, EPISODES_REDACT)."""
    if not enabled or not text:
        return Redacted(text, {})
    findings = find(text)
    if not findings:
        return Redacted(text, {})
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos:f.start])
        parts.append(PLACEHOLDER[f.kind])
        pos = f.end
    parts.append(text[pos:])
    return Redacted("".join(parts), dict(Counter(f.kind for f in findings)))


def redact_messages(
    messages: Sequence[Message], *, enabled: bool = True
) -> tuple[list[Message], dict[str, int]]:
    """Redact every message's content and name; return the new messages and the summed counts."""
    if not enabled:
        return list(messages), {}
    total: Counter[str] = Counter()
    out: list[Message] = []
    for message in messages:
        content = redact(message.content, enabled=True)
        name = redact(message.name, enabled=True) if message.name else None
        total.update(content.counts)
        if name is not None:
            total.update(name.counts)
        if content.counts or (name is not None and name.counts):
            message = message.model_copy(update={"content": content.text, "name": name.text if name else None})
        out.append(message)
    return out, dict(total)


def redact_transcript(transcript: Transcript, *, enabled: bool = True) -> tuple[Transcript, dict[str, int]]:
    """The transcript with redacted messages (ids, hash and times unchanged), and the counts.

    The content hash stays that of the stored transcript, so idempotency is unaffected: the same
    stored content always redacts to the same text.
    """
    messages, counts = redact_messages(transcript.messages, enabled=enabled)
    if not counts:
        return transcript, {}
    return dataclasses.replace(transcript, messages=messages), counts
