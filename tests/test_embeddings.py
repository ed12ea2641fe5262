"""The local embedder and the batching wrapper that coalesces concurrent calls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jobs.embeddings import BatchingEmbedder, episode_text, get_embedder


def test_batching_embedder_returns_each_caller_its_own_vectors() -> None:
    inner = get_embedder("minilm")
    texts = [f"Maria decided on plan number {n} for the warehouse." for n in range(24)]
    direct = inner.embed(texts)
    batching = BatchingEmbedder(inner, max_batch=8, max_wait=0.02)
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda t: batching.embed([t])[0], texts))
    assert direct.shape == (24, 384)
    assert np.allclose(np.stack(results), direct, atol=1e-5)
    assert np.allclose(np.linalg.norm(direct, axis=1), 1.0, atol=1e-4)


def test_episode_text_lists_summary_tags_events_and_entities() -> None:
    text = episode_text("Maria chose Team.", ["pricing"], ["Maria decided on Team."], ["Maria", "Acme"])
    assert text.splitlines() == ["Maria chose Team.", "Topics: pricing.", "Maria decided on Team.",
                                 "Mentions: Maria, Acme."]
