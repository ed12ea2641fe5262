"""The BERT encoder of all-MiniLM-L6-v2 as an ONNX graph, built from its weights with numpy.

This replaces ``torch.onnx.export`` of the sentence-transformers model, so neither installing nor
running episodes needs PyTorch. The graph computes what that export computes (transformers 5,
SDPA attention, opset 17), operation for operation, because the int8 copy is quantised from it and
ONNX Runtime fuses and quantises by graph pattern:

- every linear layer is ``Add(bias, MatMul(x, W^T))`` with ``W^T`` an initializer, so
  ``quantize_dynamic(..., MatMulConstBOnly=True)`` quantises the same 36 weight matrices per
  channel, and the attention products (both operands computed) stay float, as before;
- attention scales queries and keys by ``head_dim ** -0.25`` each before their product, as the
  exported SDPA does (not the scores by ``head_dim ** -0.5``: same value, different rounding);
- GELU is the exact erf form, written as the export writes it so ONNX Runtime fuses it alike;
- the heads are merged by a Reshape whose target shape is computed at run time, as in the export.
  With a constant target, shape inference would know the hidden size there and ONNX Runtime would
  fuse six more LayerNorms of the int8 graph into SkipLayerNormalization: float-equivalent, but
  int8 re-quantises the slightly different activations, which moved LoCoMo vectors by up to
  0.007 in cosine. As written, the float and int8 outputs equal the export's bit for bit (ONNX
  Runtime 1.32, LoCoMo texts).

One deliberate difference: the padding mask is added as ``(1 - mask) * float32 min`` (what HF's
eager BERT adds) rather than the export's ``Where(mask, 0, -inf)`` followed by a NaN guard. Both
give masked keys exactly zero weight after softmax, and a finite constant cannot make a NaN, so the
guard and the shape arithmetic around the boolean mask are not needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from jobs.embeddings.model_files import INPUTS

OPSET = 17  # LayerNormalization is a standard operator from 17 on; the torch export used 17
OUTPUT = "last_hidden_state"


@dataclass(frozen=True)
class BertConfig:
    """The parts of a Hugging Face ``config.json`` that shape a BERT encoder."""

    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    intermediate_size: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        """Read ``config.json``; refuse what this builder does not reproduce (rather than embed wrongly)."""
        raw = json.loads(path.read_text())
        expected = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
        unsupported = {key: raw.get(key, want) for key, want in expected.items() if raw.get(key, want) != want}
        if unsupported or raw["hidden_size"] % raw["num_attention_heads"]:
            raise ValueError(f"{path}: not a BERT encoder this builder reproduces ({unsupported or raw})")
        return cls(
            hidden_size=int(raw["hidden_size"]),
            num_attention_heads=int(raw["num_attention_heads"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            intermediate_size=int(raw["intermediate_size"]),
            layer_norm_eps=float(raw["layer_norm_eps"]),
        )


class _Graph:
    """Collects nodes and initializers; every node gets one output named after its layer."""

    def __init__(self, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, TensorProto] = {}
        self.built: dict[str, onnx.NodeProto] = {}

    def tensor(self, name: str, value: npt.NDArray[np.generic]) -> str:
        """An initializer (once per name): a weight, or a constant operand."""
        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(np.ascontiguousarray(value), name)
        return name

    def weight(self, name: str, transpose: bool = False) -> str:
        """A checkpoint tensor as an initializer; a linear layer's matrix is stored as ``W^T``."""
        value = self.weights[name]
        return self.tensor(f"{name}.T" if transpose else name, value.T if transpose else value)

    def scalar(self, value: float) -> str:
        return self.tensor(f"const.f32.{value!r}", np.array(value, dtype=np.float32))

    def ints(self, values: Sequence[int]) -> str:
        return self.tensor("const.i64." + ".".join(map(str, values)), np.array(values, dtype=np.int64))

    def op(self, op_type: str, inputs: Sequence[str], name: str, **attributes: int | float | list[int]) -> str:
        """A node whose one output is ``name``; asking again for a name already built reuses it."""
        node = helper.make_node(op_type, list(inputs), [name], name=name)
        node.attribute.extend(helper.make_attribute(key, value) for key, value in sorted(attributes.items()))
        if name in self.built:
            if self.built[name] != node:
                raise ValueError(f"two different nodes named {name!r}")
            return name
        self.built[name] = node
        self.nodes.append(node)
        return name


def build_encoder(weights: Mapping[str, npt.NDArray[np.generic]], config: BertConfig) -> onnx.ModelProto:
    """The encoder (embeddings and transformer layers, no pooler) with dynamic batch and token axes.

    ``weights`` maps the checkpoint's tensor names (``embeddings.word_embeddings.weight``, ...) to
    arrays, as ``safetensors.numpy.load_file`` returns them. The model's inputs are
    :data:`INPUTS` (int64, shape [batch, tokens]) and its output :data:`OUTPUT`, float32
    [batch, tokens, hidden_size], as sentence-transformers' Transformer module sees it.
    """
    g = _Graph(weights)
    hidden = _embeddings(g, config)
    mask = _mask_bias(g)
    for index in range(config.num_hidden_layers):
        hidden = _layer(g, hidden, mask, config, f"encoder.layer.{index}")
    g.nodes[-1].output[0] = OUTPUT  # the last LayerNorm's output is the model's
    axes = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes,
        "bert_encoder",
        inputs=[helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUTS],
        outputs=[helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*axes, config.hidden_size])],
        initializer=list(g.initializers.values()),
    )
    # IR 8, as the torch export wrote: readable by every ONNX Runtime this project supports.
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8, producer_name="episodes"
    )


