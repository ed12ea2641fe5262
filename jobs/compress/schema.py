"""The forced tool's output: :class:`PeriodSummary`, validated by pydantic.

Claude records a period summary by calling the tool ``record_period_summary``, whose input schema
is this model's JSON schema (:func:`jobs.models.tool_input_schema`). The field descriptions are
prompt text: the model reads them as instructions, and they are part of the compress prompt
version (:func:`jobs.compress.claude.prompt_version`), so editing one is a prompt change.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field, field_validator

from jobs.models import Entity


def tag_list(tags: Sequence[str], limit: int = 5) -> list[str]:
    """Topic tags as stored on a super: lowercase, single-spaced, at most 40 characters, unique, ``limit`` of them."""
    seen: list[str] = []
    for tag in tags:
        clean = " ".join(tag.strip().lower().split())[:40]
        if clean and clean not in seen:
            seen.append(clean)
    return seen[:limit]


class PeriodEvent(BaseModel):
    """One of the period's key events, restated, citing the source event it rests on."""

    source: str = Field(
        pattern=r"^E[0-9]{1,18}$",
        description="The id of the one source event this restates, exactly as shown in brackets, e.g. E123.",
    )
    what: str = Field(
        min_length=3,
        max_length=400,
        description=(
            "One self-contained sentence in the third person with the concrete details (names, amounts, "
            "dates), understandable without the sessions."
        ),
    )


class PeriodSummary(BaseModel):
    """A summary of one period of a user's sessions, for an agent that meets this user years later."""

    summary: str = Field(
        min_length=10,
        max_length=1600,
        description=(
            "2-5 sentences, at most 300 tokens, third person, past tense: what the user worked on over the "
            "period, what was decided and what is still open. Name people and things; organise by theme."
        ),
    )
    topic_tags: list[str] = Field(
        max_length=5,
        description="Up to 5 short lowercase topic tags (1-3 words each) for the period, most important first.",
    )
    key_events: list[PeriodEvent] = Field(
        default_factory=list,
        max_length=20,
        description=(
            "The period's most important decisions, still-open questions and open commitments, most "
            "important first, each citing exactly one source event id from the input. Events not listed "
            "are kept automatically; never invent an id."
        ),
    )
    entities: list[Entity] = Field(
        default_factory=list,
        max_length=30,
        description="The people, organisations, products, projects and places that matter across the period.",
    )
    importance: float = Field(
        ge=0.0,
        le=1.0,
        description=(
            "How much this period matters for future sessions with this user: 0.1 small talk, "
            "0.5 routine work, 0.8+ major decisions or commitments."
        ),
    )

    @field_validator("topic_tags")
    @classmethod
    def _tags(cls, tags: list[str]) -> list[str]:
        return tag_list(tags)
