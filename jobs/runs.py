"""Job-run bookkeeping: one ``job_runs`` row per run of a job (started, finished, counts, error, the
tenants it touched), and the identity a worker process writes into claims, leases and runs."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping

from psycopg.types.json import Jsonb

from jobs.db import Conn, Database, one
from jobs.sql import query


def worker_id() -> str:
    """host:pid:random — unique per worker object, readable in `episodes status` and the claims."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def start_run(target: Database | Conn, job: str, worker: str) -> int:
    """Record that ``job`` started; return the run id for :func:`finish_run` and model-call rows."""
    params = {"job": job, "worker": worker}
    if isinstance(target, Database):
        with target.admin() as conn:
            return int(one(conn.execute(query("start_job_run"), params))["id"])
    return int(one(target.execute(query("start_job_run"), params))["id"])


def finish_run(
    target: Database | Conn,
    run_id: int,
    *,
    counts: Mapping[str, int],
    error: BaseException | str | None = None,
    failed: bool | None = None,
) -> None:
    """Record how a run ended: ``failed`` defaults to whether an error is given. The run also records the
    tenants it touched (those of its model calls): an erasure scrubs the texts of its own tenant's runs
    only, never another tenant's run history (migration 0029)."""
    params = {
        "id": run_id,
        "status": "failed" if (error is not None if failed is None else failed) else "ok",
        "counts": Jsonb(dict(counts)),
        "error": str(error)[:2000] if error else None,
    }
    if isinstance(target, Database):
        with target.admin() as conn:
            _finish(conn, params)
    else:
        _finish(target, params)


def _finish(conn: Conn, params: Mapping[str, object]) -> None:
    conn.execute(query("finish_job_run"), params)
    tenants = [row["tenant_id"] for row in conn.execute(query("job_run_tenants"), {"id": params["id"]})]
    if tenants:
        conn.execute(query("record_job_run_tenants"), {"id": params["id"], "tenants": tenants})
