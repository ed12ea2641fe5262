"""What every embedder offers: a name, a dimension, and unit vectors for a batch of texts; and what some offer
besides: vectors of search queries made otherwise than those of documents (Voyage's ``input_type``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
"""Shape (number of texts, dim), float32, each row L2-normalised."""


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return an array of shape (len(texts), dim), float32, L2-normalised."""
        ...


@runtime_checkable
class QueryEmbedder(Protocol):
    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Vectors of search queries, for a model that embeds a query otherwise than a document."""
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """Vectors of search queries (recall's opening message): the embedder's query embedding when it has one,
    else its :meth:`~Embedder.embed` (MiniLM embeds both alike).

    Asks for the attribute, which is what ``isinstance(embedder, QueryEmbedder)`` checks: that check of a
    runtime protocol cost ~20 µs, on every recall."""
    embed = getattr(embedder, "embed_queries", None)
    if callable(embed):
        vectors: Vectors = embed(texts)
        return vectors
    return embedder.embed(texts)
