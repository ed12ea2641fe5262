"""What every embedder offers: a name, a dimension, and unit vectors for a batch of texts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

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
