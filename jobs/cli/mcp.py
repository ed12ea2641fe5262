"""`episodes mcp`: one user's memory as MCP tools over stdio, for Claude Code and Claude Desktop."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

from jobs import config
from jobs.cli.base import Context
from jobs.config import Settings
from jobs.errors import ConfigError

if TYPE_CHECKING:  # imported when the server starts: `episodes mcp --help` starts at once
    from jobs.db import Database

log = logging.getLogger("jobs.cli")


def no_embedded_database(settings: Settings, command: str) -> str | None:
    """Why ``command`` (a tenant-facing process: the API, the MCP server) may not start on the embedded
    server, or None. It never creates one: an MCP client starts its server in its own environment (Claude
    Desktop's has no EPISODES_HOME), where a new, empty database in the default folder is not the one the
    hooks fill, and one it could not use either (no schema, no login role: it failed ~10 s later)."""
    if not settings.embedded or settings.service_database_url or (settings.pgdata / "PG_VERSION").is_file():
        return None
    home = "EPISODES_HOME" if config.env("EPISODES_HOME") else "EPISODES_HOME unset: the default folder"
    return (
        f"no episodes database in {settings.pgdata} ({home}), and `{command}` does not create one; "
        "give it the EPISODES_HOME (or DATABASE_URL) that `episodes init` and the hooks use "
        "(`episodes claude-code install --mcp` registers the MCP server with it)"
    )


def service_database(obj: Context, application_name: str) -> Database:
    """The database as the API or the MCP server logs in to it (:meth:`Database.for_service`), its schema
    checked; a role that could RESET ROLE out of episodes_app is said loudly on stderr and in the log. An
    embedded server that does not exist yet is refused (:func:`no_embedded_database`), not created."""
    from jobs import migrate
    from jobs.db import Database, service_role_warning

    refused = no_embedded_database(obj.settings, application_name)
    if refused is not None:
        raise ConfigError(refused)
    db = Database.for_service(obj.settings, application_name)
    try:
        with db.login() as conn:
            migrate.require_current(conn)
            warning = service_role_warning(conn)
    except BaseException:
        db.close()
        raise
    if warning is not None:
        click.echo(f"episodes: WARNING: {warning}", err=True)
        log.warning("%s", warning, extra={"action": "service_role_too_strong"})
    return db


@click.command("mcp")
@click.option("--tenant", required=True, help="Tenant of the user.")
@click.option("--user", "user_id", required=True, help="The user whose memory the tools read (and forget).")
@click.option("--read-only", is_flag=True, help="Leave out the write scope: forget_episode answers forbidden.")
@click.pass_obj
def mcp_command(obj: Context, tenant: str, user_id: str, read_only: bool) -> None:
    """Serve the memory of one user as MCP tools over stdin/stdout (the MCP stdio transport).

    An MCP client starts it and talks to it; it runs until the client closes stdin. Tools:
    recall_memory, search_episodes, list_events, get_episode, forget_episode. Logs go to stderr.

    Claude Code: episodes claude-code install --mcp (or: claude mcp add episodes -e EPISODES_HOME=... --
    episodes mcp --tenant acme --user u-maria). Give the client the EPISODES_HOME (or DATABASE_URL) the
    hooks use: it starts the server in its own environment, and `episodes mcp` never creates a database.

    It logs in as episodes_service, or EPISODES_SERVICE_DATABASE_URL (docs/operations.md, "Database roles").
    """
    from jobs.recall.shared import shared_recaller
    from jobs.service.mcp_tools import Caller, build_server

    if not tenant.strip() or not user_id.strip():
        raise click.UsageError("--tenant and --user must not be empty")
    db = service_database(obj, "episodes mcp")  # one line and exit 1 now if unreachable or not current
    caller = Caller(tenant, user_id, ("recall",) if read_only else ("recall", "write"))
    server = build_server(db, shared_recaller(db), lambda ctx: caller)
    try:
        server.run("stdio")
    finally:
        db.close()
