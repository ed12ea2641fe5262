"""A scratch database for an evaluation: created beside the configured one, migrated, dropped at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from jobs import migrate
from jobs.config import Settings
from jobs.db import Database
from jobs.embeddings import Embedder


@contextmanager
def scratch_database(settings: Settings, embedder: Embedder) -> Iterator[Database]:
    """A fresh, migrated database beside the configured one; dropped on exit."""
    base = Database(settings)
    name = f"episodes_eval_{os.getpid()}"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    try:
        with base.connect(autocommit=True) as conn:
            conn.execute(drop)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        info = psycopg.conninfo.conninfo_to_dict(base.url)
        info["dbname"] = name
        db = Database(settings.with_(database_url=psycopg.conninfo.make_conninfo("", **info)))
        try:
            with db.connect() as conn:
                migrate.migrate(conn, embedding_dim=embedder.dim, embedder=embedder.name)
            yield db
        finally:
            db.close()
            with base.connect(autocommit=True) as conn:
                conn.execute(drop)
    finally:
        base.close()
