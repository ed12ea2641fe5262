"""The encoder's ONNX files, built once per machine and kept in a cache folder.

A file's name carries a fingerprint of the weights file and :data:`GRAPH_VERSION`, so new weights
or a changed graph builder never reuse a stale file. Files are written under a name private to
the writing thread and then renamed (``os.replace`` is atomic): processes that start at the same
time on an empty cache each build, one file wins, and no process ever reads a partial file.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import platformdirs

if TYPE_CHECKING:
    import onnx

Precision = Literal["int8", "fp32"]

GRAPH_VERSION = 1
"""Bump when onnx_graph.py or quantize.py would write a different file for the same weights."""


def default_cache_dir() -> Path:
    """The per-user cache folder (``~/.cache/episodes`` on Linux)."""
    return Path(platformdirs.user_cache_dir("episodes"))


def encoder_file(folder: Path, cache_dir: Path, precision: Precision) -> Path:
    """The cached ONNX encoder of the model in ``folder``: float32, or with int8 weights.

    Built when missing: from the float file if that is cached, else from the weights (about a
    second), then quantised for int8 (a few seconds). The int8 path does not write the float file.
    """
    float_path = cache_dir / f"all-MiniLM-L6-v2-{_fingerprint(folder / 'model.safetensors')}.onnx"
    path = float_path if precision == "fp32" else float_path.with_name(f"{float_path.stem}-int8.onnx")
    if path.exists():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    model = _float_model(folder, float_path)
    if precision == "fp32":
        import onnx

        _write_atomically(path, lambda partial: onnx.save_model(model, partial))
    else:
        from jobs.embeddings.quantize import quantize_int8

        _write_atomically(path, lambda partial: quantize_int8(model, partial))
    return path


def _float_model(folder: Path, cached: Path) -> onnx.ModelProto:
    """The float encoder: the cached file if there is one, else built from the weights."""
    import onnx

    if cached.exists():
        return onnx.load(cached)
    from safetensors.numpy import load_file

    from jobs.embeddings.model_files import verify
    from jobs.embeddings.onnx_graph import BertConfig, build_encoder

    verify(folder, weights=True)  # the encoder is built from these bytes only if they are the model's
    return build_encoder(load_file(folder / "model.safetensors"), BertConfig.from_file(folder / "config.json"))


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    partial = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _fingerprint(weights: Path) -> str:
    """Size, first and last MiB of the weights file (its header names and places every tensor),
    and the graph version: cheap enough to compute at every process start."""
    digest = hashlib.sha256(f"{weights.stat().st_size} graph {GRAPH_VERSION}".encode())
    with weights.open("rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(-(1 << 20), os.SEEK_END)
        digest.update(handle.read())
    return digest.hexdigest()[:16]
