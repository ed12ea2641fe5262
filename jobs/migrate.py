"""Numbered SQL migrations (sql/migrations/NNNN_name.sql), applied in order, then the analyst views.

Each migration and its ``schema_migrations`` row commit in one transaction, so a failure leaves
the schema at the previous version. A session advisory lock serialises concurrent ``init`` calls.

The analyst views are not migrations: each is defined once, in sql/views/NN_name.sql, and every
``migrate`` that leaves the schema current drops them and creates them again from those files, in one
transaction (:func:`apply_views`). The migrations that once defined them (0004, 0008, 0009, 0012,
0017) stay as they are: they are what databases already ran.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import psycopg

from jobs.errors import EmbeddingDimensionMismatch, EpisodesError, SchemaNotInitialised, SchemaTooNew
from jobs.resources import sql_dir

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_VIEW_FILE = re.compile(r"^\d{2}_[a-z0-9_]+\.sql$")
_LOCK_KEY = 0x65706973  # "epis"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


@dataclass(frozen=True)
class ViewFile:
    name: str
    sql: str


def available() -> list[Migration]:
    """Migrations shipped with this version of the code, in order."""
    return _shipped()


def _shipped() -> list[Migration]:
    found = []
    for entry in (sql_dir() / "migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def view_files() -> list[ViewFile]:
    """sql/views/NN_name.sql in the order of their numbers: 00_drop.sql first, each view after the views it
    reads, 90_scoped.sql (the public views over the internal ones) last."""
    found = [
        ViewFile(entry.name, entry.read_text(encoding="utf-8"))
        for entry in (sql_dir() / "views").iterdir()
        if _VIEW_FILE.match(entry.name)
    ]
    return sorted(found, key=lambda f: f.name)


def apply_views(conn: psycopg.Connection[Any]) -> None:
    """Drop the analyst views and create them from sql/views, in one transaction: afterwards the database
    holds exactly the views of the files, with their options, comments and grants. Nothing changes when
    it fails (a view of someone else's that reads an analyst view stops the drop: the error says which)."""
    try:
        with conn.transaction():
            for view in view_files():
                conn.execute(view.sql)
    except psycopg.errors.DependentObjectsStillExist as exc:
        depends = exc.diag.message_detail or exc.diag.message_primary or str(exc)
        raise EpisodesError(
            f"The analyst views could not be re-created: {depends}. Drop that object, run `episodes init` "
            "again and create it anew afterwards (the analyst views are re-created from sql/views by every "
            "`episodes init`); the schema is current and the previous analyst views are unchanged."
        ) from None
    log.debug("analyst views re-created", extra={"action": "migrate_views"})


def code_version() -> int:
    migrations = available()
    return migrations[-1].version if migrations else 0


def current_version(conn: psycopg.Connection[Any]) -> int | None:
    """The schema version of the database, or None when it was never initialised."""
    row = conn.execute("SELECT to_regclass('public.schema_migrations') IS NOT NULL AS present").fetchone()
    if not _first(row):
        return None
    row = conn.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations").fetchone()
    return int(_first(row))


def migrate(conn: psycopg.Connection[Any], *, embedding_dim: int, embedder: str) -> list[Migration]:
    """Bring the schema up to date; return the migrations applied (empty when already current)."""
    conn.autocommit = True
    conn.add_notice_handler(_log_warning)
    conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    try:
        conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version    integer PRIMARY KEY,
                   name       text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        have = current_version(conn) or 0
        applied_versions = {
            r[0] if not isinstance(r, dict) else r["version"]
            for r in conn.execute("SELECT version FROM schema_migrations").fetchall()
        }
        code = code_version()
        if have > code:
            raise SchemaTooNew(
                f"The database schema is at version {have}, newer than this code ({code}): upgrade before "
                "using this database."
            )
        applied = []
        for migration in available():
            if migration.version in applied_versions:
                continue  # a gap (a migration that arrived out of order) is still applied
            with conn.transaction():
                conn.execute("SELECT set_config('episodes.embedding_dim', %s, true)", (str(embedding_dim),))
                conn.execute("SELECT set_config('episodes.embedder', %s, true)", (embedder,))
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            log.debug(
                "applied migration %04d_%s",
                migration.version,
                migration.name,
                extra={"action": "migrate_step", "version": migration.version},
            )
            applied.append(migration)
        if applied_versions.union(m.version for m in applied) >= {m.version for m in _shipped()}:
            apply_views(conn)  # the files are today's views: on a schema older than the code's, left alone
        if applied:  # one line for the run; `episodes init` prints the names on stdout
            log.info(
                "schema migrated from version %d to %d",
                have,
                applied[-1].version,
                extra={"action": "migrate", "applied": len(applied)},
            )
        check_embedding_dim(conn, embedding_dim, embedder)
        return applied
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
        conn.remove_notice_handler(_log_warning)


def _log_warning(diag: psycopg.errors.Diagnostic) -> None:
    """A WARNING of our migrations (its text starts with "episodes: ", e.g. 0027's when the migrating role may
    not revoke TEMPORARY) is logged with its hint: psycopg drops server notices that no handler takes. Other
    servers' warnings are not (Citus warns, expectedly, of every view over a table not distributed yet)."""
    if diag.severity_nonlocalized == "WARNING" and (diag.message_primary or "").startswith("episodes: "):
        hint = f" {diag.message_hint}" if diag.message_hint else ""
        log.warning("%s.%s", diag.message_primary, hint, extra={"action": "migrate_warning"})


def require_current(conn: psycopg.Connection[Any]) -> int:
    """The schema version, when it is the one this code needs; else the error saying what to run."""
    have = current_version(conn)
    if not have:
        raise SchemaNotInitialised()
    if have < code_version():
        raise SchemaNotInitialised(
            f"The database schema is at version {have}; this code needs {code_version()}. "
            "Run `episodes init` to upgrade it."
        )
    if have > code_version():
        raise SchemaTooNew()
    return have


def allow_service_login(conn: psycopg.Connection[Any]) -> None:
    """Let episodes_service (migration 0023) log in. For the embedded server only, which trusts every
    role on its private Unix socket: elsewhere the operator gives it a password (docs/operations.md, "Database roles")."""
    conn.execute("ALTER ROLE episodes_service LOGIN")


def check_embedding_dim(conn: psycopg.Connection[Any], embedding_dim: int, embedder: str = "NAME") -> None:
    """Refuse a configured embedder whose dimension differs from the database's, saying how to switch."""
    row = conn.execute("SELECT value FROM episodes_settings WHERE key = 'embedding_dim'").fetchone()
    stored = int(_first(row))
    if stored != embedding_dim:
        name = _first(conn.execute("SELECT value FROM episodes_settings WHERE key = 'embedder'").fetchone())
        raise EmbeddingDimensionMismatch(
            f"The database stores {stored}-dimensional embeddings ({name}) but the configured embedder makes "
            f"{embedding_dim}. Run `episodes reembed --embedder {embedder}` to switch the database to it "
            f"(recall keeps answering meanwhile), or set EPISODES_EMBEDDER={name}."
        )


def _first(row: object) -> Any:
    """First column of a row from either a tuple or a dict row factory."""
    if row is None:
        return None
    if isinstance(row, dict):
        return next(iter(row.values()))
    if isinstance(row, tuple):
        return row[0]
    raise TypeError(f"unexpected row type {type(row).__name__}")
