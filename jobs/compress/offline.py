"""The offline compressor: a deterministic merge of a period's episodes, no network."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from jobs.compress.compressor import Compression, SourceEpisode
from jobs.compress.periods import Period
from jobs.compress.schema import tag_list
from jobs.config import Settings
from jobs.embeddings import Embedder, embedder_for, get_embedder
from jobs.models import Entity

OFFLINE_VERSION = "compress-offline-1"
SUMMARY_CHARS = 1200  # offline summary length
_HEAD = re.compile(r"^Offline merge of \d+ sessions from \d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2}\.\s*")


def without_head(summary: str) -> str:
    """The summary without its first line, "Offline merge of N sessions from ... to ...": the label says
    to an agent that no model wrote it; a person's page says so in its own words (jobs/service/page_view)."""
    return _HEAD.sub("", summary, count=1)


class OfflineCompressor:
    """Deterministic merge, no network: lower quality than Claude, labelled ``model='offline'``.

    Summary: the sources scoring highest on importance + centrality (cosine of the episode's
    embedding to the period's mean), in date order, after a line saying it is an offline merge.
    Tags and entities: the most frequent across the period (ties: first seen). Importance: the
    period's highest. Events: all carried events, copied (no highlights).
    """

    name = "offline"
    prompt_version = OFFLINE_VERSION

    def __init__(self, embedder: Embedder | None = None, settings: Settings | None = None) -> None:
        self._embedder = embedder
        self._settings = settings

    def close(self) -> None:
        """Nothing to release (the embedder is shared)."""

    def compress(self, period: Period, sources: Sequence[SourceEpisode]) -> Compression:
        n = len(sources)
        vectors = self._vectors(sources)
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        mean = unit.mean(axis=0)
        centrality = unit @ (mean / max(float(np.linalg.norm(mean)), 1e-12))
        scores = [float(s.importance) + float(c) for s, c in zip(sources, centrality)]
        ranked = sorted(range(n), key=lambda i: (-round(scores[i], 6), sources[i].ended_at, sources[i].id))
        first, last = sources[0].ended_at.date(), sources[-1].ended_at.date()
        head = f"Offline merge of {n} sessions from {first} to {last}."
        chosen: list[int] = []
        used = len(head)
        for i in ranked[:3]:
            piece = len(sources[i].summary) + 14
            if chosen and used + piece > SUMMARY_CHARS:
                break
            chosen.append(i)
            used += piece
        parts = [f"{sources[i].ended_at.date()}: {sources[i].summary.strip()}" for i in sorted(chosen)]
        summary = " ".join([head, *parts])
        if len(summary) > SUMMARY_CHARS:
            summary = summary[: SUMMARY_CHARS - 3].rstrip() + "..."
        tags: Counter[str] = Counter()
        order: dict[str, int] = {}
        names: Counter[tuple[str, str]] = Counter()
        shown: dict[tuple[str, str], str] = {}
        for s in sources:
            for tag in s.topic_tags:
                tags[tag] += 1
                order.setdefault(tag, len(order))
            for name, kind in dict.fromkeys(s.entities):
                key = (name.casefold(), kind)
                names[key] += 1
                shown.setdefault(key, name)
        top_tags = sorted(tags, key=lambda t: (-tags[t], order[t]))
        first_seen = {k: i for i, k in enumerate(shown)}
        top_names = sorted(shown, key=lambda k: (-names[k], first_seen[k]))[:30]
        return Compression(
            summary=summary,
            topic_tags=tag_list(top_tags),
            importance=max(float(s.importance) for s in sources),
            entities=[Entity.model_construct(name=shown[k], kind=k[1]) for k in top_names],
            highlights=[],
            model=self.name,
            prompt_version=self.prompt_version,
        )

    def _vectors(self, sources: Sequence[SourceEpisode]) -> np.ndarray:
        """Stored embeddings; sources whose vectors were purged are embedded again, in memory."""
        missing = [i for i, s in enumerate(sources) if s.embedding is None]
        fresh: dict[int, np.ndarray] = {}
        if missing:
            embedder = self._embedder or (embedder_for(self._settings) if self._settings else get_embedder())
            fresh = dict(zip(missing, embedder.embed([sources[i].text() for i in missing])))
        return np.stack(
            [np.asarray(fresh[i] if i in fresh else s.embedding, dtype=np.float32) for i, s in enumerate(sources)]
        )
