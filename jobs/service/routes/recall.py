"""``POST /v1/recall``: the block an agent loads at session start, and the structured result."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from jobs.claude_code.repo_recall import recall_in_repository
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
    # issue 49: the repository's scope (and its group's), other branches' sessions as local session starts judged
    # them, their lines in the block (as the MCP tool's)
    result, _ = recall_in_repository(
        recaller,
        key.tenant_id,
        body.user_id,
        body.message,
        purpose=body.purpose,
        repo=body.repo,
        branch=body.branch,
        head=body.head,
        budget_tokens=body.budget_tokens,
        now=body.now,
    )
    return Response(result.to_json(), media_type="application/json")
