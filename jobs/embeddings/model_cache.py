"""The encoder's ONNX files, built once per machine, kept in a cache folder, checked at every load.

Building is byte-reproducible: the same weights, the same graph builder (:data:`GRAPH_VERSION`)
and a supported onnx / onnxruntime give the same file, bit for bit (seen with onnx 1.18 and
onnxruntime 1.22.1, and with onnx 1.23.2 and onnxruntime 1.32.0). So each file's SHA-256 is pinned
here, like the model files', and a file is named by its digest. A process checks the file's
digest at every load (about 45 ms for the 59 MB int8 file) through the descriptor ONNX Runtime
then reads, so no swap can slip in between. A cached file that does not match (changed on disk, truncated) is rebuilt once; if the
rebuilt file does not match either, the local onnx / onnxruntime serialise differently from the
versions the digests were pinned with, and the encoder is refused rather than run unchecked.

Files are written under a name private to the writing thread and then renamed (``os.replace`` is
atomic): processes that start at the same time on an empty cache each build, one file wins, and no
process ever reads a partial file.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import platformdirs

from jobs.errors import ConfigError

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

Precision = Literal["int8", "fp32"]

GRAPH_VERSION = 1
"""Bump when onnx_graph.py or quantize.py would write a different file for the same weights, and pin
the new files' digests in :data:`BUILT_DIGESTS` (build twice in fresh processes, compare)."""

BUILT_DIGESTS: dict[tuple[int, Precision], str] = {
    (1, "fp32"): "2e4650fa3678599dcde373cfd021b8c183f8d0c305535b3845e574974e24ad34",  # 90,305,688 bytes
    (1, "int8"): "8d61936b2bc1c6a803f05240608ab6f3df1d287b5bd97dd87455712836123f11",  # 58,619,074 bytes
}
"""SHA-256 of the encoder files built from the pinned weights, by graph version and precision."""


def default_cache_dir() -> Path:
    """The per-user cache folder (``~/.cache/episodes`` on Linux)."""
    return Path(platformdirs.user_cache_dir("episodes"))


def encoder_path(cache_dir: Path, precision: Precision) -> Path:
    """Where the encoder of ``precision`` is cached: its name carries its pinned digest."""
    suffix = "-int8" if precision == "int8" else ""
    return cache_dir / f"all-MiniLM-L6-v2-{expected_digest(precision)[:16]}{suffix}.onnx"


def expected_digest(precision: Precision) -> str:
    try:
        return BUILT_DIGESTS[(GRAPH_VERSION, precision)]
    except KeyError:
        raise ConfigError(
            f"no pinned digest for the {precision} encoder of graph version {GRAPH_VERSION}; "
            "pin it in jobs/embeddings/model_cache.py (a developer's step)."
        ) from None


@contextmanager
def verified_encoder(
    weights_folder: Callable[[], Path], cache_dir: Path, precision: Precision
) -> Iterator[str | bytes]:
    """The cached ONNX encoder, float32 or with int8 weights, once its bytes match their pinned digest:
    what to hand ONNX Runtime, valid inside the ``with`` block.

    Built when missing or not matching: from the float file if that is cached and matches, else
    from the weights (``weights_folder()`` returns their verified folder; about a second), then
    quantised for int8 (a few seconds). The int8 path does not write the float file.

    The file is opened once and hashed through that descriptor (mmap: no copy); ONNX Runtime then
    reads the same open file (``/proc/self/fd/N``), so a file renamed into place after the check is
    not the one loaded. Where there is no /proc, the checked bytes themselves are handed over.
    """
    path, digest = encoder_path(cache_dir, precision), expected_digest(precision)
    fd = _open_matching(path, digest)
    if fd is None:
        if path.exists():
            log.warning(
                "%s does not match its pinned SHA-256 (changed or damaged on disk); rebuilding it",
                path,
                extra={"action": "encoder_mismatch"},
            )
        _build(weights_folder, cache_dir, precision, path)
        fd = _open_matching(path, digest)
        if fd is None:
            actual = hashlib.sha256(_read(path) or b"").hexdigest()
            path.unlink(missing_ok=True)
            raise ConfigError(_not_reproduced(precision, actual, digest))
    try:
        same_file = Path(f"/proc/self/fd/{fd}")
        yield str(same_file) if same_file.exists() else _read_all(fd)
    finally:
        os.close(fd)


def _build(weights_folder: Callable[[], Path], cache_dir: Path, precision: Precision, path: Path) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    model = _float_model(weights_folder, cache_dir)
    if precision == "fp32":
        import onnx

        _write_atomically(path, lambda partial: onnx.save_model(model, partial))
    else:
        from jobs.embeddings.quantize import quantize_int8

        _write_atomically(path, lambda partial: quantize_int8(model, partial))


def _open_matching(path: Path, digest: str) -> int | None:
    """A read-only descriptor of ``path`` if its content has SHA-256 ``digest``, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if os.fstat(fd).st_size > 0:
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as content:
                if hashlib.sha256(content).hexdigest() == digest:
                    return fd
    except (OSError, ValueError):
        pass
    os.close(fd)
    return None


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return b"".join(os.pread(fd, min(1 << 24, size - offset), offset) for offset in range(0, size, 1 << 24))


def _float_model(weights_folder: Callable[[], Path], cache_dir: Path) -> onnx.ModelProto:
    """The float encoder: the cached file if it matches, else built from the verified weights."""
    import onnx

    cached = _read(encoder_path(cache_dir, "fp32"))
    if cached is not None and hashlib.sha256(cached).hexdigest() == expected_digest("fp32"):
        return onnx.load_model_from_string(cached)
    from safetensors.numpy import load_file

    from jobs.embeddings.model_files import WEIGHTS
    from jobs.embeddings.onnx_graph import BertConfig, build_encoder

    folder = weights_folder()  # the encoder is built from these bytes only if they are the model's
    return build_encoder(load_file(folder / WEIGHTS), BertConfig.from_file(folder / "config.json"))


def _not_reproduced(precision: Precision, actual: str, digest: str) -> str:
    import onnx
    import onnxruntime

    return (
        f"the {precision} encoder built here (sha256 {actual[:16]}...) differs from the pinned build "
        f"({digest[:16]}...): this onnx {onnx.__version__} / onnxruntime {onnxruntime.__version__} serialise "
        "the graph differently from the versions the digest was pinned with, and an encoder that cannot be "
        "checked is not run. Install the versions of requirements/runtime.txt (pip install --require-hashes "
        "-r requirements/runtime.txt), or use another embedder (EPISODES_EMBEDDER)."
    )


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    partial = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
