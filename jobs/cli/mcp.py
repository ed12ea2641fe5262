"""`episodes mcp`: one user's memory as MCP tools over stdio, for Claude Code and Claude Desktop."""

from __future__ import annotations

import click

from jobs.cli.base import Context


@click.command("mcp")
@click.option("--tenant", required=True, help="Tenant of the user.")
@click.option("--user", "user_id", required=True, help="The user whose memory the tools read (and forget).")
@click.option("--read-only", is_flag=True, help="Leave out the write scope: forget_episode answers forbidden.")
@click.pass_obj
def mcp_command(obj: Context, tenant: str, user_id: str, read_only: bool) -> None:
    """Serve the memory of one user as MCP tools over stdin/stdout (the MCP stdio transport).

    An MCP client starts it and talks to it; it runs until the client closes stdin. Tools:
    recall_memory, search_episodes, list_events, get_episode, forget_episode. Logs go to stderr.

    Claude Code: claude mcp add episodes -- episodes mcp --tenant acme --user u-maria
    """
    from jobs.recall import shared_recaller
    from jobs.service.mcp_tools import Caller, build_server

    if not tenant.strip() or not user_id.strip():
        raise click.UsageError("--tenant and --user must not be empty")
    db = obj.database()  # one line and exit 1 now if the database is unreachable or its schema not current
    caller = Caller(tenant, user_id, ("recall",) if read_only else ("recall", "write"))
    server = build_server(db, shared_recaller(db), lambda ctx: caller)
    server.run("stdio")
