"""The built-in embedders, as the ``episodes.embedders`` entry points in pyproject.toml name them.

Each is a callable ``(option, threads, cache_dir, model_dir) -> Embedder`` (:mod:`jobs.registry`):
``option`` is what follows the colon of the name (``voyage:voyage-3``, ``hashing:64``), None
without one; each imports its module at its first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import ConfigError

if TYPE_CHECKING:
    from jobs.embeddings.hashing import HashingEmbedder
    from jobs.embeddings.minilm import MiniLMEmbedder
    from jobs.embeddings.voyage import VoyageEmbedder


def minilm(option: str | None, threads: int, cache_dir: Path, model_dir: Path | None) -> MiniLMEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime, int8 weights."""
    from jobs.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder("int8", threads=threads, cache_dir=cache_dir, model_dir=model_dir)


def minilm_fp32(option: str | None, threads: int, cache_dir: Path, model_dir: Path | None) -> MiniLMEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime, float32 weights."""
    from jobs.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder("fp32", threads=threads, cache_dir=cache_dir, model_dir=model_dir)


def voyage(option: str | None, threads: int, cache_dir: Path, model_dir: Path | None) -> VoyageEmbedder:
    """Voyage's API (the voyage extra; VOYAGE_API_KEY): ``voyage:MODEL`` picks the model, ``voyage:MODEL:DIM``
    its dimension (jobs.embeddings.voyage)."""
    from jobs.embeddings.voyage import DEFAULT_MODEL, VoyageEmbedder

    return VoyageEmbedder(option or DEFAULT_MODEL)


def hashing(option: str | None, threads: int, cache_dir: Path, model_dir: Path | None) -> HashingEmbedder:
    """Feature hashing (tests and offline use); ``hashing:DIM`` sets the dimension (8..4096, default 256)."""
    from jobs.embeddings.hashing import HashingEmbedder

    dim = option or "256"
    if not dim.isdigit() or not 8 <= int(dim) <= 4096:
        raise ConfigError(f"embedder 'hashing:{dim}': hashing takes a dimension between 8 and 4096, e.g. hashing:64.")
    return HashingEmbedder(int(dim))
