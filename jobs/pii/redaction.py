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
  secret / password / PIN labels when they look like a secret rather than a word, card
  security codes, and passwords in commands, connection strings and URLs (``PGPASSWORD=…``,
  ``mysql -p…``, ``--password …``, ``curl -u user:…``, ``docker login -p …``, ``redis-cli -a …``,
  ``sshpass -p …``, ``https://user:…@host``, ``sslpassword=…``; :mod:`jobs.pii.commands`).
- ``[IP]`` IPv4 and IPv6 addresses (validated by :mod:`ipaddress`); ``version 1.2.3.4`` is not one.

What is deliberately *not* redacted: dates, times, prices, order / invoice / ticket numbers,
ISBNs, version strings, UUIDs, commit hashes and other unlabelled hex strings (identifiers that
support conversations are full of and that carry no personal data on their own), card numbers
failing the Luhn check, and names and postal addresses (no pattern can find those reliably).

Precision matters as much as recall here: a false positive destroys an order number the episode
needed. ``tests/support/redaction_corpus.py`` is the labelled yardstick; ``tests/unit/test_redact.py`` prints
precision and recall per type.

Redaction is on by default. Every function takes ``enabled=``; callers pass ``Settings.redact``
(``EPISODES_REDACT=false`` turns it off), read when they run, so tests and callers can change it.

The detectors live beside this module, one per family (:mod:`jobs.pii.credentials`,
:mod:`jobs.pii.addresses`, :mod:`jobs.pii.payment`, :mod:`jobs.pii.phones`), on the
shared :class:`~jobs.pii.detector.Finding` and prefilter :class:`~jobs.pii.detector.Clues`;
here they are run in priority order and their findings replaced.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.pii.addresses import find_emails, find_ips
from jobs.pii.credentials import find_secrets
from jobs.pii.detector import Clues, Detector, Finding
from jobs.pii.payment import find_cards, find_ibans
from jobs.pii.phones import find_phones

if TYPE_CHECKING:  # only annotations: redact() on plain text loads no pydantic model (recall's last words)
    from jobs.models import Message, Transcript

# One detector per kind, in priority order: when detections overlap, the kind listed first wins.
_DETECTORS: dict[str, Detector] = {
    "SECRET": find_secrets,
    "EMAIL": find_emails,
    "IBAN": find_ibans,
    "CARD": find_cards,
    "IP": find_ips,
    "PHONE": find_phones,
}
KINDS = tuple(_DETECTORS)  # ("SECRET", "EMAIL", "IBAN", "CARD", "IP", "PHONE")
PLACEHOLDER = {kind: f"[{kind}]" for kind in KINDS}


@dataclass(frozen=True)
class Redacted:
    """The redacted text and how many spans of each kind were replaced."""

    text: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def find(text: str, kinds: Sequence[str] = KINDS) -> list[Finding]:
    """Non-overlapping findings in ``text``, in order. Overlaps go to the kind listed first in KINDS."""
    if not text:
        return []
    clues = Clues.of(text)
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
        parts.append(text[pos : f.start])
        parts.append(PLACEHOLDER[f.kind])
        pos = f.end
    parts.append(text[pos:])
    return Redacted("".join(parts), dict(Counter(f.kind for f in findings)))


def redact_messages(messages: Sequence[Message], *, enabled: bool = True) -> tuple[list[Message], dict[str, int]]:
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
