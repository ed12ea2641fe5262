"""PII redaction: precision and recall per type on a labelled corpus, placeholders, the switch.

Print the figures with ``python tests/unit/test_redact.py`` (or ``pytest tests/unit/test_redact.py -s``).
The held-out part of the corpus (``HELD_OUT``) was written after the detector was frozen; measured
once before any change it gave precision 0.976 / recall 0.911 overall (misses: an apostrophe in an
address, ``bob@localhost``, a lower-case IBAN, ``password=letmein``; one GTIN taken for a phone).
The fixes that followed are general rules, and ``bob@localhost`` stays a known gap.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from pathlib import Path

import pytest

from jobs import config
from jobs.errors import ConfigError
from jobs.models import Message, Transcript
from jobs.pii.redaction import KINDS, find, redact, redact_messages, redact_transcript

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `python tests/unit/test_redact.py`
from support.redaction_corpus import CASES, COMMANDS, HELD_OUT, NEGATIVE, Case

Scores = dict[str, Counter[str]]


def score(cases: list[Case]) -> Scores:
    """tp / fp / fn per kind: a labelled value counts as found only if one detection of its kind
    covers all of it; a detection that overlaps no labelled value of its kind is a false positive."""
    tally: Scores = {kind: Counter() for kind in KINDS}
    for text, expected in cases:
        findings = find(text)
        spans = []
        for kind, value in expected:
            start = text.find(value)
            assert start >= 0, f"corpus error: {value!r} not in {text!r}"
            spans.append((kind, start, start + len(value)))
        for kind, start, end in spans:
            hit = any(f.kind == kind and f.start <= start and f.end >= end for f in findings)
            tally[kind]["tp" if hit else "fn"] += 1
        for f in findings:
            if not any(f.kind == kind and f.start < end and start < f.end for kind, start, end in spans):
                tally[f.kind]["fp"] += 1
    return tally


def ratios(c: Counter[str]) -> tuple[float, float]:
    precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
    recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 1.0
    return precision, recall


def table(tally: Scores) -> str:
    lines = [f"{'type':8} {'tp':>4} {'fp':>4} {'fn':>4} {'precision':>10} {'recall':>8}"]
    total: Counter[str] = Counter()
    for kind in KINDS:
        c = tally[kind]
        total.update(c)
        p, r = ratios(c)
        lines.append(f"{kind:8} {c['tp']:>4} {c['fp']:>4} {c['fn']:>4} {p:>10.3f} {r:>8.3f}")
    p, r = ratios(total)
    lines.append(f"{'all':8} {total['tp']:>4} {total['fp']:>4} {total['fn']:>4} {p:>10.3f} {r:>8.3f}")
    return "\n".join(lines)


def test_corpus_is_large_and_labelled_on_both_sides() -> None:
    positives = Counter(kind for _, expected in CASES for kind, _ in expected)
    assert len(CASES) >= 150
    assert sum(1 for _, expected in CASES if not expected) >= 80
    assert all(positives[kind] >= 15 for kind in KINDS), positives


def test_precision_and_recall_per_type() -> None:
    tally = score(CASES)
    report = table(tally)
    print(f"\nredaction on {len(CASES)} cases\n{report}")
    total: Counter[str] = Counter()
    for kind in KINDS:
        total.update(tally[kind])
        precision, recall = ratios(tally[kind])
        assert precision >= 0.9 and recall >= 0.9, f"{kind} below the floor\n{report}"
    precision, recall = ratios(total)
    assert precision >= 0.95 and recall >= 0.95, report


def test_held_out_floor() -> None:
    total: Counter[str] = Counter()
    for c in score(HELD_OUT).values():
        total.update(c)
    precision, recall = ratios(total)
    assert precision >= 0.9 and recall >= 0.9


# The labelled values redaction is known to leave, each with why: a new leak, or one of these fixed, fails the test
# below (then update this list, saying why).
KNOWN_LEAKS = [
    # The e-mail rule (jobs/pii/addresses.py) wants a dotted domain with a top-level part: a bare host name is missed.
    ("EMAIL", "bob@localhost"),
]


def test_no_labelled_value_survives_redaction() -> None:
    leaks = []
    for text, expected in CASES:
        out = redact(text, enabled=True).text
        leaks += [(kind, value) for kind, value in expected if value in out]
    assert leaks == KNOWN_LEAKS


@pytest.mark.parametrize(("text", "expected"), COMMANDS, ids=[text[:40] for text, _ in COMMANDS])
def test_passwords_in_commands_and_nothing_else(text: str, expected: list[tuple[str, str]]) -> None:
    """Issue 46 #2: every password form of the corpus is replaced (only the password: the user, host and
    command stay), and the look-alike flags (ports, directories, a prompt) are left alone."""
    out = redact(text, enabled=True).text
    rest = text
    for _, value in expected:
        rest = rest.replace(value, "[SECRET]", 1)
    assert out == rest


def test_negatives_come_back_unchanged() -> None:
    changed = [(text, redact(text, enabled=True).text) for text, _ in NEGATIVE if redact(text, enabled=True).counts]
    assert changed == []


def test_typed_placeholders_and_counts() -> None:
    text = (
        "Maria (maria@example.com, +44 20 7946 0958) paid with 4111 1111 1111 1111 from "
        "GB29 NWBK 6016 1331 9268 19 at 203.0.113.7; key sk-ant-api03-Xk2vQ9pL7mN4rT8wY1zB5cD3f. "
        "Order #4471 for $1,299.00 on 2024-03-15, version 1.2.3.4."
    )
    result = redact(text, enabled=True)
    assert result.text == (
        "Maria ([EMAIL], [PHONE]) paid with [CARD] from [IBAN] at [IP]; key [SECRET]. "
        "Order #4471 for $1,299.00 on 2024-03-15, version 1.2.3.4."
    )
    assert result.counts == {"EMAIL": 1, "PHONE": 1, "CARD": 1, "IBAN": 1, "IP": 1, "SECRET": 1}
    assert result.total == 6


def test_redaction_is_idempotent() -> None:
    for text, _ in CASES:
        once = redact(text, enabled=True)
        twice = redact(once.text, enabled=True)
        assert twice.text == once.text and twice.counts == {}, text


def test_switch_comes_from_settings_and_an_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "mail me at maria@example.com"
    assert config.load().redact is True  # on by default
    assert redact(text).text == "mail me at [EMAIL]"
    monkeypatch.setenv("EPISODES_REDACT", "false")
    assert config.load().redact is False
    assert redact(text, enabled=config.load().redact).text == text
    monkeypatch.setenv("EPISODES_REDACT", "TRUE")
    assert config.load().redact is True
    assert redact(text, enabled=False).text == text and redact(text, enabled=False).counts == {}
    monkeypatch.setenv("EPISODES_REDACT", "maybe")
    with pytest.raises(ConfigError, match="EPISODES_REDACT='maybe'"):
        config.load()


def test_redact_messages_and_transcript_keep_everything_but_the_pii() -> None:
    ts = dt.datetime(2025, 3, 4, 9, 0, tzinfo=dt.UTC)
    messages = [
        Message(role="user", name="maria@example.com", content="Call me on +44 20 7946 0958.", ts=ts),
        Message(role="assistant", content="Sure, noted."),
    ]
    redacted, counts = redact_messages(messages, enabled=True)
    assert [m.content for m in redacted] == ["Call me on [PHONE].", "Sure, noted."]
    assert redacted[0].name == "[EMAIL]" and redacted[0].ts == ts and redacted[0].role == "user"
    assert redacted[1] is messages[1]  # untouched messages are not copied
    assert counts == {"PHONE": 1, "EMAIL": 1}
    assert messages[0].content == "Call me on +44 20 7946 0958."  # the input is not mutated

    transcript = Transcript(
        id=7,
        tenant_id="acme",
        user_id="u1",
        session_id="s1",
        purpose="support",
        started_at=ts,
        ended_at=ts,
        messages=messages,
        content_hash="h1",
    )
    out, counts = redact_transcript(transcript, enabled=True)
    assert (out.id, out.content_hash, out.session_id) == (7, "h1", "s1") and counts["PHONE"] == 1
    assert out.messages[0].content == "Call me on [PHONE]."
    same, none = redact_transcript(transcript, enabled=False)
    assert same is transcript and none == {}


WORST_CASES = {
    "letters": "a" * 300_000,
    "digit-runs": "1 " * 150_000,
    "at-signs": "a@" * 150_000,
    "dots": "1." * 150_000,
    "colons": "a:" * 150_000,
    "parens": "(1)" * 100_000,
    "pem-begins": "-----BEGIN RSA PRIVATE KEY-----" * 10_000,
    "dense-pii": "call me +44 20 7946 0958 maria@example.com 4111 1111 1111 1111 " * 5_000,
}


@pytest.mark.parametrize("name", WORST_CASES)
def test_adversarial_input_is_redacted_whole(name: str) -> None:
    """300 KB of worst cases for the patterns are redacted completely and correctly; whether the work stays
    linear in the input is measured by bench/redact_worst_cases.py (CPU time per character at two sizes), not
    by a wall-clock limit here: on a shared machine a limit either flakes or is too loose to catch anything."""
    text = WORST_CASES[name]
    result = redact(text, enabled=True)
    if name == "dense-pii":
        assert result.counts == {"PHONE": 5_000, "EMAIL": 5_000, "CARD": 5_000}
        assert "maria@example.com" not in result.text and "4111 1111" not in result.text
    else:
        assert (result.text, result.counts) == (text, {})  # nothing in them is personal data


if __name__ == "__main__":
    for label, cases in (("all cases", CASES), ("held-out cases", HELD_OUT)):
        print(f"{label} ({len(cases)})\n{table(score(cases))}\n")
