"""The ``export`` scope (issue 35, item 7): a key that recalls cannot export a user's raw transcripts;
one with ``export`` can; of the keys from before migration 0030, only those holding ``admin`` were given ``export``, visibly."""

from __future__ import annotations

import httpx
import psycopg
import pytest
from support.api_server import serve

from jobs import migrate
from jobs.db import Database
from jobs.formats.records import from_objects
from jobs.ingest import ingest_records
from jobs.service.keys import create_key, list_keys, parse_scopes

MARIA = {
    "user_id": "u-maria",
    "session_id": "m1",
    "started_at": "2025-01-21T10:00:00Z",
    "ended_at": "2025-01-21T10:20:00Z",
    "messages": [
        {"role": "user", "content": "My card ends in 4242 and I live at 5 Elm Street."},
        {"role": "assistant", "content": "Noted."},
    ],
}


def test_a_recall_key_cannot_export_and_an_export_key_can(db: Database) -> None:
    report = ingest_records(
        db, from_objects([MARIA], db.settings.max_transcript_bytes), tenant_id="acme", only_tenant=True
    )
    assert not report.rejected
    recall = create_key(db, "acme", ("recall",))[1]
    export = create_key(db, "acme", ("export",))[1]
    everything = create_key(db, "acme", ("recall", "ingest", "edit", "admin"))[1]
    with serve(db) as url:
        for secret in (recall, everything):
            r = httpx.get(f"{url}/v1/users/u-maria/export", headers={"Authorization": f"Bearer {secret}"})
            assert r.status_code == 403, r.text
            assert "lacks the 'export' scope" in r.json()["error"]["message"]
        r = httpx.get(f"{url}/v1/users/u-maria/export", headers={"Authorization": f"Bearer {export}"})
        assert r.status_code == 200, r.text
        assert "4242" in r.text  # the raw transcript: what the scope guards
        r = httpx.post(
            f"{url}/v1/recall",
            json={"user_id": "u-maria", "message": "hello"},
            headers={"Authorization": f"Bearer {export}"},
        )
        assert r.status_code == 403  # and export alone recalls nothing


def test_export_is_a_scope_keys_can_be_created_with() -> None:
    assert parse_scopes("recall,export") == ("recall", "export")


def test_only_admin_keys_from_before_0030_keep_exporting(blank_db_url: str) -> None:
    with psycopg.connect(blank_db_url) as conn:
        migrate.migrate(conn, embedding_dim=384, embedder="test")
        conn.execute(
            "INSERT INTO api_keys (prefix, key_hash, tenant_id, scopes) VALUES "
            "('ep_AAAAAAAA', sha256('a'), 'acme', ARRAY['recall']), "
            "('ep_BBBBBBBB', sha256('b'), 'acme', ARRAY['ingest']), "
            "('ep_CCCCCCCC', sha256('c'), 'acme', ARRAY['recall', 'write']), "
            "('ep_EEEEEEEE', sha256('e'), 'acme', ARRAY['recall', 'admin'])"
        )
        conn.execute("DELETE FROM schema_migrations WHERE version = 30")  # as a database from before 0030
        applied = migrate.migrate(conn, embedding_dim=384, embedder="test")
        assert [m.version for m in applied] == [30]
        scopes = {r[0]: r[1] for r in conn.execute("SELECT prefix, scopes FROM api_keys")}
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO api_keys (prefix, key_hash, tenant_id, scopes) "
                "VALUES ('ep_DDDDDDDD', sha256('d'), 'acme', ARRAY['export', 'everything'])"
            )
    assert scopes == {
        "ep_AAAAAAAA": ["recall"],
        "ep_BBBBBBBB": ["ingest"],
        "ep_CCCCCCCC": ["recall", "write"],
        "ep_EEEEEEEE": ["recall", "admin", "export"],
    }


def test_listing_shows_the_scope(db: Database) -> None:
    create_key(db, "acme", ("export",), name="dsar")
    assert [k.scopes for k in list_keys(db) if k.name == "dsar"] == [("export",)]
