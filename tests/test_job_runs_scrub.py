"""An erasure scrubs its own tenant's run history only (issue 35, item 6).

job_runs has no tenant column of its own: runs of summarize and compress go across tenants. Each run now
records the tenants it touched (those of its model calls, when it finishes), and an erasure blanks a run's
error text naming the erased user only when the run touched the erasing tenant, or names the user as
`<tenant>/<user>` (as compress names a group; the attribution runs recorded before carry). Through the
HTTP API: tenant acme's dry run neither counts nor reveals globex's runs, and its erasure leaves them whole.
"""

from __future__ import annotations

import httpx
import pytest
from support.api_server import serve

from jobs.db import Database
from jobs.models import ModelCall
from jobs.runs import finish_run, start_run
from jobs.service.keys import create_key
from jobs.store import record_calls

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

WORD = "u-kim-5521"  # a user of acme; the same word stands in globex's run errors


def _run_for(db: Database, tenant: str | None, error: str) -> int:
    """A failed run recorded by the real bookkeeping, having made a model call for ``tenant`` (or none)."""
    run_id = start_run(db, "summarize", "w1")
    if tenant is not None:
        with db.tenant(tenant) as conn:
            record_calls(
                conn,
                [
                    ModelCall(
                        template="extract_episode_user.j2", prompt_hash="abc", model="m", input_tokens=1, error="boom"
                    )
                ],
                tenant_id=tenant,
                user_id="someone",
                transcript_id=None,
                job_run_id=run_id,
            )
    finish_run(db, run_id, counts={"failed": 1}, error=error)
    return run_id


def _errors(db: Database) -> dict[int, str | None]:
    with db.admin() as conn:
        return {r["id"]: r["error"] for r in conn.execute("SELECT id, error FROM job_runs ORDER BY id")}


def test_an_erasure_scrubs_its_own_tenants_runs_and_reveals_nothing_of_others(db: Database) -> None:
    acme_run = _run_for(db, "acme", f"extract failed for {WORD}: the model refused")
    acme_named = _run_for(db, None, f"acme/{WORD} 2023: the model refused")  # compress's way of naming
    globex_run = _run_for(db, "globex", f"extract failed for {WORD}: the model refused")
    globex_named = _run_for(db, None, f"globex/{WORD} 2023: the model refused")
    unattributed = _run_for(db, None, f"maintenance saw {WORD} somewhere")
    before = _errors(db)

    secret = create_key(db, "acme", ("recall", "write", "admin"), name="acme")[1]
    with (
        serve(db) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as acme,
    ):
        stored = acme.post(
            "/v1/transcripts",
            json={
                "transcripts": [
                    {"user_id": WORD, "session_id": "k-1", "messages": [{"role": "user", "content": "hello"}]}
                ]
            },
        )
        assert stored.json()["accepted"] == 1, stored.text
        dry = acme.delete(f"/v1/users/{WORD}", params={"dry_run": "true"})
        assert dry.status_code == 200 and dry.json()["counts"]["job_runs_scrubbed"] == 2, dry.text
        assert _errors(db) == before
        done = acme.delete(f"/v1/users/{WORD}")
        assert done.status_code == 200 and done.json()["counts"]["job_runs_scrubbed"] == 2, done.text

    with db.admin() as conn:
        tenants = {r["id"]: r["tenants"] for r in conn.execute("SELECT id, tenants FROM job_runs")}
    assert tenants == {
        acme_run: ["acme"],
        acme_named: None,
        globex_run: ["globex"],
        globex_named: None,
        unattributed: None,
    }
    after = _errors(db)
    assert after[acme_run] == after[acme_named] == "error text removed by an erasure"
    assert {k: after[k] for k in (globex_run, globex_named, unattributed)} == {
        k: before[k] for k in (globex_run, globex_named, unattributed)
    }
