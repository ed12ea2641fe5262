"""Embedders: a small interface, the local default, and a hosted option.

The default is all-MiniLM-L6-v2 (384 dimensions) from its pinned files, verified by digest
(:mod:`jobs.embeddings.model_files`, fetched by :mod:`jobs.embeddings.model_fetch`), run with ONNX Runtime from an ONNX graph built straight from those
weights (no PyTorch at install or run time), its matrix weights quantised to int8 (``minilm``;
``minilm-fp32`` runs the float graph). :func:`get_embedder` returns one embedder per process and
arguments, loaded at its first call.

What is embedded for an episode: :func:`jobs.models.episode_text`. Queries embed the opening message as it is.
Vectors are L2-normalised, so cosine distance and inner product rank identically.

Nothing here reads the environment: the caller passes the thread count, the cache folder and the model folder.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.embeddings.model_cache import default_cache_dir
from jobs.embeddings.protocol import Embedder, Vectors
from jobs.lazy import lazy_names
from jobs.registry import EMBEDDERS, load

if TYPE_CHECKING:
    from jobs.config import Settings
    from jobs.embeddings.batching import BatchingEmbedder
    from jobs.embeddings.hashing import HashingEmbedder
    from jobs.embeddings.minilm import MiniLMEmbedder
    from jobs.embeddings.voyage import VoyageEmbedder

# The embedders' classes, each imported at its first use (PEP 562 here, in _embedder below): a process
# uses one embedder, and one that never embeds (the Claude Code SessionStart hook) imports only it.
_WHERE = {
    "BatchingEmbedder": "jobs.embeddings.batching",
    "HashingEmbedder": "jobs.embeddings.hashing",
    "MiniLMEmbedder": "jobs.embeddings.minilm",
    "VoyageEmbedder": "jobs.embeddings.voyage",
}
__all__ = [
    "BatchingEmbedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "Vectors",
    "VoyageEmbedder",
    "embedder_for",
    "get_embedder",
]

__getattr__, __dir__ = lazy_names(globals(), _WHERE)


def get_embedder(
    name: str = "minilm", *, threads: int = 1, cache_dir: Path | None = None, model_dir: Path | None = None
) -> Embedder:
    """The embedder called ``name``: ``minilm`` (int8), ``minilm-fp32``, ``voyage[:model]``, ``hashing[:dim]``
    or another registered in the ``episodes.embedders`` entry points (:mod:`jobs.registry`).

    ``hashing`` is for tests and offline use (:mod:`jobs.embeddings.hashing`). The name recorded by
    ``episodes init`` for MiniLM (``all-MiniLM-L6-v2``) is accepted too, in any case.

    One instance per process and arguments, so the model loads once. ``threads``, ``cache_dir``
    (None: the per-user cache folder) and ``model_dir`` (EPISODES_MODEL_DIR; None: the verified
    copy in the cache folder, fetched there at the first use) apply to MiniLM only.
    """
    return _embedder(name, threads, cache_dir or default_cache_dir(), model_dir)


ALIASES = {"all-minilm-l6-v2": "minilm"}  # the name `episodes init` records for MiniLM, in any case


@cache
def _embedder(name: str, threads: int, cache_dir: Path, model_dir: Path | None) -> Embedder:
    base, _, option = name.partition(":")
    base = ALIASES.get(base.lower(), base.lower())
    made = load(EMBEDDERS, base, "embedder")(option or None, threads, cache_dir, model_dir)
    embedder: Embedder = made
    return embedder


def embedder_for(settings: Settings) -> Embedder:
    """The configured embedder (EPISODES_EMBEDDER, EPISODES_CACHE_DIR, EPISODES_MODEL_DIR),
    one per process."""
    return get_embedder(
        settings.embedder, threads=settings.embed_threads, cache_dir=settings.cache_dir, model_dir=settings.model_dir
    )
