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
from jobs.errors import ConfigError
from jobs.lazy import lazy_names

if TYPE_CHECKING:
    from jobs.config import Settings
    from jobs.embeddings.batching import BatchingEmbedder
    from jobs.embeddings.hashing import HashingEmbedder
    from jobs.embeddings.minilm import MiniLMEmbedder
    from jobs.embeddings.voyage import VoyageEmbedder

# The embedders' classes, each imported at its first use (PEP 562 here, in _embedder below): a process
# uses one embedder, and one that never embeds (the Claude Code SessionStart hook) imports only it.
_WHERE = {"BatchingEmbedder": "jobs.embeddings.batching", "HashingEmbedder": "jobs.embeddings.hashing",
          "MiniLMEmbedder": "jobs.embeddings.minilm", "VoyageEmbedder": "jobs.embeddings.voyage"}
__all__ = ["BatchingEmbedder", "Embedder", "HashingEmbedder", "MiniLMEmbedder", "Vectors", "VoyageEmbedder", "embedder_for",
           "get_embedder"]

__getattr__, __dir__ = lazy_names(globals(), _WHERE)


def get_embedder(name: str = "minilm", *, threads: int = 1, cache_dir: Path | None = None,
                 model_dir: Path | None = None) -> Embedder:
    """The embedder called ``name``: ``minilm`` (int8), ``minilm-fp32``, ``voyage[:model]`` or ``hashing[:dim]``.

    ``hashing`` is for tests and offline use (:mod:`jobs.embeddings.hashing`). The name recorded by
    ``episodes init`` for MiniLM (``all-MiniLM-L6-v2``) is accepted too, in any case.

    One instance per process and arguments, so the model loads once. ``threads``, ``cache_dir``
    (None: the per-user cache folder) and ``model_dir`` (EPISODES_MODEL_DIR; None: the verified
    copy in the cache folder, fetched there at the first use) apply to MiniLM only.
    """
    return _embedder(name, threads, cache_dir or default_cache_dir(), model_dir)


@cache
def _embedder(name: str, threads: int, cache_dir: Path, model_dir: Path | None) -> Embedder:
    if name in ("minilm", "all-minilm-l6-v2", "all-MiniLM-L6-v2", "minilm-fp32"):
        from jobs.embeddings.minilm import MiniLMEmbedder

        return MiniLMEmbedder("fp32" if name == "minilm-fp32" else "int8", threads=threads, cache_dir=cache_dir,
                              model_dir=model_dir)
    if name.startswith("voyage"):
        from jobs.embeddings.voyage import VoyageEmbedder

        model = name.split(":", 1)[1] if ":" in name else "voyage-3-lite"
        return VoyageEmbedder(model)
    if name == "hashing" or name.startswith("hashing:"):
        from jobs.embeddings.hashing import HashingEmbedder

        dim = name.partition(":")[2] or "256"
        if not dim.isdigit() or not 8 <= int(dim) <= 4096:
            raise ConfigError(f"embedder {name!r}: hashing takes a dimension between 8 and 4096, e.g. hashing:64.")
        return HashingEmbedder(int(dim))
    raise ConfigError(f"EPISODES_EMBEDDER={name!r} is unknown; use minilm, minilm-fp32, voyage[:model] "
                      "or hashing[:dim] (tests and offline use).")


def embedder_for(settings: Settings) -> Embedder:
    """The configured embedder (EPISODES_EMBEDDER, EPISODES_CACHE_DIR, EPISODES_MODEL_DIR),
    one per process."""
    return get_embedder(settings.embedder, threads=settings.embed_threads, cache_dir=settings.cache_dir,
                        model_dir=settings.model_dir)
