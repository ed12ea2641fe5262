"""Does compression keep the facts? ``episodes eval locomo --compress`` (issue 47).

After the uncompressed figures, every conversation's history is compressed as the annual
compression would do it, with a shorter period: the real compress job (:func:`jobs.compress.run_compress`)
with the offline compressor, in the evaluation's scratch database, ``now`` one minute after the
conversation's last session, months (``period="month"``) ended more than 30 days before that
(``older_than``). A month holding two or more sessions becomes one super-summary and recall shows
the super instead of its sources; a month with one session keeps it as it is, and so does the month
the cut-off falls in (a period qualifies only once it has ended), so the report counts the sessions
compressed beside the sessions older than 30 days.

Then every question is asked again and the report sets the compressed figures beside the
uncompressed ones, at every budget: answer coverage of both and their ratio (the goal: compressed
>= 0.95 x uncompressed). For evidence recall a super shown in the block stands for every session it
compressed (:func:`compressed_sources`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.eval.queries import eval_query

if TYPE_CHECKING:
    from jobs.eval.locomo_data import Conversation

OLDER_THAN = dt.timedelta(days=30)
PERIOD = "month"


def compress_histories(
    db: Database, tenant_id: str, conversations: Sequence[Conversation], embedder: Embedder
) -> dict[str, int]:
    """Compress each conversation's old months with the offline compressor; the counts of what it did."""
    from jobs.compress.run import make_compressor, run_compress

    compressor = make_compressor(db.settings, "offline", embedder)
    counts = {"sessions": 0, "sessions_older_than_30_days": 0, "sessions_compressed": 0, "supers": 0, "failed": 0}
    try:
        for conv in conversations:
            report = run_compress(
                db,
                older_than=OLDER_THAN,
                period=PERIOD,
                tenant=tenant_id,
                user=conv.user_id,
                compressor=compressor,
                now=conv.now,
                embedder=embedder,
                record_run=False,
            )
            counts["sessions"] += len(conv.sessions)
            counts["sessions_older_than_30_days"] += sum(s.when < conv.now - OLDER_THAN for s in conv.sessions.values())
            counts["sessions_compressed"] += report.sources
            counts["supers"] += report.counts["created"]
            counts["failed"] += report.failed
    finally:
        compressor.close()
    return counts


def compressed_sources(db: Database, tenant_id: str) -> dict[int, list[str]]:
    """For each super, the session ids of the episodes compressed into it."""
    with db.tenant(tenant_id) as conn:
        rows = conn.execute(eval_query("eval_compressed_sources"), {"tenant_id": tenant_id}).fetchall()
    found: dict[int, list[str]] = {}
    for r in rows:
        found.setdefault(int(r["super_id"]), []).append(str(r["session_id"]))
    return found


def _pair(plain: dict[str, Any], packed: dict[str, Any]) -> dict[str, Any]:
    before, after = plain["answer_coverage"], packed["answer_coverage"]
    return {
        "questions": plain["questions"],
        "uncompressed": before,
        "compressed": after,
        "ratio": round(after / before, 3) if before else None,
        "all_evidence_uncompressed": plain["all_evidence_recall"],
        "all_evidence_compressed": packed["all_evidence_recall"],
    }


def compare(plain: dict[str, Any], packed: dict[str, Any]) -> dict[str, Any]:
    """Answer coverage compressed beside uncompressed, per budget, overall, per category and per conversation."""
    by_budget: dict[str, Any] = {}
    for budget, p in plain["by_budget"].items():
        q = packed["by_budget"][budget]
        by_budget[budget] = {
            **_pair(p, q),
            "per_category": {c: _pair(v, q["per_category"][c]) for c, v in p["per_category"].items()},
            "per_conversation": {c: _pair(v, q["per_conversation"][c]) for c, v in p["per_conversation"].items()},
        }
    return by_budget
