"""`episodes keys create | list | revoke`: the key printed once, only its hash stored."""

from __future__ import annotations

import hashlib

from click.testing import CliRunner

from jobs.cli import cli
from jobs.db import Database


def test_create_list_revoke(db: Database) -> None:
    runner = CliRunner()
    created = runner.invoke(cli, ["keys", "create", "--tenant", "acme", "--scopes", "recall,write", "--name", "bot"])
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip()
    assert secret.startswith("ep_") and len(secret) == 46 and "shown only once" in created.stderr
    with db.admin() as conn:
        row = conn.execute("SELECT key_hash, scopes, tenant_id FROM api_keys").fetchone()
    assert row is not None and bytes(row["key_hash"]) == hashlib.sha256(secret.encode()).digest()
    assert (row["scopes"], row["tenant_id"]) == (["recall", "write"], "acme")

    listed = runner.invoke(cli, ["keys", "list"])
    assert secret[:11] in listed.stdout and secret not in listed.stdout and "recall,write" in listed.stdout

    assert runner.invoke(cli, ["keys", "revoke", secret[:11]]).exit_code == 0
    with db.admin() as conn:
        assert conn.execute("SELECT revoked_at IS NOT NULL AS r FROM api_keys").fetchone() == {"r": True}
    missing = runner.invoke(cli, ["keys", "revoke", "ep_nothing1"])
    assert missing.exit_code == 1 and "no key with id or prefix" in missing.output


def test_unknown_scope_is_refused_naming_it(db: Database) -> None:
    result = CliRunner().invoke(cli, ["keys", "create", "--tenant", "acme", "--scopes", "recall,delete"])
    assert result.exit_code == 2 and "unknown scope delete" in result.output
