"""Hosted embeddings from Voyage AI: the optional extra ``episodes[voyage]`` (the ``voyageai`` client) and
VOYAGE_API_KEY.

``EPISODES_EMBEDDER=voyage`` is voyage-3-lite (512 dimensions); ``voyage:MODEL`` picks another model at
its default dimension, ``voyage:MODEL:DIM`` another dimension where the model offers several (the
Matryoshka models: 256, 512, 1024 or 2048), or the dimension of a model this table does not know yet.
The name the database records is the same form (``voyage:voyage-3.5:512``), so recall can find the
embedder again from it.

Voyage embeds a search query otherwise than the documents searched (``input_type``): episodes and their
lines go in as documents (:meth:`VoyageEmbedder.embed`), recall's opening message as a query
(:meth:`VoyageEmbedder.embed_queries`, reached through :func:`jobs.embeddings.protocol.embed_queries`).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from jobs.embeddings.protocol import Vectors
from jobs.errors import ConfigError

DEFAULT_MODEL = "voyage-3-lite"
_MATRYOSHKA = (256, 512, 1024, 2048)
# model -> (its default dimension, the dimensions it can give); from docs.voyageai.com/docs/embeddings
MODELS: dict[str, tuple[int, tuple[int, ...]]] = {
    "voyage-4-large": (1024, _MATRYOSHKA),
    "voyage-4": (1024, _MATRYOSHKA),
    "voyage-4-lite": (1024, _MATRYOSHKA),
    "voyage-3.5": (1024, _MATRYOSHKA),
    "voyage-3.5-lite": (1024, _MATRYOSHKA),
    "voyage-3-large": (1024, _MATRYOSHKA),
    "voyage-code-3": (1024, _MATRYOSHKA),
    "voyage-3": (1024, (1024,)),
    "voyage-3-lite": (512, (512,)),
    "voyage-finance-2": (1024, (1024,)),
    "voyage-law-2": (1024, (1024,)),
    "voyage-multilingual-2": (1024, (1024,)),
    "voyage-code-2": (1536, (1536,)),
    "voyage-large-2": (1536, (1536,)),
    "voyage-large-2-instruct": (1024, (1024,)),
    "voyage-2": (1024, (1024,)),
}


def parse(option: str | None) -> tuple[str, int, bool]:
    """``MODEL`` or ``MODEL:DIM`` (what follows ``voyage:``) -> (model, dimension, whether to ask Voyage for
    that dimension); the error says which models and dimensions there are."""
    model, _, wanted = (option or DEFAULT_MODEL).partition(":")
    model = model.strip().lower()
    if wanted and not (wanted.isdigit() and 8 <= int(wanted) <= 4096):
        raise ConfigError(
            f"embedder 'voyage:{option}': the dimension after the model is a whole number, e.g. voyage:voyage-3.5:512."
        )
    known = MODELS.get(model)
    if known is None:
        if not wanted:
            raise ConfigError(
                f"embedder 'voyage:{option}': episodes does not know the dimension of {model!r}; name it, e.g. "
                f"voyage:{model}:1024, or use one of {', '.join(MODELS)}."
            )
        return model, int(wanted), True
    default, offered = known
    dim = int(wanted) if wanted else default
    if dim not in offered:
        raise ConfigError(
            f"embedder 'voyage:{option}': {model} gives {' or '.join(map(str, offered))} dimensions, not {dim}."
        )
    return model, dim, len(offered) > 1


class VoyageEmbedder:
    """Voyage's embeddings API through the ``voyageai`` client, created at the first call, so configuring it
    costs nothing. ``base_url`` and ``api_key`` default to the client's own (Voyage's API; VOYAGE_API_KEY)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dim: int | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
    ) -> None:
        self.model, self.dim, self._ask_dim = parse(model if dim is None else f"{model}:{dim}")
        default = MODELS.get(self.model, (None, ()))[0]
        self.name = f"voyage:{self.model}" if self.dim == default else f"voyage:{self.model}:{self.dim}"
        self._client_args: dict[str, Any] = {"base_url": base_url, "api_key": api_key, "max_retries": max_retries}
        self._client: Any = None  # voyageai.Client: the package is an optional extra

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Vectors of documents: episodes, their lines, anything searched."""
        return self._embed(texts, "document")

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Vectors of search queries: recall's opening message."""
        return self._embed(texts, "query")

    def _embed(self, texts: Sequence[str], input_type: str) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        result = self._connect().embed(
            list(texts),
            model=self.model,
            input_type=input_type,
            output_dimension=self.dim if self._ask_dim else None,
        )
        vectors: Vectors = np.asarray(result.embeddings, dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise ConfigError(
                f"Voyage's {self.model} answered {vectors.shape[-1]}-dimensional vectors, not {self.dim}: name the "
                f"model's dimension, e.g. EPISODES_EMBEDDER=voyage:{self.model}:{vectors.shape[-1]}."
            )
        unit: Vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return unit

    def _connect(self) -> Any:
        if self._client is None:
            try:
                voyageai = importlib.import_module("voyageai")
            except ImportError:
                raise ConfigError(
                    f"EPISODES_EMBEDDER={self.name} needs the voyageai client (the voyage extra: "
                    'pip install -e ".[voyage]" in the clone, or pip install voyageai) and VOYAGE_API_KEY.'
                ) from None
            self._client = voyageai.Client(**self._client_args)
        return self._client
