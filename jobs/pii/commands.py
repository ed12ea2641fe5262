"""Passwords in shell commands, connection strings and URLs (``[SECRET]``), as an agent's transcript
quotes them: the ones a label-and-value rule misses because the label is glued to a prefix
(``PGPASSWORD=…``, ``sslpassword=…``), is a flag (``mysql -p…``, ``docker login -p …``,
``redis-cli -a …``, ``sshpass -p …``, ``--password …``) or is no word at all (``curl -u user:pass``,
``https://user:pass@host``).

A flag is read as a password only in the command that gives it that meaning: ``-p`` is a password
for mysql (glued to its value: ``mysql -p db`` prompts), sshpass and a registry ``login``, and a
port for ssh and docker run; ``-a`` is a password for redis-cli only. Only the password is
replaced: the user name, the host and the rest of the command stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

from jobs.pii.detector import Clues, Finding, contains_any

# A shell word: quoted (a password may hold spaces) or bare; a value shorter than 256 characters.
_WORD = r"(?:'[^'\n]{0,256}'|\"[^\"\n]{0,256}\"|[^\s;&|'\"`<>()]{1,256})"
_VALUE = r"(?P<value>'[^'\n]{1,256}'|\"[^\"\n]{1,256}\"|[^\s;&|'\"`<>()]{1,256})"
_ARGS = rf"(?:\s+{_WORD}){{0,16}}?"  # the arguments between the command and the flag (same command)
_CMD = r"(?<![\w./-])(?:[\w./-]*/)?"  # a command at a word start, maybe with its path (/usr/bin/mysql)

_FLAGS: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
    # mysql and its tools: -p glued to the password (-psecret, -p'two words'); a separate word is the database.
    (
        ("mysql", "mariadb"),
        re.compile(rf"{_CMD}(?:mysql\w*|mariadb[\w-]*){_ARGS}\s-p(?=[^\s-]){_VALUE}"),
    ),
    # sshpass -p secret / -psecret.
    (("sshpass",), re.compile(rf"{_CMD}sshpass{_ARGS}\s-p\s*{_VALUE}")),
    # A registry login: docker / podman / nerdctl / buildah / skopeo / oras / helm registry login -p secret.
    (
        ("login",),
        re.compile(
            rf"{_CMD}(?:docker|podman|nerdctl|buildah|skopeo|oras|helm)(?:\s+{_WORD}){{0,4}}?\s+login{_ARGS}\s-p(?:\s+|=){_VALUE}"
        ),
    ),
    # redis-cli (and its forks) -a secret.
    (("-cli",), re.compile(rf"{_CMD}(?:redis|valkey|keydb)-cli{_ARGS}\s-a\s*{_VALUE}")),
    # mongo shells: -p secret.
    (("mongo",), re.compile(rf"{_CMD}mongo\w*{_ARGS}\s-p\s+{_VALUE}")),
    # Any tool's --password / --pass / --passwd / --http-password, with = or a space (not --password-stdin,
    # not --no-password, not a flag after it).
    (
        ("--",),
        re.compile(
            r"(?<![\w-])--(?!no-)(?:[\w]+-)*(?:password|passwd|pass)(?![\w-])(?:=|\s+)"
            r"(?!-)(?P<value>'[^'\n]{1,256}'|\"[^\"\n]{1,256}\"|[^\s;&|'\"`<>()]{1,256})"
        ),
    ),
]
# curl / httpie credentials: -u user:pass, --user=user:pass, -a user:pass (httpie); only after the colon.
_USER_PASS = re.compile(
    rf"{_CMD}(?:curl|http|https|xh){_ARGS}\s(?:-u|--user|-U|--proxy-user|-a|--auth)(?:\s+|=)?"
    r"(?:'[^\s:']{0,128}:(?P<sq>[^'\n]{1,256})'|\"[^\s:\"]{0,128}:(?P<dq>[^\"\n]{1,256})\""
    r"|[^\s:'\"]{0,128}:(?P<value>[^\s'\"]{1,256}))"
)
# NAME=value where NAME ends in a password word: PGPASSWORD=, MYSQL_PWD=, export APP_PASSWORD=, libpq's
# sslpassword=, SSHPASS=, REDISCLI_AUTH=; the value may be quoted and hold spaces.
_ASSIGNMENT = re.compile(
    r"(?<![\w-])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})="
    r"(?P<value>'[^'\n]{0,256}'|\"[^\"\n]{0,256}\"|[^\s;&|'\"`<>()]{1,256})"
)
_PASSWORD_NAME = re.compile(r"(?i)(?:password|passwd|passphrase|_pwd|_pass|^sshpass|^rediscli_auth)$")
_ASSIGN_HINTS = ("password=", "passwd=", "passphrase=", "pwd=", "pass=", "auth=")
# $PASS, ${PASS}, $(cat file): a reference, no secret; [SECRET]: already redacted.
_NOT_A_SECRET = re.compile(r"^(?:\$(?:\{?\w+\}?|\(.*\))|\[[A-Z]+\])$")
# URLs: the password of their userinfo and the values of their secret-named query parameters.
_URL = re.compile(r"(?i)(?<![\w+.-])[a-z][a-z0-9+.-]{0,30}://[^\s'\"<>`]{1,2048}")
_SECRET_PARAM = re.compile(
    r"(?i)^(?:.*(?:password|passwd|passphrase|secret|token|pwd|apikey|api_key|api-key|credential)s?"
    r"|key|sig|signature|auth|authorization|x-amz-signature|x-goog-signature)$"
)
_COMMAND_HINTS = ("mysql", "mariadb", "sshpass", "login", "-cli", "mongo", "--", "curl", "http", "xh ")


def find_command_secrets(text: str, clues: Clues) -> Iterator[Finding]:
    """``SECRET`` findings: passwords in commands, assignments, connection strings and URLs."""
    lowered = clues.lowered
    if contains_any(lowered, _ASSIGN_HINTS) or not clues.ascii:
        yield from _assignments(text)
    if "://" in text:
        yield from _urls(text)
    if not contains_any(lowered, _COMMAND_HINTS) and clues.ascii:
        return
    for hints, pattern in _FLAGS:
        if contains_any(lowered, hints) or not clues.ascii:
            yield from _values(pattern, text)
    if contains_any(lowered, ("curl", "http", "xh ")) or not clues.ascii:
        yield from _values(_USER_PASS, text)


def _values(pattern: re.Pattern[str], text: str) -> Iterator[Finding]:
    for m in pattern.finditer(text):
        group = next(g for g in ("value", "sq", "dq") if g in pattern.groupindex and m.group(g) is not None)
        finding = _unquoted(m.group(group), m.start(group))
        if finding is not None:
            yield finding


def _unquoted(value: str, start: int) -> Finding | None:
    """The value without its quotes, unless it is empty or only names a variable."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value, start = value[1:-1], start + 1
    if not value.strip() or _NOT_A_SECRET.match(value):
        return None
    return Finding("SECRET", start, start + len(value))


