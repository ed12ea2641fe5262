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


def test_onnx_runtime_vectors_equal_the_sentence_transformers_model() -> None:
    """The ONNX export run by ONNX Runtime gives the vectors SentenceTransformer.encode gives."""
    from jobs.embeddings import _sentence_transformer

    texts = ["Maria decided on the Team plan.", "hi", "Über-große Rechnung für Café René: 1.234,56 €",
             " ".join(["The user reviewed the quarterly budget and the travel plan."] * 60)]  # > 256 tokens: cut
    ours = get_embedder("minilm").embed(texts)
    reference = _sentence_transformer().encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == reference.shape == (4, 384)
    assert np.abs(ours - reference).max() < 1e-5
    assert (ours * reference).sum(axis=1).min() > 0.99999
