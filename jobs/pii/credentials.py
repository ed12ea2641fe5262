"""Detecting secrets (``[SECRET]``): API keys and tokens by their known prefixes, private key
blocks, ``Bearer``/``Basic`` credentials, values after key / token / secret / password / PIN labels
when they look like a secret rather than a word, card security codes, and passwords in commands,
connection strings and URLs (:mod:`jobs.pii.commands`)."""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Iterator

from jobs.pii.commands import find_command_secrets
from jobs.pii.detector import Clues, Finding, contains_any

# Each pattern with the literal(s) it cannot match without: a cheap substring test skips the scan.
_SECRET_PATTERNS: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    (("sk-",), re.compile(r"(?<![\w-])sk-(?:ant-|proj-|live-|test-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    (("k_live_", "k_test_"), re.compile(r"(?<![\w-])[spr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    (
        ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ),
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
assert all(contains_any(h, _SECRET_MARKS) for hints, _ in _SECRET_PATTERNS for h in hints)
_LABEL_HINTS = ("key", "token", "secret", "pass", "pwd", "pin", "cvv", "cvc", "csc", "security code", "bearer", "basic")
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
_CVV = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:cvv2?|cvc2?|csc|card\s+security\s+code|security\s+code)\W{0,3}"
    r"(?:is\s+|was\s+)?(?P<value>\d{3,4})(?!\d)"
)
_WORDY = re.compile(r"^[A-Za-z][a-z]*[.!?]?$")  # a plain word: "expired", "incorrect", "Required"
# What each case-insensitive pattern above cannot match without, in lower case (see Clues). Every
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


def find_secrets(text: str, clues: Clues) -> Iterator[Finding]:
    """``SECRET`` findings: key blocks, prefixed keys, then (if a label word occurs) credentials,
    security codes and labelled values."""
    if "PRIVATE KEY" in text:
        yield from _pem_blocks(text)
    if contains_any(text, _SECRET_MARKS):
        yield from _prefixed_secrets(text)
    yield from find_command_secrets(text, clues)  # PGPASSWORD=, mysql -p, curl -u, user:pass@host, ...
    if not contains_any(clues.lowered, _LABEL_HINTS):
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
        if contains_any(text, hints):
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