def _assignments(text: str) -> Iterator[Finding]:
    for m in _ASSIGNMENT.finditer(text):
        if _PASSWORD_NAME.search(m.group("name")):
            finding = _unquoted(m.group("value"), m.start("value"))
            if finding is not None:
                yield finding


def _urls(text: str) -> Iterator[Finding]:
    for m in _URL.finditer(text):
        url = m.group().rstrip(".,);]")
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        netloc_start = m.start() + url.index("://") + 3
        userinfo = parts.netloc[: parts.netloc.rfind("@")] if "@" in parts.netloc else ""
        colon = userinfo.find(":")
        if colon >= 0 and colon + 1 < len(userinfo):
            yield Finding("SECRET", netloc_start + colon + 1, netloc_start + len(userinfo))
        if parts.query:
            yield from _query_values(url, m.start())


def _query_values(url: str, offset: int) -> Iterator[Finding]:
    query_start = url.index("?") + 1
    end = url.find("#", query_start)
    query = url[query_start : end if end >= 0 else len(url)]
    pos = 0
    for field in query.split("&"):
        name, eq, value = field.partition("=")
        if eq and value and _SECRET_PARAM.match(name) and not _NOT_A_SECRET.match(value):
            begin = offset + query_start + pos + len(name) + 1
            yield Finding("SECRET", begin, begin + len(value))
        pos += len(field) + 1
