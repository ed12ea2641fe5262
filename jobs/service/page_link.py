"""The signed link to a user's memory page: who it is for, until when, and whether it is genuine.

A token is ``<payload>.<mac>``, both unpadded base64url: the payload is the JSON list ``[tenant_id,
user_id, expires_unix, key_id]`` and the mac is HMAC-SHA256 of the payload's text under the link
secret. ``key_id`` is the API key that asked for the link: the page checks on every request that the
key is still live (:func:`jobs.service.keys.key_is_live`), so revoking a key withdraws every link it
handed out, and that the user was not erased since the link was made. Nothing is stored per link:
any worker holding the secret can check one, and a link is refused when its mac does not match
(compared in constant time with :func:`hmac.compare_digest`), when it has expired, or when its
payload is not the shape above. The tenant and the user come from the verified payload only, so a
link cannot be pointed at another user or tenant.

The secret is ``EPISODES_LINK_SECRET`` when set; otherwise 32 random bytes (64 hex characters) drawn
by the database on first use and kept in the owner-only ``episodes_secrets`` (key
``memory_link_secret``, written once by the owner-rights function ``episodes_link_secret()``,
migration 0027, which takes no argument: no caller can choose the secret), so every worker and every
restart of the service agrees on it. Rotating it (set the variable, or delete the row) invalidates
every link handed out.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import json
from dataclasses import dataclass

from jobs.db import Database, one
from jobs.sql import query

LIFETIME = dt.timedelta(minutes=15)


class LinkRefused(Exception):
    """A link that is not genuine: altered, truncated, or signed with another secret."""


class LinkExpired(LinkRefused):
    """A genuine link past its expiry."""


@dataclass(frozen=True)
class MemoryLink:
    """What a verified token grants: the page of one user of one tenant, until ``expires_at``, while
    the key ``key_id`` that asked for it is live."""

    tenant_id: str
    user_id: str
    expires_at: dt.datetime
    key_id: int

    @property
    def issued_at(self) -> dt.datetime:
        """When the link was made, to the second below (an erasure from then on withdraws it)."""
        return self.expires_at - LIFETIME


def link_secret(db: Database) -> bytes:
    """The signing secret: the setting, else the one kept in the database (made on first use)."""
    if db.settings.link_secret is not None:
        return db.settings.link_secret.encode("utf-8")
    with db.login() as conn:  # the service's role: through the function granted to it (jobs.db)
        row = one(conn.execute(query("page_link_secret")))
    return str(row["value"]).encode("utf-8")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    """Strict: a character outside the alphabet is an error, not skipped (one token, one spelling)."""
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def _mac(secret: bytes, payload: str) -> bytes:
    return hmac.new(secret, payload.encode("ascii"), hashlib.sha256).digest()


def sign(secret: bytes, tenant_id: str, user_id: str, key_id: int, now: dt.datetime) -> tuple[str, MemoryLink]:
    """A token for ``user_id`` of ``tenant_id``, asked for by the key ``key_id``, valid for
    :data:`LIFETIME` from ``now``."""
    expires = int((now + LIFETIME).timestamp())
    payload = _b64(json.dumps([tenant_id, user_id, expires, key_id], separators=(",", ":")).encode("utf-8"))
    token = f"{payload}.{_b64(_mac(secret, payload))}"
    return token, MemoryLink(tenant_id, user_id, dt.datetime.fromtimestamp(expires, dt.UTC), key_id)


def verify(secret: bytes, token: str, now: dt.datetime) -> MemoryLink:
    """The link ``token`` grants; :class:`LinkRefused` if it is not genuine, :class:`LinkExpired` if it was."""
    payload, dot, mac = token.partition(".")
    if not dot or len(token) > 2000 or not token.isascii():
        raise LinkRefused("not a memory link")
    if not hmac.compare_digest(_b64(_mac(secret, payload)), mac):  # the one spelling this service writes
        raise LinkRefused("the link was altered or is not one this service made")
    try:
        tenant_id, user_id, expires, key_id = json.loads(_unb64(payload))  # a link without a key is refused
        expires_at = dt.datetime.fromtimestamp(expires, dt.UTC)
    except (binascii.Error, ValueError, TypeError, OverflowError, OSError):
        raise LinkRefused("not a memory link") from None
    if not (isinstance(tenant_id, str) and isinstance(user_id, str) and _integer(expires) and _integer(key_id)):
        raise LinkRefused("not a memory link")
    if now >= expires_at:
        raise LinkExpired(f"the link expired at {expires_at:%H:%M} UTC")
    return MemoryLink(tenant_id, user_id, expires_at, key_id)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
