"""Connection strings of the test databases: one database of the embedded server, and the login role
that `episodes api` and MCP connect as (jobs.db.SERVICE_ROLE)."""

from __future__ import annotations

import psycopg

from jobs.db import SERVICE_ROLE


def url_for(admin_url: str, dbname: str) -> str:
    """``admin_url`` with its database name replaced by ``dbname``."""
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo("", **info)


def service_url(db_url: str) -> str:
    """``db_url`` logging in as the service role (no password: the embedded server trusts local logins)."""
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info["user"] = SERVICE_ROLE
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **info)
