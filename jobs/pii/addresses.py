"""Detecting addresses: e-mail (``[EMAIL]``, also ``name [at] host [dot] com``) and IP
(``[IP]``, IPv4 and IPv6 validated by :mod:`ipaddress`; ``version 1.2.3.4`` is not one)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from jobs.pii.detector import Clues, Finding

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


def find_emails(text: str, clues: Clues) -> Iterator[Finding]:
    """``EMAIL`` findings, plain and obfuscated; file names such as ``icon@2x.png`` are not ones."""
    if "@" in text:
        for m in _EMAIL.finditer(text):
            if m.group("tld").lower() not in _FILE_TLDS:
                yield Finding("EMAIL", m.start(), m.end())
    if "at]" in clues.lowered or "at)" in clues.lowered:
        for m in _EMAIL_OBFUSCATED.finditer(text):
            yield Finding("EMAIL", m.start(), m.end())


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


def find_ips(text: str, clues: Clues) -> Iterator[Finding]:
    """``IP`` findings: IPv4 outside version contexts, and IPv6 that :mod:`ipaddress` accepts."""
    if clues.digits >= 4 and text.count(".") >= 3:  # four octets of at least one \d, three dots
        yield from _ipv4s(text)
    if text.count(":") >= 2:  # (?:[0-9A-Fa-f]{0,4}:){2,7}: at least two colons
        yield from _ipv6s(text)


def _ipv4s(text: str) -> Iterator[Finding]:
    for m in _IPV4.finditer(text):
        if _VERSION_CONTEXT.search(text[max(0, m.start() - 24) : m.start()]):
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
