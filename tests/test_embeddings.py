"""The local embedder against the pipeline it replaced, and the batching wrapper.

The runtime builds MiniLM's ONNX graph from the weights without torch. The pipeline it replaced
(sentence-transformers for the float vectors; the transformer exported with torch.onnx.export and
quantised with quantize_dynamic for the int8 ones) needs torch, so it ran once, in
scripts/record_reference_vectors.py, which wrote tests/data/reference_vectors.json: a fixed list of
texts (the example transcripts' messages, runs of them past the 256-token cut, edge cases) with
both vectors and the digests of the quantised weight matrices. The tests hold the runtime to that
file; running the suite needs no torch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import numpy_helper

from jobs.embeddings import BatchingEmbedder, MiniLMEmbedder, get_embedder
from jobs.embeddings.model_cache import default_cache_dir, encoder_path
from jobs.embeddings.model_fetch import HUB_REPO, REVISION, model_folder
from jobs.embeddings.onnx_graph import BertConfig
from jobs.errors import ConfigError
from jobs.models import episode_text

REFERENCE = Path(__file__).resolve().parent / "data" / "reference_vectors.json"
RERECORD = "if the change is meant, re-record with scripts/record_reference_vectors.py (docs/development.md)"
HEAVY = ("torch", "transformers", "sentence_transformers")
# ONNX Runtime picks its int8 matrix kernels by instruction set (AVX2, AVX-VNNI, AVX-512 VNNI, ...), and they
# round the u8 x s8 products differently: the same quantised model on the same texts gives identical vectors
# for most texts and a few that differ slightly (seen: AVX2, min cosine >= 0.999; AVX-512 VNNI, min 0.99875,
# median 1.0). A wrong model, revision or quantisation moves every vector: the reference's own int8 vectors
# against its float vectors have min 0.974 and median 0.991 (test_the_int8_tolerance_is_tighter_than_quantisation).
INT8_KERNEL_MIN_COSINE = 0.995
INT8_KERNEL_MEDIAN_COSINE = 0.9999


@dataclass(frozen=True)
class Reference:
    """tests/data/reference_vectors.json, decoded."""

    texts: list[str]
    fp32: npt.NDArray[np.float32]
    int8: npt.NDArray[np.float32]
    digests: dict[str, list[str]]
    model: str
    revision: str


def unpacked(rows: list[str]) -> npt.NDArray[np.float32]:
    return np.stack([np.frombuffer(base64.b64decode(row), dtype="<f4") for row in rows]).astype(np.float32)


@pytest.fixture(scope="module")
def reference() -> Reference:
    record = json.loads(REFERENCE.read_text(encoding="utf-8"))
    entries = record["texts"]
    return Reference(
        texts=[entry["text"] for entry in entries],
        fp32=unpacked([entry["fp32"] for entry in entries]),
        int8=unpacked([entry["int8"] for entry in entries]),
        digests=record["quantised_weights"],
        model=record["model"],
        revision=record["revision"],
    )


def cosines(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.asarray((a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))


@pytest.fixture(scope="module")
def verified() -> Path:
    """The machine's verified copy of the model files (fetched once per machine, at the first use)."""
    return model_folder(default_cache_dir(), weights=True)


@pytest.fixture(scope="module", params=["machine-cache", pytest.param("from-scratch", marks=pytest.mark.slow)])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, verified: Path
) -> dict[str, MiniLMEmbedder]:
    """The runtime's embedders: those of the machine's cache folder (built there at their first use on
    the machine), and (slow) each built from scratch in an empty cache folder."""

    def cache(precision: str) -> Path:
        return (
            default_cache_dir() if request.param == "machine-cache" else tmp_path_factory.mktemp(f"cache-{precision}")
        )

    return {
        precision: MiniLMEmbedder(precision, cache_dir=cache(precision), model_dir=verified)
        for precision in ("int8", "fp32")
    }


def test_the_reference_is_of_the_pinned_model_and_covers_the_edge_cases(reference: Reference) -> None:
    """Vectors recorded from another revision would hold the runtime to the wrong model; the texts
    reach past the 256-token cut and include the empty, blank and non-Latin cases."""
    assert (reference.model, reference.revision) == (HUB_REPO, REVISION), RERECORD
    assert reference.fp32.shape == reference.int8.shape == (len(reference.texts), 384)
    assert {"", "   \t\n  "} <= set(reference.texts)
    assert any(len(text) > 3000 for text in reference.texts) and any(ord(c) > 0x3000 for c in "".join(reference.texts))
    assert np.allclose(np.linalg.norm(reference.fp32, axis=1), 1.0, atol=1e-4)


