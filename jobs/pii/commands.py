"""Passwords in shell commands, connection strings and URLs (``[SECRET]``), as an agent's transcript
quotes them: the ones a label-and-value rule misses because the label is glued to a prefix
(``PGPASSWORD=…``, ``sslpassword=…``), is a flag (``mysql -p…``, ``docker login -p …``,
``redis-cli -a …``, ``sshpass -p …``, ``--password …``) or is no word at all (``curl -u user:pass``,
``https://user:pass@host``).

A flag is read as a password only in the command that gives it that meaning: ``-p`` is a password
for mysql (glued to its value: ``mysql -p db`` prompts), sshpass and a registry ``login``, and a
port for ssh and docker run; ``-a`` is a password for redis-cli only. Only the password is
replaced: the user name, the host and the rest of the command stay. Assignments and URLs are found
by :func:`jobs.logs.secret_spans`, the one rule that also keeps settings' secrets out of logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from jobs.logs import secret_spans, unquoted_value
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
    # ldapsearch / ldapmodify / ldapadd / ldapdelete / ldappasswd -w secret.
    (("ldap",), re.compile(rf"{_CMD}ldap\w*{_ARGS}\s-w\s+{_VALUE}")),
    # Java's keytool and jarsigner: -storepass / -keypass / -srcstorepass / -deststorepass secret.
    (("pass",), re.compile(rf"(?<![\w-])-(?:src|dest)?(?:store|key)pass\s+{_VALUE}")),
    # openssl -pass / -passin / -passout pass:secret (env:VAR and file:path name no secret).
    (("pass:",), re.compile(r"(?<![\w-])-pass(?:in|out)?\s+['\"]?pass:(?P<value>[^\s;&|'\"`<>()]{1,256})")),
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
_COMMAND_HINTS = ("mysql", "mariadb", "sshpass", "login", "-cli", "mongo", "ldap", "pass", "--", "curl", "http", "xh ")


def find_command_secrets(text: str, clues: Clues) -> Iterator[Finding]:
    """``SECRET`` findings: passwords in commands, assignments, connection strings and URLs."""
    lowered = clues.lowered
    for start, end in secret_spans(text):  # NAME=value assignments and URLs, shared with the logs
        yield Finding("SECRET", start, end)
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
    span = unquoted_value(value, start)
    return None if span is None else Finding("SECRET", *span)
