"""The Message Batches endpoints of tests/support/fake_anthropic.py (create, get, cancel, results, delete, list),
answered by ``batch_responder`` after ``batch_delay`` in a timer thread. Standard library only, like the server."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from support.anthropic_steps import (
    CUSTOM_ID,
    Reply,
    Responder,
    Step,
    _as_step,
    _Batch,
    _error_reply,
    _invalid_params,
    _json,
    _now,
)


class MessageBatches:
    """Mixed into FakeAnthropic, which sets these attributes in its constructor and renders a message."""

    responder: Responder
    base_url: str
    batch_delay: float
    fail_batch_requests: set[str]
    max_batch_requests: int
    _batch_responder: Responder | None
    _batches: dict[str, _Batch]
    _timers: list[threading.Timer]
    _lock: threading.RLock

    def _message(self, step: Step, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError  # FakeAnthropic's

    @property
    def batch_responder(self) -> Responder:
        """Answers batch requests; follows `responder` unless set. Batches never touch `enqueue`'s FIFO."""
        return self._batch_responder or self.responder

    @batch_responder.setter
    def batch_responder(self, value: Responder | None) -> None:
        self._batch_responder = value

    def end_batches(self) -> None:
        """End every batch still in progress now rather than after ``batch_delay``: a test that needs a
        batch in progress until a point of its choosing sets a long ``batch_delay``, then calls this."""
        with self._lock:
            pending = [batch_id for batch_id, batch in self._batches.items() if batch.results is None]
        for batch_id in pending:
            self._finish_batch(batch_id)

    def _create_batch(self, body: Any) -> Reply:
        reqs = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(reqs, list) or not reqs:
            return _error_reply(400, "invalid_request_error", "requests: must be a non-empty list")
        if len(reqs) > self.max_batch_requests:
            return _error_reply(
                400, "invalid_request_error", f"requests: at most {self.max_batch_requests} requests per batch"
            )
        seen: set[str] = set()
        for i, req in enumerate(reqs):
            cid = req.get("custom_id") if isinstance(req, dict) else None
            if not isinstance(cid, str) or not CUSTOM_ID.fullmatch(cid):
                return _error_reply(
                    400, "invalid_request_error", f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
                )
            if cid in seen:
                return _error_reply(400, "invalid_request_error", f"requests.{i}.custom_id: duplicate {cid!r}")
            if not isinstance(req.get("params"), dict):
                return _error_reply(400, "invalid_request_error", f"requests.{i}.params: Field required")
            seen.add(cid)
        created = datetime.now(UTC)
        batch_id = f"msgbatch_{uuid.uuid4().hex[:24]}"
        obj = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(reqs), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "created_at": _now(),
            "expires_at": (created + timedelta(hours=24)).isoformat().replace("+00:00", "Z"),
            "ended_at": None,
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": None,
        }
        timer = threading.Timer(self.batch_delay, self._finish_batch, args=(batch_id,))
        timer.daemon = True
        with self._lock:
            self._batches[batch_id] = _Batch(obj, reqs)
            self._timers.append(timer)
        timer.start()
        return 200, {}, _json(obj)

    def _finish_batch(self, batch_id: str) -> None:
        """Runs in a timer thread: answer every request, then mark the batch ended."""
        with self._lock:
            batch = self._batches[batch_id]
            canceled = batch.obj["processing_status"] == "canceling"
            failing = set(self.fail_batch_requests)
        results = [
            {"custom_id": r["custom_id"], "result": self._batch_result(r, canceled, failing)} for r in batch.requests
        ]
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for r in results:
            counts[r["result"]["type"]] += 1
        with self._lock:
            batch.results = results
            batch.obj.update(
                processing_status="ended",
                request_counts=counts,
                ended_at=_now(),
                results_url=f"{self.base_url}/v1/messages/batches/{batch_id}/results",
            )

    def _batch_result(self, req: dict[str, Any], canceled: bool, failing: set[str]) -> dict[str, Any]:
        def errored(type: str, message: str) -> dict[str, Any]:
            return {"type": "errored", "error": {"type": "error", "error": {"type": type, "message": message}}}

        if canceled:
            return {"type": "canceled"}
        if req["custom_id"] in failing:
            return errored("api_error", "Injected failure (fail_batch_requests)")
        params = req["params"]
        problem = _invalid_params(params)
        if problem:
            return errored("invalid_request_error", problem)
        try:
            step = _as_step(self.batch_responder(params))
            while step.kind == "hang":  # batches are asynchronous anyway: no point sleeping
                step = step.then or _as_step(self.batch_responder(params))
        except Exception as exc:  # keep the timer thread alive and the failure visible
            return errored("api_error", f"batch_responder raised {exc!r}")
        if step.kind == "error":
            return errored(step.error_type, step.message)
        if step.kind == "raw":
            return errored("api_error", "raw response in a batch")
        return {"type": "succeeded", "message": self._message(step, params)}

    def _batch_endpoint(self, method: str, batch_id: str, action: str) -> Reply:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _error_reply(404, "not_found_error", f"Message batch {batch_id} not found")
            if (method, action) == ("GET", ""):
                return 200, {}, _json(batch.obj)
            if (method, action) == ("POST", "/cancel"):
                if batch.obj["processing_status"] == "in_progress":
                    batch.obj.update(processing_status="canceling", cancel_initiated_at=_now())
                return 200, {}, _json(batch.obj)
            if (method, action) == ("GET", "/results"):
                if batch.results is None:
                    return _error_reply(404, "not_found_error", f"Results for {batch_id} are not available yet")
                lines = b"".join(_json(r) + b"\n" for r in batch.results)
                return 200, {"content-type": "application/x-jsonl"}, lines
            if (method, action) == ("DELETE", ""):
                if batch.results is None:
                    return _error_reply(400, "invalid_request_error", "Batch is still processing")
                del self._batches[batch_id]
                return 200, {}, _json({"id": batch_id, "type": "message_batch_deleted"})
        return _error_reply(405, "invalid_request_error", f"{method} not allowed here")

    def _list_batches(self, query: dict[str, list[str]]) -> Reply:
        """Newest first, paginated with after_id / before_id / limit like the real API."""
        with self._lock:
            objs = [b.obj for b in reversed(self._batches.values())]
        ids = [o["id"] for o in objs]
        limit = int(query.get("limit", ["20"])[0])
        if "after_id" in query and query["after_id"][0] in ids:
            start = ids.index(query["after_id"][0]) + 1
            page, has_more = objs[start : start + limit], start + limit < len(objs)
        elif "before_id" in query and query["before_id"][0] in ids:
            end = ids.index(query["before_id"][0])
            page, has_more = objs[max(end - limit, 0) : end], end - limit > 0
        else:
            page, has_more = objs[:limit], limit < len(objs)
        return (
            200,
            {},
            _json(
                {
                    "data": page,
                    "has_more": has_more,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                }
            ),
        )
