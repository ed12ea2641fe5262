"""`episodes claude-code install | uninstall | sync | rescope | share`: memory for Claude Code, through its hooks."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import click

from jobs import config
from jobs.claude_code import hook_settings
from jobs.claude_code.hook import BUDGETS
from jobs.claude_code.places import TENANT, append_private, claude_home, log_file, login_name
from jobs.cli.base import Context
from jobs.cli.claude_code_share import share_command, shared_command, unshare_command
from jobs.cli.setup import init
from jobs.wording import counted

START_BUDGET_SECONDS = BUDGETS["SessionStart"]


@click.group("claude-code")
def claude_code_group() -> None:
    """Claude Code remembers across sessions: hooks inject memory at start and hand sessions over.

    The hooks fail open (a session never waits on or breaks because of them) and log to
    $EPISODES_HOME/logs/claude-code-hooks.log."""


_scope = click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="user: ~/.claude/settings.json; project: .claude/settings.local.json of --project-dir "
    "(Claude Code's per-person file: the hooks name this machine's paths and user).",
)
_project_dir = click.option(
    "--project-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The project of --scope project (default: the current directory).",
)
_api = click.option(
    "--api", metavar="URL", help="Remote mode: the URL of `episodes api` (default: local mode, the database directly)."
)
_key_env = click.option(
    "--key-env",
    metavar="VAR",
    default="EPISODES_API_KEY",
    show_default=True,
    help="Remote mode: the environment variable holding the API key (scopes recall, ingest).",
)
_tenant = click.option(
    "--tenant",
    default=TENANT,
    show_default=True,
    help="Local mode: the tenant of the sessions (remote mode: the key's).",
)
_user = click.option("--user", help="The user the sessions belong to (default: the login name).")
_AS_INSTALLED = "[default: as `episodes claude-code install` was told, else {}]"


def _local_host(url: str) -> bool:
    """Whether ``url`` names this machine (a key sent there in clear stays on it)."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@claude_code_group.command("install")
