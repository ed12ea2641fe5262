"""``POST /v1/recall``: the block an agent loads at session start, and the structured result."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from jobs.claude_code.branch_view import repository_scope, sort_by_record
from jobs.recall.recaller import Recaller
from jobs.recall.result import Recall
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.keys import ApiKey
from jobs.service.schemas import RecallRequest

router = APIRouter(tags=["recall"], route_class=KeyFirstRoute)


@router.post("/v1/recall", response_model=Recall)
def recall(body: RecallRequest, request: Request, key: ApiKey = Depends(scope("recall"))) -> Response:
    """Recent and relevant episodes of the user, with open items, fitted to ``budget_tokens``.

    Served by the process-wide recaller. The answer is the recaller's result itself (``Recall``), the
    JSON that ``episodes recall --json`` prints; the MCP tool ``recall_memory`` answers its ``block``.

    Sent as the bytes of :meth:`Recall.to_json` (pydantic's serialiser of ``Recall``, built once per
    process), the same bytes FastAPI would send: ``response_model`` documents the answer in the OpenAPI
    document, but a result returned as a dataclass is first checked against it in a second thread-pool
    hand-off after the endpoint's: 0.2 ms more CPU per recall one at a time, 0.9 to 1.4 ms with 8 or 16
    requests at once (bench/recall_cpu.py --clients)."""
    recaller: Recaller = request.app.state.recaller
    purpose = body.purpose or (repository_scope(body.repo) if body.repo else None)
    result = recaller.recall(
        key.tenant_id, body.user_id, body.message, purpose=purpose, budget_tokens=body.budget_tokens, now=body.now
    )
    if body.branch or body.head:  # issue 49: other branches' sessions as local session starts judged them
        sort_by_record(result, recaller.db, key.tenant_id, repo=body.repo, branch=body.branch, head=body.head)
    return Response(result.to_json(), media_type="application/json")
