"""Jinja2 templates in prompts/, rendered with StrictUndefined so a missing variable fails loudly.

Stored text that a template quotes into a model's prompt as data goes through the ``inert`` filter
(:func:`inert`), so it cannot open or close the block or start a line of its own: the recall block,
and the earlier events, episodes and partial summaries that the summariser's and compressor's prompts
quote. Message bodies of the transcript being summarised keep their lines and go through
``inert_lines`` (:func:`inert_lines`). Both decide each character by one allow-list (:func:`_quote`).
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
    env.filters["inert_lines"] = inert_lines
    return env


class _Quoted(dict[int, str]):
    """A ``str.translate`` table that decides each character on first sight (:func:`_quote`) and
    keeps the decision; characters that no version of Unicode known here has assigned are decided
    every time, so hostile text cannot grow the table past the assigned repertoire."""

    def __init__(self, keep_ascii: bool) -> None:
        super().__init__()
        self.keep_ascii = keep_ascii

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if self.keep_ascii and code < 0x80:
            out = ch
        elif self.keep_ascii:  # kept when both it and its compatibility form pass; else the form, quoted
            folded = unicodedata.normalize("NFKC", ch)
            quoted = "".join(_quote(c) for c in folded)
            out = ch if quoted == folded and _quote(ch) == ch else quoted
        else:
            out = _quote(ch)
        if unicodedata.category(ch) not in _UNKNOWN:
            self[code] = out
        return out


# Shapes that read as < or > when they point left or right (named so by Unicode), unless the name is an
# arrow's (an arrow has a shaft); and the names of a rising stroke, read as /.
_POINTING = re.compile(r"ANGLE|ARROWHEAD|TRIANGLE|CHEVRON|POINTING|POINTER|PRECEDES|SUCCEEDS")
_SHAFT = re.compile(r"ARROW(?!HEAD)")
_RISING = re.compile(
    r"(?<!REVERSE )(?<!REVERSED )SOLIDUS|(?<!BACK)(?<!FALLING DIAGONAL )SLASH|RISING DIAGONAL"
    r"|DIAGONAL UPPER RIGHT TO LOWER LEFT"
)
# Look-alikes whose names say nothing of their shape: what Unicode's confusables data (UTS #39,
# confusables.txt) lists for < and >, even the Canadian syllabics PA and PO that Cree and Inuktitut are
# written with (each could open a tag), and its symbols for /. Its letters for / (Katakana NO, the CJK
# stroke) stay: a / alone cannot open a tag once every < is quoted. The syllabics A and O (and AA and OO,
# the same triangles with a dot) are the bare left and right triangles, < and > to a reader as PA and PO
# are (issue 46 #13): folded too, at the same cost to Inuktitut text.
_UNNAMED = {
    "\u140a": "&lt;",
    "\u140b": "&lt;",
    "\u1405": "&gt;",
    "\u1406": "&gt;",
    "\u1438": "&lt;",
    "\u16b2": "&lt;",
    "\U0001d236": "&lt;",
    "\u1433": "&gt;",
    "\U00016f3f": "&gt;",
    "\U0001d237": "&gt;",
    "\u1735": "/",
    "\u2041": "/",
    "\U0001d23a": "/",
    "\u3033": "/",
    "\u31d3": "/",
}
_ASCII = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_UNKNOWN = ("Cn", "Co", "Cs")  # unassigned here, private use, lone surrogates: what they look like is unknown
_KEPT = ("L", "M", "N")  # letters (but modifier letters), marks, numbers: kept unless listed in _UNNAMED


def _quote(ch: str) -> str:
    """What one character (already NFKC-normalised) becomes in quoted text: the allow-list.

    Kept as it is: printable ASCII but ``< > &`` (written ``&lt; &gt; &amp;``); letters, marks and
    numbers; symbols and punctuation whose Unicode name names no left- or right-pointing shape, no
    less-than or greater-than and no rising stroke. Those become what they look like (``&lt;``,
    ``&gt;``, ``/``; angle quotation marks become quotes; relations keep their meaning, ``≤`` is
    ``&lt;=``), and so do the few look-alikes whose names do not tell (:data:`_UNNAMED`). Controls
    and separators become spaces, format characters go, and a character this Python's Unicode does
    not know (unassigned, private use, a lone surrogate) becomes U+FFFD: whatever a later Unicode
    makes of it, it cannot pass for a bracket.
    """
    if ch < "\x80":
        return " " if ch < " " or ch == "\x7f" else _ASCII.get(ch, ch)
    if ch in _UNNAMED:
        return _UNNAMED[ch]
    category = unicodedata.category(ch)
    if category == "Cf":
        return ""
    if category in _UNKNOWN:
        return "\ufffd"
    if category[0] in "CZ":
        return " "
    if category[0] in _KEPT and category != "Lm":
        return ch
    name = unicodedata.name(ch, "")
    less, greater = name.count("LESS-THAN"), name.count("GREATER-THAN")
    if less or greater:  # a relation: written with ASCII signs, meaning kept
        signs = (
            ("&lt;&gt;" if name.find("LESS-THAN") < name.find("GREATER-THAN") else "&gt;&lt;")
            if less and greater
            else ("&lt;" if less else "&gt;") * (3 if "VERY MUCH" in name else 2 if "MUCH" in name else 1)
        )
        return ("not " if re.search(r"\b(?:NOT|NEITHER)\b", name) else "") + signs + ("=" if "EQUAL" in name else "")
    if "NORMAL SUBGROUP" in name:  # a triangle named for what it means: \u22b2 and \u22b3, with bars and strokes
        return (
            ("not " if "NOT" in name else "")
            + ("&gt;" if "CONTAINS" in name else "&lt;")
            + ("=" if "EQUAL" in name else "")
        )
    if _POINTING.search(name) and not _SHAFT.search(name):
        if "QUOTATION MARK" in name:
            return '"' if "DOUBLE" in name else "'"
        left, right = "LEFT" in name or "PRECEDES" in name, "RIGHT" in name or "SUCCEEDS" in name
        if left or right:
            return (("&lt;" if left else "") + ("&gt;" if right else "")) * (2 if "DOUBLE" in name else 1)
    if _RISING.search(name):
        return "/"
    return ch


_INERT = _Quoted(keep_ascii=False)  # every character decided, after NFKC: for one-line quotes
_INERT_LINES = _Quoted(keep_ascii=True)  # non-ASCII characters only, no NFKC of the text: for message bodies
_ASCII_SPECIAL = re.compile(r"[\x00-\x1f\x7f&<>]")  # (one character class: an alternation scans 20x slower)
_SPACES = re.compile(r"  +")


def _replace(found: re.Match[str]) -> str:
    return _INERT[ord(found.group())]


def inert(value: object) -> str:
    """Stored text made safe to quote inside a prompt block: one line, and no markup.

    Unicode is NFKC-normalised (fullwidth and small forms become ASCII), control characters become
    spaces, format characters (zero-width, bidirectional overrides, tag characters) are removed,
    runs of spaces become one (and none is kept at either end), look-alikes of ``<`` ``>`` ``/`` are
    folded to them (angle quotation marks to quotes), and ``&`` ``<`` ``>`` are written as ``&amp;``
    ``&lt;`` ``&gt;``. A line break in stored text is a space, so nothing stored starts a line.
    Which characters pass as they are is an allow-list (:func:`_quote`), not a list of look-alikes.

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
        text = unicodedata.normalize("NFKC", text).translate(_INERT)
    if "  " in text:
        text = _SPACES.sub(" ", text)
    return text.strip(" ")


def inert_lines(value: object) -> str:
    """A message body quoted in a transcript: its lines, spaces and ASCII kept (the transcript's own
    delimiters are escaped by the extractor, which knows them), every other character through the
    allow-list of :func:`inert` as its compatibility form, so a fullwidth, runic or triangular
    look-alike of ``<`` ``>`` cannot open or close a tag, and invisible characters go. Text grows only
    where such a character stands."""
    text = str(value)
    return text if text.isascii() else text.translate(_INERT_LINES)


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
