"""The request and response bodies of the HTTP API (pydantic). Requests forbid unknown fields, so
a typo answers 422 naming the field instead of being ignored; these models are also the OpenAPI
document that clients and the schema fuzz test read. ``POST /v1/recall`` answers the recaller's own
result type (:class:`jobs.recall.result.Recall`), not a copy of it here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from jobs.concepts import DEFAULT_BUDGET_TOKENS, MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, PURPOSE_PATTERN

NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL; refuse it as a 422, not a database error


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecallRequest(Strict):
    user_id: str = Field(min_length=1, max_length=256, pattern=NO_NUL)
    message: str = Field(max_length=20_000, pattern=NO_NUL, description="The opening message of the new session.")
    purpose: str | None = Field(default=None, pattern=PURPOSE_PATTERN)
    budget_tokens: int = Field(default=DEFAULT_BUDGET_TOKENS, ge=MIN_BUDGET_TOKENS, le=MAX_BUDGET_TOKENS)
    now: AwareDatetime | None = Field(default=None, description="Recall as of this moment (default: now).")
    repo: str | None = Field(
        default=None,
        max_length=1000,
        pattern=NO_NUL,
        description="The session's git repository: its remote URL, or its identity as the hooks record it "
        "(metadata git_repo). Without a purpose, recall is scoped to the repository's (docs/claude-code.md).",
    )
    branch: str | None = Field(
        default=None,
        max_length=255,
        pattern=NO_NUL,
        description="The branch the session starts on: sessions of other branches are left out when that branch "
        "is open (one line, pending) or was deleted unmerged (stale), as local session starts recorded it.",
    )
    head: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$",
        description="The HEAD commit the session starts at: a session that ended there is in force.",
    )


class TranscriptsRequest(Strict):
    transcripts: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=1000,
        description="Transcripts in the ingest format (docs/transcripts.md); each is validated on its own.",
    )


class TranscriptResult(BaseModel):
    index: int
    result: Literal["accepted", "unchanged", "rejected"]
    reason: str | None = None


class TranscriptsResponse(BaseModel):
    accepted: int
    unchanged: int
    rejected: int
    results: list[TranscriptResult]


class EpisodePage(BaseModel):
    items: list[dict[str, Any]]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last.")


class ForgetResponse(BaseModel):
    user_id: str
    erased: bool
    dry_run: bool
    counts: dict[str, int]
    erasure_id: int | None


class Health(BaseModel):
    status: Literal["ok"]
    schema_version: int = Field(
        description="/healthz: the schema version this code needs; /readyz: the database's, which is then the same"
    )


class CorrectionResponse(BaseModel):
    episode_id: int
    dry_run: bool
    changes: list[str] = Field(description="What changed, in words; empty when the episode already said so.")
    correction_ids: list[int] = Field(description="The audit rows written (none in a dry run).")
    reindexed: list[int] = Field(
        description="Episodes re-embedded and re-indexed: this one and any super-summary "
        "holding a copy of a changed event."
    )


class SuperRebuild(BaseModel):
    id: int = Field(description="The removed super-summary.")
    period: str
    outcome: str = Field(description="created, single, uncompressed, failed, changed; 'not run' in a dry run.")


class EpisodeErasureResponse(BaseModel):
    episode_id: int
    dry_run: bool
    erased_ids: list[int] = Field(description="This episode and the earlier versions of its session.")
    counts: dict[str, int]
    erasure_ids: list[int]
    super_summaries: list[SuperRebuild]


class PinResponse(BaseModel):
    episode_id: int
    user_id: str
    pinned: bool
    changed: bool = Field(description="False when the episode already was as asked.")
    super_summary_rebuilt: str | None = Field(
        description="Pinning a compressed episode rebuilds its period's super-summary without it: the outcome."
    )
