"""A local stand-in for Voyage AI's embeddings API, driven by the real `voyageai` client.

Tests point `voyageai.Client(base_url=fake.base_url)` (jobs.embeddings.voyage.VoyageEmbedder's ``base_url``)
at it instead of mocking the client. It answers ``POST /v1/embeddings`` as Voyage does: one vector per
input, of the model's default dimension or of ``output_dimension`` where the model offers several (a 400
otherwise, with Voyage's ``detail``); a 401 without a bearer key. Each vector is derived from the text and
the ``input_type``, so a query and a document of the same text differ as they do at Voyage. Every request
is recorded. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# model -> (default dimension, the dimensions it offers): what the stand-in serves, as Voyage documents them
MODELS: dict[str, tuple[int, tuple[int, ...]]] = {
    "voyage-3-lite": (512, (512,)),
    "voyage-3": (1024, (1024,)),
    "voyage-code-2": (1536, (1536,)),
    "voyage-3.5": (1024, (256, 512, 1024, 2048)),
    "voyage-3.5-lite": (1024, (256, 512, 1024, 2048)),
}


def vector(text: str, input_type: str | None, dim: int) -> list[float]:
    """A deterministic, not normalised vector for ``text`` embedded as ``input_type``."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        digest = hashlib.sha256(f"{input_type}\x00{text}\x00{counter}".encode()).digest()
        out.extend((b - 127.5) / 10.0 for b in digest)
        counter += 1
    return out[:dim]


@dataclass
class Recorded:
    path: str
    authorization: str
    body: dict[str, Any]


class FakeVoyage:
    """``with FakeVoyage() as fake:`` serves on 127.0.0.1 (a free port) until the block ends."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                authorization = self.headers.get("authorization", "")
                with fake._lock:
                    fake.requests.append(Recorded(self.path, authorization, body))
                status, reply = fake.answer(self.path, authorization, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-voyage", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, path: str, authorization: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path != "/v1/embeddings":
            return 404, {"detail": f"Not Found: {path}"}
        if not authorization.startswith("Bearer ") or len(authorization) <= len("Bearer "):
            return 401, {"detail": "Provided API key is invalid."}
        model = body.get("model")
        if model not in MODELS:
            return 400, {"detail": f"Model {model} is not supported."}
        default, offered = MODELS[model]
        wanted = body.get("output_dimension")
        if wanted is not None and (len(offered) == 1 or wanted not in offered):
            return 400, {"detail": f"output_dimension {wanted} is not supported for model {model}."}
        if body.get("input_type") not in (None, "query", "document"):
            return 400, {"detail": "input_type must be query, document or null."}
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        dim = wanted or default
        return 200, {
            "object": "list",
            "data": [
                {"object": "embedding", "embedding": vector(t, body.get("input_type"), dim), "index": i}
                for i, t in enumerate(texts or [])
            ],
            "model": model,
            "usage": {"total_tokens": sum(len(t.split()) for t in texts or [])},
        }

    def __enter__(self) -> FakeVoyage:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
