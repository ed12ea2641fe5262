"""Hosted embeddings from Voyage AI: an optional extra (``pip install voyageai``; VOYAGE_API_KEY)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from jobs.embeddings.protocol import Vectors
from jobs.errors import ConfigError


class VoyageEmbedder:
    """Voyage's embedding API; the client is created at the first call, so configuring it costs nothing."""

    def __init__(self, model: str = "voyage-3-lite", dim: int = 512) -> None:
        self.name = model
        self.dim = dim
        self._client: Any = None  # voyageai.Client: the package is optional and untyped

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self._client is None:
            try:
                voyageai = importlib.import_module("voyageai")  # optional and untyped: looked up by name
            except ImportError:
                raise ConfigError("EPISODES_EMBEDDER=voyage needs `pip install voyageai` and VOYAGE_API_KEY.") from None
            self._client = voyageai.Client()
        result = self._client.embed(list(texts), model=self.name, input_type="document")
        vectors: Vectors = np.asarray(result.embeddings, dtype=np.float32)
        unit: Vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return unit