def test_int8_vectors_equal_those_of_the_torch_export_quantised(
    reference: Reference, built: dict[str, MiniLMEmbedder]
) -> None:
    """The graph built without torch, quantised, gives the int8 vectors the torch export gave."""
    ours = built["int8"].embed(reference.texts)
    assert ours.shape == reference.int8.shape
    close = cosines(ours, reference.int8)
    assert close.min() >= INT8_KERNEL_MIN_COSINE and np.median(close) >= INT8_KERNEL_MEDIAN_COSINE, RERECORD


def test_the_int8_tolerance_is_tighter_than_quantisation(reference: Reference) -> None:
    """The int8 tolerance admits another CPU's kernels, not another model: the reference's own int8
    vectors against its float vectors (the quantisation error alone) fall outside it."""
    quantisation = cosines(reference.int8, reference.fp32)
    assert quantisation.min() < INT8_KERNEL_MIN_COSINE and np.median(quantisation) < INT8_KERNEL_MEDIAN_COSINE


def test_fp32_vectors_equal_the_sentence_transformers_model(
    reference: Reference, built: dict[str, MiniLMEmbedder]
) -> None:
    """The float graph run by ONNX Runtime gives the vectors SentenceTransformer.encode gave."""
    ours = built["fp32"].embed(reference.texts)
    assert ours.shape == reference.fp32.shape
    assert cosines(ours, reference.fp32).min() >= 0.999, RERECORD
    assert np.abs(ours - reference.fp32).max() < 1e-5, RERECORD


def test_the_graph_quantises_the_same_weight_matrices_as_the_torch_export(
    reference: Reference, built: dict[str, MiniLMEmbedder]
) -> None:
    """Linear layers are MatMul with a constant Wᵀ, so the quantiser finds the torch export's 36
    matrices and gives them the same int8 values and per-channel scales (compared by digest)."""
    built["int8"].embed(["build the int8 file"])
    tensors = onnx.load(encoder_path(built["int8"].cache_dir, "int8")).graph.initializer
    ours = {
        suffix: sorted(
            hashlib.sha256(numpy_helper.to_array(t).tobytes()).hexdigest() for t in tensors if t.name.endswith(suffix)
        )
        for suffix in ("_quantized", "_scale")
    }
    assert len(ours["_quantized"]) == len(ours["_scale"]) == 36
    assert ours == reference.digests, RERECORD


def test_int8_vectors_stay_close_to_the_float_model_and_rank_the_same() -> None:
    """The default (int8 weights) keeps each vector within cosine 0.98 of the float model's, and a
    query still finds the document on its topic first."""
    docs = [
        "Maria chose the Team plan for 40 seats after comparing prices with the sales agent.",
        "The user booked a hotel in Lisbon for the conference and asked about late check-out.",
        "Tom's daughter started swimming lessons; he worries about her fear of deep water.",
        "The migration of the orders database to PostgreSQL 18 is planned for the weekend.",
        "She painted a sunrise over the lake and will show it at the local art fair.",
        "The agent explained how to reset two-factor authentication after losing a phone.",
    ]
    queries = [
        "Which subscription plan did they pick?",
        "Where is the user staying for the conference?",
        "What is the kid afraid of?",
        "When does the database move happen?",
        "What did she paint?",
        "How do I get back into my account without my phone?",
    ]
    exact, quantised = get_embedder("minilm-fp32"), get_embedder("minilm")
    d32, q32 = exact.embed(docs), exact.embed(queries)
    d8, q8 = quantised.embed(docs), quantised.embed(queries)
    both = np.concatenate([cosines(d8, d32), cosines(q8, q32)])
    assert both.min() > 0.98 and np.median(both) > 0.99
    assert np.allclose(np.linalg.norm(d8, axis=1), 1.0, atol=1e-4)
    assert list((q32 @ d32.T).argmax(axis=1)) == list(range(6))  # the topics are told apart ...
    assert list((q8 @ d8.T).argmax(axis=1)) == list(range(6))  # ... and still are with int8


def test_int8_vector_of_a_text_does_not_depend_on_its_batch() -> None:
    """Activations are quantised with one scale per forward pass, so int8 runs one text per pass:
    a text embedded alone and embedded among longer texts gets the same vector."""
    model = get_embedder("minilm")
    alone = model.embed(["Maria decided on the Team plan."])[0]
    among = model.embed(
        [
            "A much longer text about the quarterly budget, the travel plan and the hiring.",
            "Maria decided on the Team plan.",
            "Über-große Rechnung für Café René: 1.234,56 €",
        ]
    )[1]
    assert np.array_equal(alone, among)


