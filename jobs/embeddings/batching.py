"""One embedding thread that serves many worker threads."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from jobs.embeddings.protocol import Embedder, Vectors

_Request = tuple[list[str], "Future[Vectors]"]


class BatchingEmbedder:
    """Funnels concurrent calls from many worker threads through one embedding thread.

    Summarize workers each embed one episode; with 32 workers, 32 forward passes at once would
    contend for a few cores and each take many times longer. One background thread takes whatever
    is waiting (up to ``max_batch``, after at most ``max_wait`` seconds) and embeds it with one
    ``embed`` call: one pass for the float model, one pass per text for int8 (see MiniLMEmbedder).
    """

    def __init__(self, inner: Embedder, max_batch: int = 32, max_wait: float = 0.005) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_batch = max_batch
        self.max_wait = max_wait
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="embed-batcher", daemon=True)
        self._thread.start()

    def embed(self, texts: Sequence[str]) -> Vectors:
        future: Future[Vectors] = Future()
        self._queue.put((list(texts), future))
        return future.result()

    def _run(self) -> None:
        while True:
            batch = self._gather()
            texts = [text for item, _ in batch for text in item]
            try:
                vectors = self.inner.embed(texts)
            except Exception as exc:
                for _, future in batch:
                    future.set_exception(exc)
                continue
            start = 0
            for item, future in batch:
                future.set_result(vectors[start : start + len(item)])
                start += len(item)

    def _gather(self) -> list[_Request]:
        """The first waiting request, and whatever else arrives within ``max_wait`` (up to ``max_batch``)."""
        batch = [self._queue.get()]
        deadline = time.monotonic() + self.max_wait
        while len(batch) < self.max_batch:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                batch.append(self._queue.get(timeout=remaining))
            except queue.Empty:
                break
        return batch
