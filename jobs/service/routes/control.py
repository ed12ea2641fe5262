"""The user's control over one episode: ``PATCH /v1/episodes/{id}`` (correct the summary, edit or
drop an event), ``DELETE /v1/episodes/{id}`` (erase it, rebuilding any super-summary that included
it) and ``PUT`` / ``DELETE /v1/episodes/{id}/pin``. All need the edit scope and run in the key's
tenant; another tenant's id answers 404 like an unknown one.

The work is :mod:`jobs.rights` (correct_episode, forget_episode) and :mod:`jobs.lifecycle` (pin,
unpin), the same functions the CLI and the user's memory page call. A correction is audited with
the key's prefix as the actor and survives the session's next re-summarisation (docs/memory-page.md,
"Correcting and forgetting one episode").
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request

from jobs.lifecycle.pins import PinChange, pin, unpin
from jobs.rights.correct import EpisodeCorrection, correct_episode
from jobs.rights.erase_episode import forget_episode
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.keys import ApiKey
from jobs.service.schemas import (
    CorrectionResponse,
    EpisodeErasureResponse,
    PinResponse,
    SuperRebuild,
)

router = APIRouter(tags=["episodes"], route_class=KeyFirstRoute)

EpisodeId = Path(ge=1, le=2**63 - 1)
_ERRORS: dict[int | str, dict[str, str]] = {
    404: {"description": "no such episode in this tenant"},
    409: {"description": "not possible for this episode (a super-summary, or replaced by a re-run of its session)"},
}


def actor(key: ApiKey) -> str:
    """Who made a change, as the audit stores it: the key, never its secret."""
    return f"api-key:{key.prefix}" + (f" ({key.name})" if key.name else "")


@router.patch("/v1/episodes/{episode_id}", response_model=CorrectionResponse, responses=_ERRORS)
def correct(
    request: Request,
    change: EpisodeCorrection,
    episode_id: int = EpisodeId,
    dry_run: bool = False,
    key: ApiKey = Depends(scope("edit")),
) -> CorrectionResponse:
    """Correct one episode: its summary, an event's text or status, events dropped. The episode is
    re-embedded and re-indexed at once, the change is audited, and a later re-summarisation of the
    session keeps it."""
    report = correct_episode(request.app.state.db, key.tenant_id, episode_id, change, actor=actor(key), dry_run=dry_run)
    return CorrectionResponse(
        episode_id=episode_id,
        dry_run=dry_run,
        changes=report.changes,
        correction_ids=report.correction_ids,
        reindexed=report.reindexed,
    )


@router.delete("/v1/episodes/{episode_id}", response_model=EpisodeErasureResponse, responses=_ERRORS)
def erase(
    request: Request, episode_id: int = EpisodeId, dry_run: bool = False, key: ApiKey = Depends(scope("edit"))
) -> EpisodeErasureResponse:
    """Erase one session episode (and the earlier versions of its session) with its events, entities
    and lineage; super-summaries that included it are rebuilt from the remaining sources. The
    transcript is kept but never summarised again."""
    report = forget_episode(request.app.state.db, key.tenant_id, episode_id, dry_run=dry_run)
    supers = [
        SuperRebuild(id=s.id, period=s.label, outcome=report.rebuilt.get(s.id, "pending" if not dry_run else "not run"))
        for s in report.supers
        if s.status == "current"
    ]
    return EpisodeErasureResponse(
        episode_id=episode_id,
        dry_run=dry_run,
        erased_ids=report.erased_ids,
        counts=report.counts,
        erasure_ids=report.erasure_ids,
        super_summaries=supers,
    )


def _pin_response(change: PinChange) -> PinResponse:
    return PinResponse(
        episode_id=change.episode_id,
        user_id=change.user_id,
        pinned=change.pinned,
        changed=change.changed,
        super_summary_rebuilt=change.rebuilt,
    )


@router.put("/v1/episodes/{episode_id}/pin", response_model=PinResponse, responses=_ERRORS)
def pin_episode(request: Request, episode_id: int = EpisodeId, key: ApiKey = Depends(scope("edit"))) -> PinResponse:
    """Pin a session episode: it no longer decays in recall and is never compressed away."""
    return _pin_response(pin(request.app.state.db, key.tenant_id, episode_id))


@router.delete("/v1/episodes/{episode_id}/pin", response_model=PinResponse, responses=_ERRORS)
def unpin_episode(request: Request, episode_id: int = EpisodeId, key: ApiKey = Depends(scope("edit"))) -> PinResponse:
    """Unpin an episode: it decays again, and the next compress run may take it into a super-summary."""
    return _pin_response(unpin(request.app.state.db, key.tenant_id, episode_id))
