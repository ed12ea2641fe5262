"""`episodes claude-code share | unshare | shared`: repositories whose sessions share one memory (issue 49).

A Claude Code project is its git repository; these put repositories in a group (per user, stored in the
database: jobs.claude_code.groups), so a session in any of them recalls the episodes of all of them. Nothing
is moved: leaving the group undoes it. They run where the database is (local mode, or beside `episodes api`
with --tenant), as `rescope` does.
"""

from __future__ import annotations

import click

from jobs.cli.base import Context
from jobs.wording import counted

_AS_INSTALLED = "[default: as `episodes claude-code install` was told, else {}]"
_REMOTE = (
    "the hooks are installed in remote mode; run `episodes claude-code {} --tenant T --user U` where the "
    "database is (beside `episodes api`), naming the repositories by their remote URLs"
)

_tenant = click.option("--tenant", default=None, help="The tenant of the sessions. " + _AS_INSTALLED.format("local"))
_user = click.option("--user", default=None, help="The user whose memory it is. " + _AS_INSTALLED.format("login name"))
_dry_run = click.option("--dry-run", is_flag=True, help="Say what would change, and write nothing.")


def _who(tenant: str | None, user: str | None, command: str) -> tuple[str, str]:
    from jobs.claude_code import choices

    chosen = choices.resolve(tenant=tenant, user=user)
    if chosen.api:
        raise click.UsageError(_REMOTE.format(command))
    return chosen.tenant, chosen.user


@click.command("share")
@click.argument("repositories", nargs=-1, required=True, metavar="REPO_OR_FOLDER...")
@click.option("--name", default=None, help="The group's name (default: the group one of them is in, else the first's).")
@_tenant
@_user
@_dry_run
@click.pass_obj
def share_command(
    obj: Context, repositories: tuple[str, ...], name: str | None, tenant: str | None, user: str | None, dry_run: bool
) -> None:
    """Let repositories share memory: a session in any of them recalls the sessions of all of them.

    Name each by a folder of it on this machine (any worktree or clone) or by its remote URL; a folder
    outside git stands for itself. A repository is in one group at most; naming one already in a group adds
    the others to it. Nothing is moved: `episodes claude-code unshare` undoes it. List with `shared`."""
    from jobs.claude_code.groups import share

    tenant_id, user_id = _who(tenant, user, "share")
    change = share(obj.database(), tenant_id, user_id, list(repositories), name=name, dry_run=dry_run)
    verb = "would add" if dry_run else "added"
    for member in change.added:
        click.echo(f"{verb} {member.repository} ({member.purpose})")
    for member in change.already:
        click.echo(f"already in it: {member.repository}")
    click.echo(
        f"group {change.group} of {user_id}: {verb} {counted(len(change.added), 'repository')}."
        + (" Nothing written (--dry-run)." if dry_run else "")
    )


@click.command("unshare")
@click.argument("repositories", nargs=-1, metavar="[REPO_OR_FOLDER]...")
@click.option("--group", default=None, help="Dissolve this whole group.")
@_tenant
@_user
@_dry_run
@click.pass_obj
def unshare_command(
    obj: Context, repositories: tuple[str, ...], group: str | None, tenant: str | None, user: str | None, dry_run: bool
) -> None:
    """Take repositories out of their group (or, with --group, dissolve one): each recalls its own memory
    again. A group left with one repository is dissolved. Nothing of the sessions is changed."""
    from jobs.claude_code.groups import unshare

    if not repositories and group is None:
        raise click.UsageError("name the repositories to take out of their group, or --group NAME")
    tenant_id, user_id = _who(tenant, user, "unshare")
    change = unshare(obj.database(), tenant_id, user_id, list(repositories), group=group, dry_run=dry_run)
    verb = "would take" if dry_run else "took"
    for name, member in change.removed:
        click.echo(f"{verb} {member.repository} out of group {name}")
    click.echo(
        f"{verb} {counted(len(change.removed), 'repository')} out of {user_id}'s groups."
        + (" Nothing written (--dry-run)." if dry_run else "")
    )


@click.command("shared")
@_tenant
@_user
@click.pass_obj
def shared_command(obj: Context, tenant: str | None, user: str | None) -> None:
    """List the user's groups of repositories that share memory."""
    from jobs.claude_code.groups import groups

    tenant_id, user_id = _who(tenant, user, "shared")
    found = groups(obj.database(), tenant_id, user_id)
    for name, members in found.items():
        click.echo(f"{name}:")
        for member in members:
            click.echo(f"  {member.repository} ({member.purpose})")
    if not found:
        click.echo(f"{user_id} has no group of repositories; make one with `episodes claude-code share A B`.")
