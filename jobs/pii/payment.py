"""Detecting payment details by shape and checksum: IBANs (``[IBAN]``, the country's length and
the mod-97 check) and card numbers (``[CARD]``, 13-19 digits, an issuer's first digit and the
Luhn check)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from jobs.pii.detector import Clues, Finding

# ------------------------------------------------------------------------------------------------
# IBAN
# ------------------------------------------------------------------------------------------------

_IBAN_LENGTHS = {
    "AD": 24,
    "AE": 23,
    "AL": 28,
    "AT": 20,
    "AZ": 28,
    "BA": 20,
    "BE": 16,
    "BG": 22,
    "BH": 22,
    "BR": 29,
    "CH": 21,
    "CR": 22,
    "CY": 28,
    "CZ": 24,
    "DE": 22,
    "DK": 18,
    "DO": 28,
    "EE": 20,
    "EG": 29,
    "ES": 24,
    "FI": 18,
    "FO": 18,
    "FR": 27,
    "GB": 22,
    "GE": 22,
    "GI": 23,
    "GL": 18,
    "GR": 27,
    "GT": 28,
    "HR": 21,
    "HU": 28,
    "IE": 22,
    "IL": 23,
    "IS": 26,
    "IT": 27,
    "JO": 30,
    "KW": 30,
    "KZ": 20,
    "LB": 28,
    "LI": 21,
    "LT": 20,
    "LU": 20,
    "LV": 21,
    "MC": 27,
    "MD": 24,
    "ME": 22,
    "MK": 19,
    "MR": 27,
    "MT": 31,
    "MU": 30,
    "NL": 18,
    "NO": 15,
    "PK": 24,
    "PL": 28,
    "PS": 29,
    "PT": 25,
    "QA": 29,
    "RO": 24,
    "RS": 22,
    "SA": 24,
    "SE": 24,
    "SI": 19,
    "SK": 24,
    "SM": 27,
    "TN": 24,
    "TR": 26,
    "UA": 29,
    "VG": 24,
    "XK": 20,
}
_IBAN = re.compile(r"(?<![A-Za-z0-9])(?:[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]){11,30}|[a-z]{2}\d{2}(?:[ -]?[a-z0-9]){11,30})")


def mod97_ok(iban: str) -> bool:
    """The IBAN check (ISO 13616): the rearranged number, letters as 10-35, is 1 modulo 97."""
    rearranged = iban[4:] + iban[:4]
    try:
        return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1
    except ValueError:
        return False


def find_ibans(text: str, clues: Clues) -> Iterator[Finding]:
    """``IBAN`` findings of the country's length (any length from 15 to 34 for others) passing mod-97."""
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
            if mod97_ok(compact[:n]):
                yield Finding("IBAN", m.start(), end)
                break


# ------------------------------------------------------------------------------------------------
# Payment cards
# ------------------------------------------------------------------------------------------------

_CARD = re.compile(r"(?<![\w+\-.,/])(?<!\d )\d(?:[ -]?\d){12,18}+(?![\w\-/]|[.,]\d)")


_IBAN_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}[ -]?$")


def luhn_ok(digits: str) -> bool:
    """The Luhn check that every payment card number passes."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def find_cards(text: str, clues: Clues) -> Iterator[Finding]:
    """``CARD`` findings: Luhn-valid issuer numbers, bare or in card-like groups, not an IBAN's tail."""
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
