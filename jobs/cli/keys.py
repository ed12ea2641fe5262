"""`episodes keys create | list | revoke`: the API keys of `episodes api`."""

from __future__ import annotations

import datetime as dt
import re

import click

from jobs.cli.base import Context
from jobs.concepts import SCOPES
from jobs.service.keys import create_key, list_keys, parse_scopes, revoke_key
from jobs.sql import query

# The CHECK on api_keys.tenant_id (migration 0010) and on every tenant table: checked here first, so a
# bad name is a usage error that says the rule, not the database's refusal quoting the row.
TENANT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
NAME_MAX = 200  # the CHECK on api_keys.name


@click.group("keys")
def keys_group() -> None:
    """Create, list and revoke API keys (each belongs to one tenant and holds scopes)."""


def _tenant(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not TENANT.match(value):
        raise click.BadParameter(
            f"{value!r} is not a tenant name: 1 to 128 letters, digits or _ . : @ - "
            "(no spaces), as the tenant's transcripts were stored under"
        )
    return value


def _name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and len(value) > NAME_MAX:
        raise click.BadParameter(f"at most {NAME_MAX} characters (got {len(value)})")
    return value


def _scopes(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    try:
        return parse_scopes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@keys_group.command("create")
@click.option("--tenant", required=True, callback=_tenant, help="The tenant the key reads and writes (its only one).")
@click.option(
    "--scopes",
    required=True,
    callback=_scopes,
    help=f"Comma-separated: {', '.join(SCOPES)} (recall: recall, reads, search; "
    "ingest: post transcripts; edit: correct, erase or pin single episodes, memory-page links with "
    "recall; write: ingest and edit; admin: erase a user; export: a user's whole export, raw "
    "transcripts included).",
)
@click.option("--name", callback=_name, help="A label for listings, e.g. the application that holds the key.")
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0.001, min_open=False),
    help="Requests per second allowed to this key (per worker; default EPISODES_API_RATE_LIMIT, 20).",
)
@click.pass_obj
def create(obj: Context, tenant: str, scopes: tuple[str, ...], name: str | None, rate_limit: float | None) -> None:
    """Create a key and print it once: only its hash is stored, so it cannot be shown again.

    A tenant that holds no transcript or episode yet is accepted with a warning (a misspelling looks
    just like a new tenant)."""
    db = obj.database()
    key, secret = create_key(db, tenant, scopes, name=name, rate_limit=rate_limit)
    click.echo(secret)
    click.echo(
        f"key {key.id} ({key.prefix}…) for tenant {key.tenant_id}, scopes {','.join(key.scopes)}. "
        "Store it now: it is shown only once (only its hash is kept).",
        err=True,
    )
    from jobs.db import one

    with db.tenant(tenant) as conn:
        known = one(conn.execute(query("api_key_tenant_known"), {"tenant_id": tenant}))["known"]
    if not known:
        click.echo(
            f"warning: tenant {tenant!r} holds no transcript or episode yet; if that is a misspelling, "
            f"revoke the key (`episodes keys revoke {key.prefix}`) and create it for the right tenant.",
            err=True,
        )


@keys_group.command("list")
@click.pass_obj
def list_command(obj: Context) -> None:
    """Every key: id, prefix, tenant, name, scopes, created, last used, revoked (never the key)."""
    rows = list_keys(obj.database())
    if not rows:
        click.echo("no keys; create one with `episodes keys create --tenant T --scopes recall`")
        return
    click.echo(
        f"{'id':>4}  {'prefix':<12} {'tenant':<16} {'name':<16} {'scopes':<20} {'created':<20} "
        f"{'last used':<20} revoked"
    )
    for key in rows:
        click.echo(
            f"{key.id:>4}  {key.prefix:<12} {key.tenant_id:<16} {key.name or '-':<16} "
            f"{','.join(key.scopes):<20} {_when(key.created_at):<20} {_when(key.last_used_at):<20} "
            f"{_when(key.revoked_at)}"
        )


@keys_group.command("revoke")
@click.argument("id_or_prefix")
@click.pass_obj
def revoke(obj: Context, id_or_prefix: str) -> None:
    """Revoke a key by its id or prefix; running services refuse it within 5 s (the services' key cache)."""
    key = revoke_key(obj.database(), id_or_prefix)
    if key is None:
        raise click.ClickException(f"no key with id or prefix {id_or_prefix!r}; see `episodes keys list`")
    click.echo(f"revoked key {key.id} ({key.prefix}…) of tenant {key.tenant_id}")


def _when(moment: dt.datetime | None) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "-"
