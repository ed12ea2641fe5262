"""A user as a whole: ``DELETE /v1/users/{user_id}`` (what `episodes forget` does, scope admin) and
``GET /v1/users/{user_id}/export`` (what `episodes export` does, scope export: raw transcripts are more
than a recall key needs; migration 0030 gave it to the keys that held recall then). A user the tenant
holds nothing about answers 404."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Request

from jobs.rights.export import export_user
from jobs.rights.forget import forget_user
from jobs.service import reads
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.errors import ApiError
from jobs.service.keys import ApiKey
from jobs.service.schemas import NO_NUL, ForgetResponse

router = APIRouter(tags=["users"], route_class=KeyFirstRoute)

UserId = Path(min_length=1, max_length=256, pattern=NO_NUL)
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "nothing held about this user in this tenant"}}


def _known(request: Request, key: ApiKey, user_id: str) -> None:
    with request.app.state.db.tenant(key.tenant_id) as conn:
        if not reads.user_known(conn, key.tenant_id, user_id):
            raise ApiError(404, "not_found", f"nothing is held about user {user_id!r}")


@router.delete("/v1/users/{user_id}", response_model=ForgetResponse, responses=_NOT_FOUND)
def forget(
    request: Request,
    user_id: str = UserId,
    keep_transcripts: bool = False,
    dry_run: bool = False,
    key: ApiKey = Depends(scope("admin")),
) -> ForgetResponse:
    """Erase everything held about the user in one transaction, and record the erasure without the user id."""
    _known(request, key, user_id)
    report = forget_user(
        request.app.state.db, key.tenant_id, user_id, keep_transcripts=keep_transcripts, dry_run=dry_run
    )
    return ForgetResponse(
        user_id=user_id, erased=not dry_run, dry_run=dry_run, counts=report.counts, erasure_id=report.erasure_id
    )


@router.get("/v1/users/{user_id}/export", response_model=dict[str, Any], responses=_NOT_FOUND)
def export(
    request: Request, user_id: str = UserId, with_embeddings: bool = False, key: ApiKey = Depends(scope("export"))
) -> dict[str, Any]:
    """Everything held about the user as one JSON document (format episodes-user-export/1), raw transcripts
    and their metadata included: the key needs the ``export`` scope, which ``recall`` does not give."""
    _known(request, key, user_id)
    return export_user(request.app.state.db, key.tenant_id, user_id, with_embeddings=with_embeddings)
