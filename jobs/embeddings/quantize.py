"""The int8 copy of the encoder: ONNX Runtime's dynamic quantisation, made once, quietly."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx


def quantize_int8(model: onnx.ModelProto, destination: Path) -> None:
    """Write ``model`` with its constant MatMul weights quantised to int8 per output channel.

    Activations are quantised at run time, per call (dynamic quantisation). ``reduce_range`` keeps
    weights to 7 bits, so the u8 x s8 products cannot saturate on CPUs without VNNI: the integer
    arithmetic, and so the vector, is the same on every x86 machine. ``MatMulConstBOnly`` leaves
    the attention products (both operands computed) in float.

    The model is passed in memory, not as a path: given a path, the quantiser writes its
    shape-inferred copy next to the input under a fixed name, which concurrent processes would
    share; given a model, it uses a private temporary folder.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet():
        quantize_dynamic(
            model,
            destination,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul"],
            extra_options={"MatMulConstBOnly": True},
        )


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence, for the duration of the call, the quantiser's log records and Python warnings.

    The quantiser logs advice meant for static quantisation ("consider pre-processing") through the
    root logger with ``logging.warning``. Records are dropped by where they come from (files of
    the onnx and onnxruntime packages, below ERROR), so other threads' records still pass. And
    ``logging.warning`` calls ``logging.basicConfig`` when the root logger has no handler, which
    would leave a stderr handler printing every later warning of the process: a NullHandler stands
    in for the duration of the call so that does not happen.
    """
    import onnxruntime

    sources = tuple(os.path.dirname(module.__file__ or "") + os.sep for module in (onnx, onnxruntime))

    def from_elsewhere(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not record.pathname.startswith(sources)

    root = logging.getLogger()
    stand_in = None if root.handlers else logging.NullHandler()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.addFilter(from_elsewhere)
        if stand_in is not None:
            root.addHandler(stand_in)
        try:
            yield
        finally:
            root.removeFilter(from_elsewhere)
            if stand_in is not None:
                root.removeHandler(stand_in)