@_tenant
@_user
@_scope
@_project_dir
@_api
@_key_env
@click.option(
    "--budget",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Seconds a hook may take before it gives up and exits 0 (default: 6 at session start and "
    "first prompt, 25 at hand-over); for slow machines.",
)
@click.option(
    "--mcp",
    is_flag=True,
    help="Also register `episodes mcp` with Claude Code (`claude mcp add-json`, this --scope) for the tenant "
    "and user, with this EPISODES_HOME in its environment: the MCP server then finds the hooks' database "
    "whatever environment the client starts it in. Local mode only.",
)
@click.pass_context
def install(
    ctx: click.Context,
    tenant: str,
    user: str | None,
    scope: str,
    project_dir: Path | None,
    api: str | None,
    key_env: str,
    budget: float | None,
    mcp: bool,
) -> None:
    """Merge our hooks into Claude Code's settings (idempotent; other hooks are kept as they are).

    Local mode also creates or upgrades the schema and prepares the embedder's files, so the first
    session's hooks are as fast as the rest."""
    from jobs.claude_code import choices, mcp_entry

    obj: Context = ctx.obj
    user = user or login_name()
    if api and ctx.get_parameter_source("tenant") is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("--tenant is local mode's: with --api the sessions go to the tenant of the key.")
    if api and mcp:
        raise click.UsageError(
            "--mcp registers the local MCP server (`episodes mcp`); with --api, add the service's /mcp "
            "endpoint to Claude Code instead (docs/service.md)."
        )
    if mcp:
        mcp_entry.claude()  # before anything is written: `claude` is needed to register it
    if api:
        hook_settings.check_key_env(key_env)
        if urlsplit(api).scheme == "http" and not _local_host(api):
            click.echo(
                f"warning: {api} is plain http to another machine: every hook sends the API key (and the "
                "session) over the network unencrypted. Use https://, or a tunnel to localhost.",
                err=True,
            )
        if not config.env(key_env):
            click.echo(
                f"note: ${key_env} is not set here; the hooks read the key from it in the environment "
                "Claude Code runs in.",
                err=True,
            )
    else:
        from jobs.embeddings import embedder_for  # here: `episodes claude-code --help` starts without onnx

        ctx.invoke(init, distributed=False, shard_count=None)
        embedder_for(obj.settings).embed(["warm up"])  # fetches and checks the model files, builds the graph once
    # Compile the hook's modules now, not on the critical path of the first session start: isolated (-I)
    # and from /, as the hooks run, so a `jobs/` package of the folder install runs in is never imported.
    subprocess.run(
        [sys.executable, "-I", "-c", "import jobs.claude_code.hook, jobs.claude_code.local, jobs.claude_code.remote"],
        check=False,
        capture_output=True,
        cwd="/",
    )
    path = hook_settings.settings_path(scope, project_dir)
    before = hook_settings.read(path)
    if scope == "project":  # installs before settings.local.json wrote this machine's paths into the shared file
        _take_out_of(hook_settings.shared_settings_path(project_dir), "the shared ")
    command = hook_settings.hook_command(  # remote hooks name no tenant: the key's is used
        tenant=None if api else tenant, user=user, api=api, key_env=key_env if api else None, budget=budget
    )
    commands: dict[str, str] = {}
    if api:  # the session start waits for its hook: in remote mode sh and curl, no Python, where both exist
        start = hook_settings.session_start_command(
            api=api,
            user=user,
            key_env=key_env,
            log=log_file(),
            budget=budget if budget is not None else START_BUDGET_SECONDS,
        )
        if start:
            append_private(log_file(), "")  # the script appends to it: created owner-only here
            commands["SessionStart"] = start
        else:
            click.echo(
                "note: sh or curl was not found; the SessionStart hook runs in Python (slower to start).", err=True
            )
    after = hook_settings.with_ours(before, command, budget=budget, commands=commands)
    if after == before:
        click.echo(f"Hooks already installed in {path}; nothing changed.")
    else:
        hook_settings.write(path, after)
        events = ", ".join(e.name for e in hook_settings.EVENTS)
        click.echo(f"Installed the hooks ({events}) in {path}.")
    mode = f"remote ({api}, key from ${key_env})" if api else f"local ({obj.database(require_schema=False).location})"
    click.echo(f"Mode: {mode}; tenant {tenant if not api else 'of the key'}, user {user}. Hooks log to {log_file()}.")
    before_install = choices.load()
    registered = before_install.mcp if before_install else ()
    if mcp:
        where = mcp_entry.USER if scope == "user" else str((project_dir or Path.cwd()).absolute())
        env = mcp_entry.register(where, tenant, user)["env"]
        registered = tuple(dict.fromkeys([*registered, where]))
        click.echo(
            f"Registered the MCP server {mcp_entry.NAME!r} with Claude Code ({scope} scope), EPISODES_HOME="
            f"{env['EPISODES_HOME']}."
        )
    places = tuple(dict.fromkeys([*(before_install.places if before_install else ()), str(path.absolute())]))
    saved = choices.record(
        choices.Choices(
            tenant=None if api else tenant,
            user=user,
            api=api,
            key_env=key_env if api else None,
            places=places,
            mcp=registered,
        )
    )
    click.echo(f"`episodes claude-code sync` and `serve --claude-code-sync` use these choices (recorded in {saved}).")
    if scope == "project":
        _warn_if_committed(path)


def _take_out_of(path: Path, which: str = "") -> int:
    """Remove our hooks from ``path`` (a settings file); how many there were."""
    before = hook_settings.read(path)
    found = sum(len(v) for v in hook_settings.installed_commands(before).values())
    if found:
        hook_settings.write(path, hook_settings.without_ours(before))
        click.echo(f"Removed {found} hook{'s' if found != 1 else ''} of ours from {which}{path}.")
    return found


def _warn_if_committed(path: Path) -> None:
    """settings.local.json names this machine's paths: say so where git would not ignore it."""
    try:
        done = subprocess.run(
            ["git", "check-ignore", "-q", str(path)], cwd=path.parent, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return
    if done.returncode == 1:  # in a repository, not ignored (128: no repository, or no git)
        click.echo(
            f"note: git does not ignore {path}; it holds this machine's paths and user: add "
            f"'.claude/settings.local.json' to .gitignore.",
            err=True,
        )


@claude_code_group.command("uninstall")
@_scope
@_project_dir
def uninstall(scope: str, project_dir: Path | None) -> None:
    """Remove exactly our hooks from Claude Code's settings (the others stay); in a project from
    .claude/settings.local.json and, where an older install put them, .claude/settings.json."""
    paths = [hook_settings.settings_path(scope, project_dir)]
    if scope == "project":
        paths.append(hook_settings.shared_settings_path(project_dir))
    removed = sum(_take_out_of(path) for path in paths)
    if not _forget_install(scope, project_dir, paths) and not removed:
        click.echo(f"No hooks of ours in {' or '.join(str(p) for p in paths)}; nothing changed.")


def _forget_install(scope: str, project_dir: Path | None, emptied: list[Path]) -> bool:
    """After the hooks left ``emptied``: the MCP registration of this scope removed, and, once no install is
    left under this EPISODES_HOME, install's record, the sync ledger, the session state and the hooks' log
    (jobs.claude_code.leftovers); whether anything changed."""
    from jobs.claude_code import choices, leftovers, mcp_entry

    saved = choices.load()
    where = mcp_entry.USER if scope == "user" else str((project_dir or Path.cwd()).absolute())
    unregistered = [where] if saved is not None and where in saved.mcp and mcp_entry.unregister(where) else []
    if unregistered:
        click.echo(f"Removed the MCP server {mcp_entry.NAME!r} from Claude Code ({scope} scope).")
    left = leftovers.still_installed(saved, emptied, unregistered) if saved is not None else None
    user_settings = hook_settings.settings_path("user")
    if left is not None and (
        left.places or left.mcp or (user_settings not in emptied and leftovers.holds_ours(user_settings))
    ):
        choices.record(left)
        click.echo(f"Kept {choices.path()}: hooks of ours remain in {', '.join(left.places) or user_settings}.")
        return bool(unregistered)
    gone = leftovers.remove()
    if gone:
        click.echo(f"Removed what the integration kept: {', '.join(str(p) for p in gone)}.")
        click.echo("The sessions and episodes stored in the database stay; `episodes forget` erases a user's.")
    return bool(gone or unregistered)


@claude_code_group.command("sync")
@click.option("--tenant", default=None, help="Local mode: the tenant of the sessions. " + _AS_INSTALLED.format(TENANT))
@click.option("--user", default=None, help="The user the sessions belong to. " + _AS_INSTALLED.format("the login name"))
@click.option(
    "--api",
    metavar="URL",
    default=None,
    help="Remote mode: the URL of `episodes api`. " + _AS_INSTALLED.format("local mode"),
)
@click.option(
    "--key-env",
    metavar="VAR",
    default=None,
    help="Remote mode: the variable holding the API key. " + _AS_INSTALLED.format("EPISODES_API_KEY"),
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the session files are (default: ~/.claude/projects).",
)
@click.option("--all", "force", is_flag=True, help="Read every file again, even those stored unchanged since.")
@click.pass_obj
def sync_command(
    obj: Context,
    tenant: str | None,
    user: str | None,
    api: str | None,
    key_env: str | None,
    root: Path | None,
    force: bool,
) -> None:
    """Store every finished Claude Code session on this machine not yet stored (safe to run again).

    A session is finished when its SessionEnd hook fired or its file has been idle for the idle-close
    interval (EPISODES_IDLE_CLOSE); open ones are left for a later sync."""
    from jobs.claude_code import choices, local, remote
    from jobs.claude_code.sync import session_files, sync

    chosen = choices.resolve(tenant=tenant, user=user, api=api, key_env=key_env)
    click.echo(chosen.line())
    if chosen.api:
        hook_settings.check_key_env(chosen.key_env)
    store = (
        remote.sync_store(chosen.api, chosen.key_env) if chosen.api else local.sync_store(obj.database(), chosen.tenant)
    )
    files = session_files(root or claude_home() / "projects")
    report = sync(
        store,
        files,
        tenant_id=chosen.tenant,
        user_id=chosen.user,
        idle_close_seconds=obj.settings.idle_close_seconds,
        force=force,
    )
    for line in report.bad_lines[:20]:
        click.echo(f"skipped line {line}", err=True)
    for line in report.rejected:
        click.echo(f"rejected {line}", err=True)
    click.echo(
        f"{counted(report.files, 'session file')} ({report.known} unchanged since stored): "
        f"{counted(report.stored, 'session')} stored, {report.unchanged} already stored, {report.open} still "
        f"open, {len(report.rejected)} rejected, {counted(len(report.bad_lines), 'bad line')} skipped."
    )
    if report.rejected:
        sys.exit(1)


@claude_code_group.command("rescope")
@click.option("--tenant", default=None, help="The tenant of the sessions. " + _AS_INSTALLED.format(TENANT))
@click.option("--dry-run", is_flag=True, help="Say what would move, and write nothing.")
@click.pass_obj
def rescope_command(obj: Context, tenant: str | None, dry_run: bool) -> None:
    """Move projects stored under a folder's scope to their git repository's (upgrade step of issue 49).

    A project is its git repository now, shared by its worktrees and clones; sessions stored before
    kept the folder they ran in, and those whose folder is in a repository on this machine move to
    it. Run with --dry-run first."""
    from jobs.claude_code import choices
    from jobs.claude_code.rescope import rescope

    chosen = choices.resolve(tenant=tenant, user=None, api=None, key_env=None)
    if chosen.api:
        raise click.UsageError(
            "the hooks are installed in remote mode; run `episodes claude-code rescope --tenant T` where the "
            "database is (beside `episodes api`), on the machine the sessions ran on"
        )
    plan = rescope(obj.database(), chosen.tenant, dry_run=dry_run)
    verb = "would move" if dry_run else "moved"
    for move in plan.moves:
        click.echo(
            f"{move.old} -> {move.new}: {verb} {counted(move.transcripts, 'session')} and "
            f"{counted(move.episodes, 'episode')} ({', '.join(move.folders[:3])})"
        )
        if move.hash_kept:
            click.echo(
                f"  {move.hash_kept} of them stored redacted or pruned: storing their files again summarises them again"
            )
    for old in plan.ambiguous:
        click.echo(f"{old}: left, its folders now lie in two repositories", err=True)
    click.echo(
        f"{counted(len(plan.moves), 'project')} {verb} to its repository; "
        f"{counted(len(plan.not_in_git), 'folder')} outside git or not on this machine left as they are."
        + (" Nothing written (--dry-run)." if dry_run else "")
    )


# `share`, `unshare` and `shared` (groups of repositories, issue 49) live in their own module
claude_code_group.add_command(share_command)
claude_code_group.add_command(unshare_command)
claude_code_group.add_command(shared_command)
