"""A hashing embedder, for tests and offline use: no weights, no network, any dimension.

Each lower-cased word (and each pair of neighbouring words) is hashed (BLAKE2b) to a coordinate
and a sign; the counts are L2-normalised. Texts that share words come out close, so recall
still ranks sensibly, but it knows no synonyms: a stand-in that lets the test suite and the
benchmarks switch embedders (``episodes reembed --embedder hashing:64``) without a second
model download. Not meant for production memory.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from jobs.embeddings.protocol import Vectors

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """``hashing:DIM`` (DIM between 8 and 4096; ``hashing`` alone is 256)."""

    def __init__(self, dim: int = 256) -> None:
        if not 8 <= dim <= 4096:
            raise ValueError(f"hashing embedder dimension must be between 8 and 4096, not {dim}")
        self.dim = dim
        self.name = f"hashing:{dim}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for feature in [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))]:
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
                out[row, digest % self.dim] += 1.0 if digest >> 63 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out[:, 0] += norms[:, 0] == 0  # an empty text still gets a unit vector
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out
