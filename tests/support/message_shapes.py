"""A host's messages through validation as a transcript record of acme/u1 (canonical), for the message-shape tests."""

from __future__ import annotations

from typing import Any

from jobs.formats.shapes import ShapeOptions
from jobs.models import TranscriptIn


def canonical(messages: list[dict[str, Any]], **options: Any) -> TranscriptIn:
    record = {"tenant_id": "acme", "user_id": "u1", "session_id": "s1", "messages": messages}
    return TranscriptIn.model_validate(record, context={"shapes": ShapeOptions(**options)})
