"""``POST /v1/transcripts``: load transcripts through the same path as `episodes ingest`."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from jobs.formats.records import from_objects
from jobs.ingest import ingest_records
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.keys import ApiKey
from jobs.service.schemas import (
    TranscriptResult,
    TranscriptsRequest,
    TranscriptsResponse,
)

router = APIRouter(tags=["transcripts"], route_class=KeyFirstRoute)


@router.post("/v1/transcripts", response_model=TranscriptsResponse)
def post_transcripts(
    body: TranscriptsRequest, request: Request, key: ApiKey = Depends(scope("ingest"))
) -> TranscriptsResponse:
    """Validate and upsert each transcript on its own (the limits and idempotency of `episodes ingest`).

    A record without ``tenant_id`` gets the key's; a record naming another tenant is rejected, as is a session
    stored for another user (a conflict) and an erased one (without the day of its erasure). A closed session
    (``ended_at`` set) is summarised by `episodes serve` as usual."""
    db = request.app.state.db
    report = ingest_records(
        db,
        from_objects(body.transcripts, db.settings.max_transcript_bytes),
        tenant_id=key.tenant_id,
        only_tenant=True,
        details=False,  # no day of an erasure to a key that may ingest (issue 46, item 13)
    )
    results = sorted(
        (TranscriptResult(index=int(o.location), result=o.result, reason=o.reason) for o in report.outcomes),
        key=lambda r: r.index,
    )
    return TranscriptsResponse(
        accepted=report.inserted + report.updated,
        unchanged=report.unchanged,
        rejected=len(report.rejected),
        results=results,
    )
