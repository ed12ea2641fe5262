"""API keys: 256 random bits shown once, stored as their SHA-256, scoped to one tenant.

Why SHA-256 and no slow KDF (bcrypt, scrypt, argon2): a slow hash protects low-entropy secrets
that can be guessed (passwords). A key is 32 bytes from :func:`secrets.token_bytes`; nobody can
enumerate 2^256 candidates however fast each check is, so a stolen table of hashes yields no key,
and verification stays one hash and one indexed lookup.

The table ``api_keys`` (migration 0010) is managed (create, list, revoke) only as the owner
(``Database.admin``, the CLI). The service logs in as episodes_service (jobs.db), which has no
privilege on it either: it verifies a key and asks whether one is live through owner-rights functions
granted to it alone (migration 0023), which return what the answer needs and never a hash.

:class:`KeyVerifier` caches each verification for ``Settings.api_key_cache_seconds`` (5 s,
per process): a revoked key stops working within that bound, and a busy key costs one lookup (which
also records ``last_used_at``) per bound instead of one per request.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.concepts import IMPLIED_SCOPES, SCOPES, Scope
from jobs.sql import query

if TYPE_CHECKING:  # jobs.db (psycopg) is imported where a key is read or written: `episodes keys --help`
    from jobs.db import Database, Row  # lists SCOPES from here without it

PREFIX = "ep_"
_SECRET = re.compile(r"ep_[A-Za-z0-9_-]{43}")  # what create_key makes: PREFIX + 32 bytes, unpadded base64url
_PREFIX_LEN = len(PREFIX) + 8  # shown in listings and accepted by revoke; never enough to use the key


@dataclass(frozen=True)
class ApiKey:
    """A key as stored (never the key itself)."""

    id: int
    prefix: str
    tenant_id: str
    name: str | None
    scopes: tuple[str, ...]
    rate_limit: float | None
    created_at: dt.datetime | None = None
    last_used_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = None

    def allows(self, scope: Scope) -> bool:
        """Whether the key holds ``scope``, itself or through ``write`` (ingest and edit)."""
        return scopes_allow(self.scopes, scope)

    @classmethod
    def from_row(cls, row: Row) -> ApiKey:
        return cls(
            id=row["id"],
            prefix=row["prefix"],
            tenant_id=row["tenant_id"],
            name=row["name"],
            scopes=tuple(row["scopes"]),
            rate_limit=row["rate_limit"],
            created_at=row.get("created_at"),
            last_used_at=row.get("last_used_at"),
            revoked_at=row.get("revoked_at"),
        )


def scopes_allow(scopes: Sequence[str], scope: str) -> bool:
    """Whether ``scopes`` (a key's, or an MCP session's) hold ``scope``, itself or through ``write``."""
    return any(scope == held or scope in IMPLIED_SCOPES.get(held, ()) for held in scopes)


def key_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def parse_scopes(text: str) -> tuple[str, ...]:
    """``recall,ingest`` -> ('recall', 'ingest'); an unknown scope raises ValueError naming it."""
    scopes = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValueError(
            f"unknown scope {', '.join(unknown) or '(none)'}; use a comma-separated list of {', '.join(SCOPES)}"
        )
    return scopes


def create_key(
    db: Database, tenant_id: str, scopes: Sequence[str], *, name: str | None = None, rate_limit: float | None = None
) -> tuple[ApiKey, str]:
    """Store a new key; return it and the secret (the only time the secret exists outside its holder)."""
    from jobs.db import one

    secret = PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
    with db.admin() as conn:
        row = one(
            conn.execute(
                query("api_key_insert"),
                {
                    "prefix": secret[:_PREFIX_LEN],
                    "key_hash": key_hash(secret),
                    "tenant_id": tenant_id,
                    "name": name,
                    "scopes": list(scopes),
                    "rate_limit": rate_limit,
                },
            )
        )
    return ApiKey.from_row(row), secret


def list_keys(db: Database) -> list[ApiKey]:
    with db.admin() as conn:
        return [ApiKey.from_row(row) for row in conn.execute(query("api_key_list")).fetchall()]


def revoke_key(db: Database, id_or_prefix: str) -> ApiKey | None:
    """Revoke by id or prefix; None when no key matches."""
    with db.admin() as conn:
        row = conn.execute(query("api_key_revoke"), {"ref": id_or_prefix.strip()}).fetchone()
    return None if row is None else ApiKey.from_row(row)


def key_is_live(db: Database, key_id: int) -> bool:
    """Whether the key ``key_id`` exists and is not revoked: a memory link dies with the key that issued it."""
    from jobs.db import one

    with db.login() as conn:
        return bool(one(conn.execute(query("api_key_is_live"), {"key_id": key_id}))["live"])


class KeyVerifier:
    """Verifies bearer secrets, trusting each answer (yes or no) for ``ttl`` seconds.

    Two caches, so that no flood of unknown keys can push a valid one out: the keys found (as many as
    the table holds live keys that were used, each dropped once its ``ttl`` has passed) and the secrets
    not found, at most :attr:`MAX_NEGATIVE`, the least recently asked dropped first. A secret not of the
    shape :func:`create_key` makes is refused without a lookup."""

    MAX_NEGATIVE = 10_000  # unknown secrets remembered (each ~100 bytes); past it the least recent goes

    def __init__(self, db: Database, ttl: float) -> None:
        self.db = db
        self.ttl = ttl
        self._positive: dict[bytes, tuple[float, ApiKey]] = {}
        self._negative: OrderedDict[bytes, float] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, secret: str) -> tuple[bool, ApiKey | None]:
        """(True, what :meth:`verify` would answer) when that needs no database lookup, else (False, None)."""
        if not _SECRET.fullmatch(secret):
            return True, None
        digest = key_hash(secret)
        now = time.monotonic()
        with self._lock:
            found = self._positive.get(digest)
            if found is not None:
                if found[0] > now:
                    return True, found[1]
                del self._positive[digest]
            refused = self._negative.get(digest)
            if refused is not None:
                if refused > now:
                    self._negative.move_to_end(digest)
                    return True, None
                del self._negative[digest]
        return False, None

    def verify(self, secret: str) -> ApiKey | None:
        """The live key for ``secret``, or None (unknown, malformed or revoked)."""
        known, key = self.cached(secret)
        if known:
            return key
        digest = key_hash(secret)
        now = time.monotonic()
        with self.db.login() as conn:
            row = conn.execute(query("api_key_verify"), {"key_hash": digest}).fetchone()
        key = None if row is None else ApiKey.from_row(row)
        with self._lock:
            if key is not None:
                self._positive[digest] = (now + self.ttl, key)
            else:
                self._negative[digest] = now + self.ttl
                self._negative.move_to_end(digest)
                while len(self._negative) > self.MAX_NEGATIVE:
                    self._negative.popitem(last=False)
        return key
