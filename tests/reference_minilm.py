"""The reference MiniLM pipeline the tests hold the runtime to: what jobs/embeddings did with torch.

Before the runtime built its ONNX graph from the weights, it loaded the model in
sentence-transformers, exported the transformer with ``torch.onnx.export`` (opset 17, dynamic
batch and token axes) and quantised a copy with ``quantize_dynamic``; embed() tokenised, ran ONNX
Runtime, mean-pooled over the attention mask and normalised. This module keeps that pipeline,
unchanged, for the tests only (they may import torch; the runtime must not). Tokenisation here is
sentence-transformers' own, so it checks the runtime's tokenizer set-up as well.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime
import pytest

from jobs.embeddings.model_cache import default_cache_dir
from jobs.embeddings.model_fetch import model_folder

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@cache
def sentence_transformer() -> Any:
    """The model's verified files in sentence-transformers, offline, on the CPU (loaded once per test process)."""
    with pytest.MonkeyPatch.context() as env, warnings.catch_warnings():
        env.setenv("HF_HUB_OFFLINE", "1")
        env.setenv("TOKENIZERS_PARALLELISM", "false")
        env.setenv("TRANSFORMERS_VERBOSITY", "error")
        warnings.simplefilter("ignore")
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(model_folder(default_cache_dir(), weights=True)), device="cpu").eval()


def encode(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """SentenceTransformer.encode: the float vectors every MiniLM embedder is measured against."""
    return np.asarray(sentence_transformer().encode(list(texts), normalize_embeddings=True, convert_to_numpy=True))


def export(destination: Path) -> Path:
    """The transformer exported with torch.onnx.export, exactly as the runtime used to."""
    import torch

    model = sentence_transformer()

    class Encoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    sample = model.tokenizer(["an example to trace"], return_tensors="pt")
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder(model[0].auto_model).eval(), tuple(sample[name] for name in INPUTS),
                          str(destination), input_names=list(INPUTS), output_names=["last_hidden_state"],
                          opset_version=17, dynamo=False,
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")})
    return destination


def quantize(exported: Path, destination: Path) -> Path:
    """quantize_dynamic with the runtime's arguments, as it was called on the torch export."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(exported, destination, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         op_types_to_quantize=["MatMul"], extra_options={"MatMulConstBOnly": True})
    return destination


class OnnxReference:
    """Runs an exported file as the runtime's embed() did: int8 one text per pass, float in batches."""

    def __init__(self, path: Path, batch_size: int) -> None:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        tokenizer, max_length = sentence_transformer().tokenizer, sentence_transformer().max_seq_length
        vectors = np.empty((len(texts), 384), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            feed = {name: np.asarray(values, dtype=np.int64) for name, values in
                    tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="np").items()
                    if name in INPUTS}
            hidden = self.session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            vectors[start:start + len(batch)] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return vectors
