"""Jinja2 templates in prompts/, rendered with StrictUndefined so a missing variable fails loudly.

Stored text that a template quotes into a model's prompt as data (the recall block) goes through
the ``inert`` filter (:func:`inert`), so it cannot open or close the block or start a line of its own.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import cache
from typing import Any

import jinja2

from jobs.resources import prompts_dir


@cache
def environment() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(_load)
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # these are prompts and plain-text blocks, not HTML; data is quoted with `inert`
        keep_trailing_newline=False,
        trim_blocks=False,
    )
    env.filters["inert"] = inert
    return env


def _table() -> dict[int, str | None]:
    """What each special character becomes (None: removed): controls become spaces, invisible format
    characters go, look-alikes of ``<`` ``>`` ``/`` become those, and ``&`` ``<`` ``>`` become XML
    character references."""
    # controls, and the whitespace NFKC leaves other than the space (line and paragraph separators)
    table: dict[int, str | None] = {c: " " for c in [*range(0x20), *range(0x7F, 0xA0), 0x1680, 0x2028, 0x2029]}
    table.update({c: None for first, last in _FORMAT for c in range(first, last + 1)})
    table.update({ord(c): "&lt;" for c in "<\u2329\u27e8\u3008\u276c\u276e\u2770\u29fc\u1438\u02c2\u2989\u2991"
                                        "\ufe3f\u226e"})
    table.update({ord(c): "&gt;" for c in ">\u232a\u27e9\u3009\u276d\u276f\u2771\u29fd\u1433\u02c3\u298a\u2992"
                                        "\ufe40\u226f"})
    table.update({0x27EA: "&lt;&lt;", 0x27EB: "&gt;&gt;", ord("&"): "&amp;"})
    table.update({0x2264: "&lt;=", 0x2265: "&gt;=", 0x2266: "&lt;=", 0x2267: "&gt;="})  # what they mean, unbent
    table.update({ord(c): '"' for c in "\u00ab\u00bb\u300a\u300b"})  # double angle quotation marks: quotes
    table.update({ord(c): "'" for c in "\u2039\u203a"})  # single angle quotation marks: quotes
    table.update({ord(c): "/" for c in "\u2044\u2215\u29f8\u2571\u27cb"})
    table.update({c: "\ufffd" for c in range(0xD800, 0xE000)})  # lone surrogates cannot be sent as UTF-8
    return table


# Unicode's format characters (category Cf: zero-width joiners and spaces, bidirectional overrides and
# isolates, the invisible "tag" characters, soft hyphen, ...) as of Unicode 15; tests check the list
# against the running Python's unicodedata.
_FORMAT = [(0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891),
           (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064),
           (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
           (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F)]
_INERT = _table()
_ASCII_SPECIAL = re.compile(r"[\x00-\x1f\x7f&<>]")  # (one character class: an alternation scans 20x slower)
_SPACES = re.compile(r"  +")


def _class(codes: list[int], *wide: tuple[int, int]) -> re.Pattern[str]:
    """A regular expression matching one of ``codes`` (consecutive ones as ranges) or of the ``wide`` ranges."""
    runs: list[tuple[int, int]] = []
    for code in sorted(codes):
        runs.append((runs.pop()[0], code) if runs and code == runs[-1][1] + 1 else (code, code))
    return re.compile("[" + "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b)))
                                    for a, b in [*runs, *wide]) + "]")


# What _INERT changes, found in C and replaced one match at a time. Above U+D7FF everything matches
# (the replacement then leaves what _INERT does not list): one range scans several times faster than
# the dozens of astral and surrogate ones it stands for.
_SPECIAL = _class([c for c in _INERT if c < 0xD800], (0xD800, 0x10FFFF))
_REPLACE = {chr(code): to or "" for code, to in _INERT.items()}


def _replace(found: re.Match[str]) -> str:
    return _REPLACE.get(found.group(), found.group())


def inert(value: object) -> str:
    """Stored text made safe to quote inside a prompt block: one line, and no markup.

    Unicode is NFKC-normalised (fullwidth and small forms become ASCII), control characters become
    spaces, format characters (zero-width, bidirectional overrides, tag characters) are removed,
    runs of spaces become one (and none is kept at either end), look-alikes of ``<`` ``>`` ``/`` are
    folded to them (angle quotation marks to quotes), and ``&`` ``<`` ``>`` are written as ``&amp;``
    ``&lt;`` ``&gt;``. A line break in stored text is a space, so nothing stored starts a line.

    Why XML escaping: the block is XML-like, and escaped text is how XML carries a ``<``; a model
    reads ``&lt;`` as the character, the escaped form never folds back into a tag under any
    look-alike folding (a ``‹`` substitute would: it *is* a look-alike), and ``<`` ``>`` ``&`` are
    rare in conversation, so it costs almost nothing (and costs what it adds: fitting measures lines
    after quoting). Quote once: ``&lt;`` quoted again is ``&amp;lt;``.
    """
    text = str(value)
    if text.isascii():  # the common case: a small class scans fastest
        text = _ASCII_SPECIAL.sub(_replace, text)
    else:
        text = _SPECIAL.sub(_replace, unicodedata.normalize("NFKC", text))
    if "  " in text:
        text = _SPACES.sub(" ", text)
    return text.strip(" ")


def _load(name: str) -> str:
    path = prompts_dir() / name
    if not path.is_file():
        raise jinja2.TemplateNotFound(name)
    return path.read_text(encoding="utf-8")


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context).strip()


def source(name: str) -> str:
    return _load(name)


def template_names() -> list[str]:
    return sorted(p.name for p in prompts_dir().iterdir() if p.name.endswith(".j2"))


def fingerprint(*parts: str) -> str:
    """A short stable hash of template sources (and schemas): the prompt version."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:12]
