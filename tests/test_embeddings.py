"""The local embedder and the batching wrapper that coalesces concurrent calls."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jobs.embeddings import BatchingEmbedder, get_embedder
from jobs.models import episode_text


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


def test_fp32_onnx_runtime_vectors_equal_the_sentence_transformers_model() -> None:
    """The ONNX export run by ONNX Runtime gives the vectors SentenceTransformer.encode gives."""
    from jobs.embeddings import _sentence_transformer

    texts = ["Maria decided on the Team plan.", "hi", "Über-große Rechnung für Café René: 1.234,56 €",
             "東京の会議は 🎉 great\tsuccess,  really", "",
             " ".join(["The user reviewed the quarterly budget and the travel plan."] * 60)]  # > 256 tokens: cut
    ours = get_embedder("minilm-fp32").embed(texts)
    reference = _sentence_transformer().encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == reference.shape == (6, 384)
    assert np.abs(ours - reference).max() < 1e-5
    assert (ours * reference).sum(axis=1).min() > 0.99999


def test_int8_vectors_stay_close_to_the_float_model_and_rank_the_same() -> None:
    """The default (int8 weights) keeps each vector within cosine 0.98 of the float model's, and a
    query still finds the document on its topic first."""
    docs = ["Maria chose the Team plan for 40 seats after comparing prices with the sales agent.",
            "The user booked a hotel in Lisbon for the conference and asked about late check-out.",
            "Tom's daughter started swimming lessons; he worries about her fear of deep water.",
            "The migration of the orders database to PostgreSQL 18 is planned for the weekend.",
            "She painted a sunrise over the lake and will show it at the local art fair.",
            "The agent explained how to reset two-factor authentication after losing a phone."]
    queries = ["Which subscription plan did they pick?", "Where is the user staying for the conference?",
               "What is the kid afraid of?", "When does the database move happen?",
               "What did she paint?", "How do I get back into my account without my phone?"]
    exact, quantised = get_embedder("minilm-fp32"), get_embedder("minilm")
    d32, q32 = exact.embed(docs), exact.embed(queries)
    d8, q8 = quantised.embed(docs), quantised.embed(queries)
    cosines = np.concatenate([(d8 * d32).sum(axis=1), (q8 * q32).sum(axis=1)])
    assert cosines.min() > 0.98 and np.median(cosines) > 0.99
    assert np.allclose(np.linalg.norm(d8, axis=1), 1.0, atol=1e-4)
    assert list((q32 @ d32.T).argmax(axis=1)) == list(range(6))  # the topics are told apart ...
    assert list((q8 @ d8.T).argmax(axis=1)) == list(range(6))  # ... and still are with int8


def test_int8_vector_of_a_text_does_not_depend_on_its_batch() -> None:
    """Activations are quantised with one scale per forward pass, so int8 runs one text per pass:
    a text embedded alone and embedded among longer texts gets the same vector."""
    model = get_embedder("minilm")
    text = "Maria decided on the Team plan."
    alone = model.embed([text])[0]
    among = model.embed(["A much longer text about the quarterly budget, the travel plan and the hiring.",
                         text, "Über-große Rechnung: 1.234,56 €"])[1]
    assert np.array_equal(alone, among)


def test_a_process_loads_the_cached_model_without_torch() -> None:
    """Once the ONNX files are cached, a new process (a CLI call, a worker) embeds without importing
    torch, transformers or sentence-transformers, which alone take seconds to import."""
    get_embedder("minilm").embed(["make sure the cache is written"])
    code = ("import sys; from jobs.embeddings import get_embedder; v = get_embedder('minilm').embed(['hello']); "
            "print(v.shape, sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "(1, 384) []"
