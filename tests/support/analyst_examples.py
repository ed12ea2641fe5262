"""The example transcripts (examples/*.jsonl) summarised once per process, and the fixtures that hand a test a
copy of them on each backend: ``edb`` (a fresh copy for a test that changes data) and ``ro_db`` (one copy per
module, for tests that only read). tests/conftest.py loads this module as a plugin."""

from __future__ import annotations

import datetime as dt
import os
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
import pytest
from conftest import BACKENDS, EXAMPLES
from psycopg import sql

from jobs.config import Settings
from jobs.db import Database, one, set_local
from jobs.report.data import analyst_role
from jobs.sql import query
from support import fake_anthropic as fa
from support.databases import url_for
from support.episode_responder import resolving_responder


class HashEmbedder:
    """Deterministic bag-of-words vectors (feature hashing), a fast stand-in for MiniLM in tests."""

    name = "test-hash"
    dim = 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
            norm = float(np.linalg.norm(out[i]))
            out[i] /= norm or 1.0
        return out


_templates: dict[str, str] = {}


def examples_template(admin_url: str, template_db: str) -> str:
    """A database with the example transcripts summarised (built once per process); its name."""
    if admin_url in _templates:
        return _templates[admin_url]
    name = f"analyst_examples_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    _summarise_examples(url_for(admin_url, name))
    _templates[admin_url] = name
    return name


def _summarise_examples(url: str) -> None:
    """Ingest and summarise the example transcripts into the (migrated, empty) database at ``url``."""
    settings = Settings(database_url=url, max_retries=0, max_attempts=3, model_timeout_s=5.0)
    from jobs.extract.claude import AnthropicExtractor
    from jobs.extract.offline import OfflineExtractor
    from jobs.ingest import ingest
    from jobs.summarize import run_summarize

    embedder = HashEmbedder()
    with Database(settings) as db:
        report = ingest(db, [EXAMPLES / "acme.jsonl", EXAMPLES / "globex.jsonl"])
        assert report.inserted == 38 and not report.rejected
        done = run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder, tenant="acme")
        assert done.counts["done"] == 22, done.counts
    with fa.FakeAnthropic(responder=resolving_responder) as fake:
        fake.enqueue(fa.refusal(), fa.refusal(), fa.server_error())
        llm = settings.with_(anthropic_api_key="test-key", anthropic_base_url=fake.base_url, extractor="anthropic")
        with Database(llm) as db, AnthropicExtractor(llm) as extractor:
            done = run_summarize(db, extractor=extractor, embedder=embedder, tenant="globex")
            assert (done.counts["dead"], done.counts["failed"], done.counts["done"]) == (1, 1, 12), done.counts
    with Database(settings) as db:
        resolve(db, "acme-tom-2024-01-16", "acme-tom-2024-02-06", "open_question")
        resolve(db, "acme-tom-2024-01-16", "acme-tom-2024-02-06", "commitment", due=dt.date(2024, 1, 26))
        resolve(db, "acme-maria-2024-02-13", "acme-maria-2024-03-05", "open_question")
        resolve(db, "acme-maria-2024-02-13", "acme-maria-2024-03-05", "commitment", due=dt.date(2024, 3, 1))


def resolve(db: Database, raised_in: str, resolved_in: str, type: str, due: dt.date | None = None) -> int:
    """Resolve the first item of ``type`` raised in one session by a later session, as the summarize
    job does when the model lists it in resolved_items (query resolve_item, at the later session's end)."""
    tenant = raised_in.split("-")[0]
    with db.tenant(tenant) as conn:
        item = conn.execute(
            "SELECT ev.id, ev.user_id FROM episode_events ev "
            "JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id "
            "WHERE e.tenant_id = %s AND e.session_id = %s AND e.status = 'current' AND ev.type = %s "
            "AND (%s::date IS NULL OR ev.due = %s::date) ORDER BY ev.ordinal LIMIT 1",
            (tenant, raised_in, type, due, due),
        ).fetchone()
        assert item, f"the extractor found no {type} in {raised_in}"
        later = one(
            conn.execute(
                "SELECT id, ended_at FROM episodes WHERE tenant_id = %s AND session_id = %s AND status = 'current'",
                (tenant, resolved_in),
            )
        )
        rows = conn.execute(
            query("resolve_item"),
            {
                "event_id": item["id"],
                "episode_id": later["id"],
                "resolved_at": later["ended_at"],
                "tenant_id": tenant,
                "user_id": item["user_id"],
            },
        ).fetchall()
        assert len(rows) == 1
        return int(item["id"])


