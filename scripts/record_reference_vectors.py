"""Record the reference vectors the embedder tests compare with (tests/data/reference_vectors.json).

The runtime embeds with all-MiniLM-L6-v2 as an ONNX graph it builds from the weights, without torch
(jobs/embeddings/). The tests hold it to the pipeline it replaced, which needs torch: the float
vectors of ``SentenceTransformer.encode``, and the int8 vectors of the transformer exported with
``torch.onnx.export`` (opset 17, dynamic axes) and quantised with ``quantize_dynamic`` as the runtime
used to. Running that pipeline in every test run meant installing PyTorch (~750 MB) to run the
suite; this script runs it once and writes what the tests need: a fixed list of texts (the example
transcripts' messages spread by length, runs of them past the 256-token cut, and edge cases:
empty, whitespace, unicode, control characters), each with both vectors, the digests of the 36
quantised weight matrices and their scales, and the model revision and library versions used.

Re-record when the model revision, the texts or the quantiser's arguments change (a failing test
says so), on a machine with sentence-transformers and torch (the CPU build is enough)::

    pip install sentence-transformers torch --index-url https://download.pytorch.org/whl/cpu \\
        --extra-index-url https://pypi.org/simple
    python scripts/record_reference_vectors.py

Tokenisation here is sentence-transformers' own, so the file checks the runtime's tokenizer set-up
as well.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import platform
import sys
import tempfile
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DESTINATION = ROOT / "tests" / "data" / "reference_vectors.json"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
LIBRARIES = ("sentence-transformers", "transformers", "torch", "onnxruntime", "onnx", "tokenizers", "numpy")

EDGE_CASES = [
    "Maria decided on the Team plan.",
    "hi",
    "",
    "   \t\n  ",
    "Über-große Rechnung für Café René: 1.234,56 €",
    "東京の会議は 🎉 great\tsuccess,  really",
    "مرحبا، هل يمكنك تأكيد الطلب رقم ٤٥؟ שלום",
    "zero\u200bwidth\u200djoiner and a soft\u00adhyphen, e\u0301 combining, ﬁ ligature",
    "\u202eevil right-to-left override\u202c then \x1b[31mred\x1b[0m and a bell\x07",
    "🙂" * 300,  # one token each, far past the cut
    "a" * 5000,  # one long word
    " ".join(["The user reviewed the quarterly budget and the travel plan."] * 60),  # > 256 tokens: cut
]


def fixed_texts(singles: int = 48, runs: int = 10) -> list[str]:
    """The example transcripts' messages, ``singles`` of them spread from the shortest to the
    longest, ``runs`` joined runs of 12 consecutive messages (episode-sized, many past 256
    tokens), and the edge cases."""
    every = [
        message["content"]
        for path in sorted(EXAMPLES.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
        for message in json.loads(line)["messages"]
    ]
    by_length = sorted(set(every), key=lambda text: (len(text), text))
    spread = [by_length[i] for i in np.linspace(0, len(by_length) - 1, singles).astype(int)]
    joined = ["\n".join(every[start : start + 12]) for start in np.linspace(0, len(every) - 12, runs).astype(int)]
    return list(dict.fromkeys(spread + joined + EDGE_CASES))


def sentence_transformer(folder: Path) -> Any:
    """The model's verified files in sentence-transformers, offline, on the CPU."""
    os.environ.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        TRANSFORMERS_VERBOSITY="error",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as missing:
        sys.exit(
            f"record_reference_vectors.py needs sentence-transformers and torch ({missing}). Install them "
            "(the CPU build of torch is enough): pip install sentence-transformers torch --index-url "
            "https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SentenceTransformer(str(folder), device="cpu").eval()


def export(model: Any, destination: Path) -> Path:
    """The transformer exported with torch.onnx.export, exactly as the runtime used to."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = model.tokenizer(["an example to trace"], return_tensors="pt")
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Encoder(model[0].auto_model).eval(),
            tuple(sample[name] for name in INPUTS),
            str(destination),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")},
        )
    return destination


def quantize(exported: Path, destination: Path) -> Path:
    """quantize_dynamic with the runtime's arguments, as it was called on the torch export."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser's advice to pre-process, which the runtime silences too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(
            exported,
            destination,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul"],
            extra_options={"MatMulConstBOnly": True},
        )
    root.setLevel(level)
    return destination


def embed_int8(model: Any, path: Path, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """The quantised export run as the runtime's embed() ran it: one text per pass, mean pooling
    over the attention mask, L2 normalisation."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    vectors = np.empty((len(texts), 384), dtype=np.float32)
    for row, text in enumerate(texts):
        feed = {
            name: np.asarray(values, dtype=np.int64)
            for name, values in model.tokenizer(
                [text], padding=True, truncation=True, max_length=model.max_seq_length, return_tensors="np"
            ).items()
            if name in INPUTS
        }
        hidden = session.run(None, feed)[0]
        mask = feed["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        vectors[row] = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True))[0]
    return vectors


def quantised_digests(path: Path) -> dict[str, list[str]]:
    """SHA-256 of each quantised weight matrix and of its per-channel scales, sorted, by kind."""
    import onnx
    from onnx import numpy_helper

    tensors = onnx.load(path).graph.initializer
    return {
        suffix: sorted(
            hashlib.sha256(numpy_helper.to_array(t).tobytes()).hexdigest() for t in tensors if t.name.endswith(suffix)
        )
        for suffix in ("_quantized", "_scale")
    }


def packed(vector: npt.NDArray[np.float32]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from jobs.embeddings.model_cache import default_cache_dir
    from jobs.embeddings.model_fetch import HUB_REPO, REVISION, model_folder

    texts = fixed_texts()
    model = sentence_transformer(model_folder(default_cache_dir(), weights=True))
    fp32 = np.asarray(model.encode(texts, normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32)
    with tempfile.TemporaryDirectory() as scratch:
        int8_file = quantize(export(model, Path(scratch) / "export.onnx"), Path(scratch) / "export-int8.onnx")
        int8 = embed_int8(model, int8_file, texts)
        digests = quantised_digests(int8_file)
    record = {
        "about": "Written by scripts/record_reference_vectors.py (run it to re-record; do not edit by hand). "
        "fp32: SentenceTransformer.encode(normalize_embeddings=True); int8: torch.onnx.export (opset 17) "
        "quantised by quantize_dynamic (QInt8, per channel, reduce_range, MatMul with constant B), one "
        "text per pass, mean-pooled and normalised. Vectors: 384 float32, little-endian, base64.",
        "model": HUB_REPO,
        "revision": REVISION,
        "recorded_with": {"python": platform.python_version(), **{name: metadata.version(name) for name in LIBRARIES}},
        "quantised_weights": digests,
        "texts": [{"text": text, "fp32": packed(fp32[i]), "int8": packed(int8[i])} for i, text in enumerate(texts)],
    }
    DESTINATION.parent.mkdir(parents=True, exist_ok=True)
    DESTINATION.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(
        f"{DESTINATION.relative_to(ROOT)}: {len(texts)} texts, {len(digests['_quantized'])} quantised matrices, "
        f"{DESTINATION.stat().st_size // 1024} KiB"
    )


if __name__ == "__main__":
    main()