def test_batching_embedder_returns_each_caller_its_own_vectors() -> None:
    inner = get_embedder("minilm")
    texts = [f"Maria decided on plan number {n} for the warehouse." for n in range(24)]
    direct = inner.embed(texts)
    batching = BatchingEmbedder(inner, max_batch=8, max_wait=0.02)
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda t: batching.embed([t])[0], texts))
    assert direct.shape == (24, 384)
    assert np.allclose(np.stack(results), direct, atol=1e-5)
    assert np.allclose(np.linalg.norm(direct, axis=1), 1.0, atol=1e-4)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, verified: Path) -> list[subprocess.CompletedProcess[str]]:
    """Two new processes that each import the package and embed one text, the first with an empty
    cache folder (it builds and quantises the model), the second with the files the first wrote."""
    cache = tmp_path_factory.mktemp("first-run-cache")
    code = (
        "import json, sys; from pathlib import Path; from jobs.embeddings import get_embedder; "
        "v = get_embedder('minilm', cache_dir=Path(sys.argv[1]), model_dir=Path(sys.argv[2])).embed(['hello']); "
        f"print(json.dumps([list(v.shape), sorted(m for m in {HEAVY!r} if m in sys.modules)]))"
    )
    return [
        subprocess.run(
            [sys.executable, "-c", code, str(cache), str(verified)], check=True, capture_output=True, text=True
        )
        for _ in range(2)
    ]


@pytest.mark.slow  # two processes, the first builds the model from scratch
def test_a_process_embeds_without_importing_torch_even_to_build_the_model(
    two_runs: list[subprocess.CompletedProcess[str]],
) -> None:
    """Neither building the model nor loading it imports torch, transformers or sentence-transformers."""
    assert [json.loads(run.stdout) for run in two_runs] == [[[1, 384], []], [[1, 384], []]]


@pytest.mark.slow  # two processes, the first builds the model from scratch
def test_the_first_run_prints_nothing(two_runs: list[subprocess.CompletedProcess[str]]) -> None:
    """Building and quantising the model writes nothing to stderr (the quantiser's advice is
    silenced) and nothing but the script's own line to stdout."""
    assert [run.stderr for run in two_runs] == ["", ""]
    assert [len(run.stdout.splitlines()) for run in two_runs] == [1, 1]


class Collected(logging.Handler):
    """Keeps every record it is handed, as a log file would."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.slow  # builds the model from scratch
def test_building_the_model_logs_nothing_where_the_cli_has_set_up_logging(tmp_path: Path, verified: Path) -> None:
    """The CLI logs INFO and up through the root logger. The quantiser's records there (36 lines of
    progress and advice before) are dropped, the application's own still pass, and the root
    logger keeps the handlers it had."""
    root, collected = logging.getLogger(), Collected()
    handlers, level = root.handlers[:], root.level
    root.handlers[:] = [collected]
    root.setLevel(logging.DEBUG)
    try:
        MiniLMEmbedder(cache_dir=tmp_path, model_dir=verified).embed(["hello"])
        logging.getLogger("episodes.test").info("the application's own record")
        handlers_after = root.handlers[:]
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert [record.getMessage() for record in collected.records] == ["the application's own record"]
    assert handlers_after == [collected]


def test_an_unwritable_cache_folder_is_a_config_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    embedder = MiniLMEmbedder(cache_dir=tmp_path / "file" / "cache")
    with pytest.raises(ConfigError, match=f"could not be loaded.*{tmp_path / 'file' / 'cache'}"):
        embedder.embed(["anything"])


def test_get_embedder_keeps_one_instance_per_arguments(tmp_path: Path) -> None:
    assert get_embedder("minilm") is get_embedder("minilm", threads=1)
    assert get_embedder("minilm", cache_dir=tmp_path) is not get_embedder("minilm")
    two_threads = get_embedder("minilm", threads=2)
    assert isinstance(two_threads, MiniLMEmbedder) and two_threads.threads == 2
    with pytest.raises(ConfigError, match="unknown"):
        get_embedder("word2vec")


def test_the_graph_builder_refuses_a_model_it_does_not_reproduce(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"model_type": "bert", "hidden_act": "relu", "hidden_size": 384, "num_attention_heads": 12})
    )
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig.from_file(config)


def test_episode_text_lists_summary_tags_events_and_entities() -> None:
    text = episode_text("Maria chose Team.", ["pricing"], ["Maria decided on Team."], ["Maria", "Acme"])
    assert text.splitlines() == [
        "Maria chose Team.",
        "Topics: pricing.",
        "Maria decided on Team.",
        "Mentions: Maria, Acme.",
    ]
