"""all-MiniLM-L6-v2's files: which bytes they must be, what they say, and the model's tokenizer.

The files are all-MiniLM-L6-v2's own, in the sentence-transformers layout, known here by their
SHA-256 (those of sentence-transformers/all-MiniLM-L6-v2 at the revision pinned in model_fetch.py).
What makes a copy trustworthy is not where it came from but these digests: every file is checked
before use (the small ones at every load, the 90 MB weights before the encoder is built from them)
and a mismatch is never used. Where the files come from: :mod:`jobs.embeddings.model_fetch`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

WEIGHTS = "model.safetensors"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # the encoder graph's inputs, as the tokenizer names them
DIGESTS = {
    WEIGHTS: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    # Not read by the runtime; they make the folder a whole sentence-transformers model (the tests' reference).
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}


def sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def mismatched(folder: Path, names: Iterable[str]) -> list[str]:
    """The files among ``names`` that are missing from ``folder`` or are not the model's exact bytes."""
    return [name for name in names if not (folder / name).is_file() or sha256(folder / name) != DIGESTS[name]]


def checked_layout(folder: Path) -> int:
    """Check the packaged model is what MiniLMEmbedder reproduces — a transformer, mean pooling,
    then Normalize — and return its max_seq_length."""
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text()) if len(modules) > 1 else {}
    modes = sorted(k for k, on in pooling.items() if k.startswith("pooling_mode_") and on)
    if kinds[:1] != ["Transformer"] or modes != ["pooling_mode_mean_tokens"] or "Normalize" not in kinds:
        raise ConfigError(
            f"unexpected all-MiniLM-L6-v2 layout {kinds} (pooling {modes}) in {folder}; "
            "point EPISODES_MODEL_DIR at the files of sentence-transformers/all-MiniLM-L6-v2."
        )
    return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])


def load_tokenizer(folder: Path, max_length: int) -> Tokenizer:
    """The model's own fast tokenizer, set up as sentence-transformers calls it: truncation at
    max_seq_length, padding to the longest text of a batch (the file's fixed 128 is replaced)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length)
    pad = tokenizer.padding or {}
    tokenizer.enable_padding(pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]"))
    return tokenizer