def _embeddings(g: _Graph, config: BertConfig) -> str:
    """word + token type, then + position (HF's order), then LayerNorm."""
    words = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "embeddings.words")
    types = g.op("Gather", [g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "embeddings.types")
    tokens = g.op("Shape", ["input_ids"], "embeddings.tokens", start=1, end=2)
    positions = g.op(
        "Slice",
        [g.weight("embeddings.position_embeddings.weight"), g.ints([0]), tokens, g.ints([0])],
        "embeddings.positions",
    )  # rows 0..tokens-1: the positions of a batch without offset
    summed = g.op("Add", [g.op("Add", [words, types], "embeddings.words_types"), positions], "embeddings.sum")
    return _layer_norm(g, summed, "embeddings.LayerNorm", config)


def _mask_bias(g: _Graph) -> str:
    """[batch, 1, 1, tokens]: 0 where the key is a token, float32 min where it is padding."""
    mask = g.op("Cast", ["attention_mask"], "mask.float", to=TensorProto.FLOAT)
    padding = g.op("Sub", [g.scalar(1.0), mask], "mask.padding")
    bias = g.op("Mul", [padding, g.scalar(float(np.finfo(np.float32).min))], "mask.bias")
    return g.op("Unsqueeze", [bias, g.ints([1, 2])], "mask.bias4d")


def _layer(g: _Graph, x: str, mask: str, config: BertConfig, prefix: str) -> str:
    """Self-attention, then the feed-forward block; each is followed by residual add and LayerNorm."""
    attended = _linear(
        g, _self_attention(g, x, mask, config, f"{prefix}.attention.self"), f"{prefix}.attention.output.dense"
    )
    x = _layer_norm(
        g,
        g.op("Add", [attended, x], f"{prefix}.attention.output.residual"),
        f"{prefix}.attention.output.LayerNorm",
        config,
    )
    inner = _gelu(g, _linear(g, x, f"{prefix}.intermediate.dense"), f"{prefix}.intermediate.gelu")
    out = _linear(g, inner, f"{prefix}.output.dense")
    return _layer_norm(g, g.op("Add", [out, x], f"{prefix}.output.residual"), f"{prefix}.output.LayerNorm", config)


def _self_attention(g: _Graph, x: str, mask: str, config: BertConfig, prefix: str) -> str:
    """Multi-head scaled dot-product attention over [batch, tokens, hidden]; returns the same shape."""
    split = g.ints([0, 0, config.num_attention_heads, config.head_size])  # 0: keep batch and tokens

    def heads(kind: str, perm: list[int]) -> str:
        projected = _linear(g, x, f"{prefix}.{kind}")
        return g.op(
            "Transpose",
            [g.op("Reshape", [projected, split], f"{prefix}.{kind}.heads")],
            f"{prefix}.{kind}.transposed",
            perm=perm,
        )

    scale = g.scalar(float(np.float32(config.head_size**-0.25)))
    query = g.op("Mul", [heads("query", [0, 2, 1, 3]), scale], f"{prefix}.query.scaled")
    key = g.op("Mul", [heads("key", [0, 2, 3, 1]), scale], f"{prefix}.key.scaled")  # keys transposed for Q·Kᵀ
    scores = g.op("Add", [g.op("MatMul", [query, key], f"{prefix}.scores"), mask], f"{prefix}.scores.masked")
    probs = g.op("Softmax", [scores], f"{prefix}.probs", axis=-1)
    context = g.op("MatMul", [probs, heads("value", [0, 2, 1, 3])], f"{prefix}.context")
    merged = g.op("Transpose", [context], f"{prefix}.context.transposed", perm=[0, 2, 1, 3])
    # [batch, tokens, -1] computed at run time, as in the export: shape inference then leaves the
    # hidden size unknown here, and ONNX Runtime fuses the int8 graph's LayerNorms as it did before.
    merged_shape = g.op(
        "Concat", [g.op("Shape", ["input_ids"], "shape.batch_tokens"), g.ints([-1])], "shape.batch_tokens_rest", axis=0
    )
    return g.op("Reshape", [merged, merged_shape], f"{prefix}.context.merged")


def _linear(g: _Graph, x: str, prefix: str) -> str:
    """``x @ W^T + b`` as MatMul with a constant B, then Add: the form the dynamic quantiser picks."""
    product = g.op("MatMul", [x, g.weight(f"{prefix}.weight", transpose=True)], f"{prefix}.matmul")
    return g.op("Add", [g.weight(f"{prefix}.bias"), product], f"{prefix}.out")


def _layer_norm(g: _Graph, x: str, prefix: str, config: BertConfig) -> str:
    return g.op(
        "LayerNormalization",
        [x, g.weight(f"{prefix}.weight"), g.weight(f"{prefix}.bias")],
        f"{prefix}.out",
        axis=-1,
        epsilon=config.layer_norm_eps,
    )


def _gelu(g: _Graph, x: str, prefix: str) -> str:
    """Exact GELU, ``x * (1 + erf(x / sqrt 2)) * 0.5``, in the export's operation order."""
    erf = g.op("Erf", [g.op("Div", [x, g.scalar(float(np.float32(np.sqrt(2.0))))], f"{prefix}.div")], f"{prefix}.erf")
    gated = g.op("Mul", [x, g.op("Add", [erf, g.scalar(1.0)], f"{prefix}.add")], f"{prefix}.mul")
    return g.op("Mul", [gated, g.scalar(0.5)], f"{prefix}.out")
