"""``POST /v1/recall``: the block an agent loads at session start, and the structured result."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from jobs.recall.recaller import Recaller
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.keys import ApiKey
from jobs.service.schemas import RecallRequest, RecallResponse

router = APIRouter(tags=["recall"], route_class=KeyFirstRoute)


@router.post("/v1/recall", response_model=RecallResponse)
def recall(body: RecallRequest, request: Request, key: ApiKey = Depends(scope("recall"))) -> RecallResponse:
    """Recent and relevant episodes of the user, with open items, fitted to ``budget_tokens``.

    Served by the process-wide recaller, so a user's copy stays warm between requests."""
    recaller: Recaller = request.app.state.recaller
    result = recaller.recall(
        key.tenant_id, body.user_id, body.message, purpose=body.purpose, budget_tokens=body.budget_tokens, now=body.now
    )
    doc = result.to_dict()
    return RecallResponse(
        block=doc["block"],
        tenant_id=doc["tenant_id"],
        user_id=doc["user_id"],
        purpose=doc["purpose"],
        budget_tokens=doc["budget_tokens"],
        tokens=doc["tokens"],
        now=result.now,
        candidates=doc["candidates"],
        nothing_relevant=doc["nothing_relevant"],
        episodes=doc["episodes"],
        open_items=doc["open_items"],
        sessions=doc["sessions"],
    )
