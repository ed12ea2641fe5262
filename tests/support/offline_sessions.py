"""One session extracted by the offline extractor alone (no database), for the tests of its event rules."""

from __future__ import annotations

import datetime as dt

from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.models import EpisodeExtraction, KeyEvent, Message, OpenItem, Transcript

DAY = dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.UTC)


def extract(
    embedder: Embedder, said: list[tuple[str, str]], offered: list[OpenItem] | None = None, when: dt.datetime = DAY
) -> EpisodeExtraction:
    transcript = Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id=f"s-{when:%Y%m%d}",
        purpose="general",
        started_at=None,
        ended_at=when,
        messages=[Message(role=role, content=text) for role, text in said],  # type: ignore[arg-type]
    )
    return OfflineExtractor(embedder).extract(transcript, offered).extraction


def decisions(episode: EpisodeExtraction) -> list[KeyEvent]:
    return [e for e in episode.key_events if e.type == "decision"]