def _examples_copy(admin_url: str, template_db: str) -> tuple[str, Callable[[], None]]:
    """A clone of the summarised examples on the single PostgreSQL: its URL and how to drop it."""
    template = examples_template(admin_url, template_db)
    name = f"analyst_{os.getpid()}_{os.urandom(3).hex()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')

    def drop() -> None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return url_for(admin_url, name), drop


# The tables a copy of the examples fills.
COPIED = (
    "job_runs",
    "model_batches",
    "transcripts",
    "episodes",
    "episode_events",
    "episode_entities",
    "episode_lineage",
    "model_calls",
    "model_batch_items",
    "erasures",
    "episode_corrections",
)


def _copy_examples(src_url: str, dst_url: str) -> None:
    """Copy every row of the summarised examples at ``src_url`` into the empty database at ``dst_url``.

    How the cluster gets the examples: a cluster database cannot be cloned from a template (its shards
    live on the workers), and summarising again for every test would be slow; a copy also gives both
    backends the very same rows. The rows go in as they are, ids and update counts included, with
    triggers and foreign-key checks off for the copy (``session_replication_role = replica``, which
    SET LOCAL carries to the workers); the sequences are then moved past the ids, so rows a test
    inserts get fresh ones as usual."""
    with psycopg.connect(src_url) as src, psycopg.connect(dst_url) as dst:
        set_local(dst, session_replication_role="replica")
        for table in COPIED:
            columns = sql.SQL(", ").join(
                sql.Identifier(r[0])
                for r in src.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                    "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
                    (table,),
                )
            )
            with (
                src.cursor().copy(sql.SQL("COPY {} ({}) TO STDOUT").format(sql.Identifier(table), columns)) as out,
                dst.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), columns)) as into,
            ):
                for block in out:
                    into.write(block)
            sequence = dst.execute("SELECT to_regclass(%s)", (f"{table}_id_seq",)).fetchone()  # 0016's names
            if sequence and sequence[0]:
                dst.execute(
                    sql.SQL("SELECT setval(%s, max(id)) FROM {} HAVING count(*) > 0").format(sql.Identifier(table)),
                    (sequence[0],),
                )


def _cluster_examples(request: pytest.FixtureRequest, name: str | None) -> tuple[str, Callable[[], None] | None]:
    """The summarised examples on the Citus cluster: in a database ``name`` of their own (dropped by the
    returned function), or with ``name=None`` in the process's cluster database, emptied first."""
    from support import citus_cluster

    if (reason := citus_cluster.unreachable()) is not None:
        pytest.skip(reason)
    admin_url, template_db = request.getfixturevalue("admin_url"), request.getfixturevalue("template_db")
    source = url_for(admin_url, examples_template(admin_url, template_db))
    drop: Callable[[], None] | None = None
    if name is None:
        url = request.getfixturevalue("citus_url")
        citus_cluster.empty(url)
    else:
        url = citus_cluster.create_database(name)

        def drop() -> None:
            citus_cluster.drop_database(name)

    _copy_examples(source, url)
    return url, drop


@pytest.fixture(params=BACKENDS)
def edb(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """A fresh copy of the summarised examples for one test that changes data."""
    if request.param == "citus":
        url, drop = _cluster_examples(request, None)
    else:
        url, drop = _examples_copy(request.getfixturevalue("admin_url"), request.getfixturevalue("template_db"))
    monkeypatch.setenv("DATABASE_URL", url)
    try:
        with Database(Settings(database_url=url)) as database:
            yield database
    finally:
        if drop is not None:
            drop()


@pytest.fixture(scope="module", params=BACKENDS)
def ro_db(request: pytest.FixtureRequest) -> Iterator[Database]:
    """One copy of the summarised examples shared by a module's tests that only read."""
    if request.param == "citus":
        url, drop = _cluster_examples(request, f"episodes_citus_{os.getpid()}_examples")
    else:
        url, drop = _examples_copy(request.getfixturevalue("admin_url"), request.getfixturevalue("template_db"))
    try:
        with Database(Settings(database_url=url)) as database:
            yield database
    finally:
        if drop is not None:
            drop()


def owner(db: Database, sql: str, params: Sequence[object] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return conn.execute(sql, params).fetchall()


def as_role(db: Database, role: str, sql: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """Run ``sql`` as ``role`` in a transaction, with episodes.tenant_id set when ``tenant`` is given."""
    with db.pool.connection() as conn:
        with conn.transaction():
            set_local(conn, **({} if tenant is None else {"episodes.tenant_id": tenant}))
            with analyst_role(conn, role):
                return conn.execute(sql).fetchall()
