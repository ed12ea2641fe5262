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


def _run_for(db: Database, tenant: str | None, error: str, *more: str, job: str = "summarize") -> int:
    """A failed run recorded by the real bookkeeping, having made a model call for ``tenant`` (or none) and
    for each of ``more``."""
    run_id = start_run(db, job, "w1")
    for each in [t for t in (tenant, *more) if t is not None]:
        with db.tenant(each) as conn:
            record_calls(
                conn,
                [
                    ModelCall(
                        template="extract_episode_user.j2", prompt_hash="abc", model="m", input_tokens=1, error="boom"
                    )
                ],
                tenant_id=each,
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


def _dry_and_erase(db: Database, tenant: str, user: str) -> tuple[int, int]:
    """``tenant``'s admin key stores a session of ``user`` (how it makes the id known), asks a dry run, then
    erases: the two ``job_runs_scrubbed`` counts."""
    secret = create_key(db, tenant, ("ingest", "admin"), name=tenant)[1]
    with (
        serve(db) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as client,
    ):
        record = {"user_id": user, "session_id": f"{tenant}-{user}", "messages": [{"role": "user", "content": "hi"}]}
        assert client.post("/v1/transcripts", json={"transcripts": [record]}).json()["accepted"] == 1
        dry = client.delete(f"/v1/users/{user}", params={"dry_run": "true"})
        done = client.delete(f"/v1/users/{user}")
    assert dry.status_code == done.status_code == 200, (dry.text, done.text)
    return dry.json()["counts"]["job_runs_scrubbed"], done.json()["counts"]["job_runs_scrubbed"]


def test_a_run_across_tenants_tells_and_changes_nothing_of_the_other_tenant(db: Database) -> None:
    """Issue 46, item 3: a compress or serve run that touched acme and globex. Before, acme's admin key
    learned from a dry run's count whether globex's part named a user id (1 vs 0), and its erasure blanked
    globex's part. Now only acme's own parts count and change."""
    theirs = _run_for(db, "acme", f"acme/u-other 2023: timed out; globex/{WORD} 2023: the model refused", "globex")
    summary = _run_for(db, "acme", f"every model call failed (e.g. no access for {WORD})", "globex")
    # A run whose model calls were acme's alone, yet a globex group failed in it before any call.
    early = _run_for(db, "acme", f"globex/{WORD} 2024: no sources left", job="compress")
    both = _run_for(db, "acme", f"acme/{WORD} 2023: the model refused; globex/{WORD} 2023: the model refused", "globex")
    before = _errors(db)

    assert _dry_and_erase(db, "acme", WORD) == (1, 1)

    after = _errors(db)
    assert {k: after[k] for k in (theirs, summary, early)} == {k: before[k] for k in (theirs, summary, early)}
    assert after[both] == f"error text removed by an erasure; globex/{WORD} 2023: the model refused"


def test_the_count_of_a_dry_run_is_the_same_whatever_another_tenant_holds(db: Database) -> None:
    """The probe of item 3 itself: acme asks about an id that globex's part of a shared run names, and one
    that nothing names. The answers are the same."""
    _run_for(db, "acme", f"acme/u-a 2023: timed out; globex/{WORD} 2023: the model refused", "globex")
    assert _dry_and_erase(db, "acme", WORD) == _dry_and_erase(db, "acme", "u-nobody-0000") == (0, 0)
