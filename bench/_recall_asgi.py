"""Part 2 of bench/recall_cpu.py: the ASGI app in process (``create_app`` called with ASGI messages, no HTTP
client or server in the way), through the middleware, the key check, request validation and the thread-pool
hand-off; the route as it was (``route_before``) kept here to compare the web layer alone."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from _cpu_tools import Postgres, ms, patched, show
from _data import NOW

from jobs.db import Database
from jobs.recall import Recaller, result
from jobs.service.keys import ApiKey

NOW_TEXT = NOW.isoformat()
Request = tuple[str, str, str]


def asgi_call(app: Any, token: str, body: bytes) -> Callable[[], Any]:
    """A coroutine function that sends one POST /v1/recall through ``app`` and returns (status, body)."""
    headers = [
        (b"host", b"bench"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]

    async def call() -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/recall",
            "raw_path": b"/v1/recall",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False
        status, chunks = 0, []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # never: the app does not read past the body
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, send)
        return status, b"".join(chunks)

    return call


def body_of(user: str, message: str) -> bytes:
    return json.dumps({"user_id": user, "message": message, "now": NOW_TEXT}).encode()


def route_before() -> Any:
    """``POST /v1/recall`` as it was before this bench (a153791): the route returned the ``Recall`` dataclass
    and FastAPI checked it against ``response_model`` (in a thread-pool hand-off of its own) and dumped it."""
    from fastapi import APIRouter, Depends, Request

    from jobs.recall.result import Recall
    from jobs.service.auth import KeyFirstRoute, scope
    from jobs.service.schemas import RecallRequest

    router = APIRouter(tags=["recall"], route_class=KeyFirstRoute)

    def recall(body: RecallRequest, request: Request, key: ApiKey = Depends(scope("recall"))) -> Recall:
        recaller: Recaller = request.app.state.recaller
        return recaller.recall(
            key.tenant_id,
            body.user_id,
            body.message,
            purpose=body.purpose,
            budget_tokens=body.budget_tokens,
            now=body.now,
        )

    recall.__annotations__ = {"body": RecallRequest, "request": Request, "key": ApiKey, "return": Recall}
    router.post("/v1/recall", response_model=Recall)(recall)
    return router


def app_before(db: Database) -> Any:
    """The app of this tree with :func:`route_before` in place of the recall route."""
    from jobs.service import app as app_module
    from jobs.service.routes import recall as recall_route

    routers = [route_before() if r is recall_route.router else r for r in app_module.ROUTERS]
    with patched(app_module, "ROUTERS", routers):
        return app_module.create_app(db)


class StoredRecaller:
    """Answers each request with a result recalled beforehand (the block rendered anew each time, as a
    fresh result would be): what is left of a request is the web layer's work."""

    def __init__(self, results: dict[tuple[str, str, str], result.Recall], db: Database) -> None:
        self.results = results
        self.db = db  # read by the route only for a repository's group (jobs.claude_code.groups), never here

    def recall(self, tenant_id: str, user_id: str, opening_message: str, **_: Any) -> result.Recall:
        answer = self.results[(tenant_id, user_id, opening_message)]
        answer.__dict__.pop("block", None)
        return answer


class AppBench:
    """Part 2's apps and counters: this tree's app, the app with the route as it was, and the thread-pool
    hand-offs counted while requests go through either."""

    def __init__(self, args: argparse.Namespace, db: Database, keys: dict[str, str], pg: Postgres) -> None:
        from jobs.service.app import create_app

        self.args, self.keys, self.pg = args, keys, pg
        self.app, self.before = create_app(db), app_before(db)
        for each in (self.app, self.before):
            each.state.limiter.default_rate = None  # a CPU bench: one key per tenant asks faster than 20/s
        self.rec: Recaller = self.app.state.recaller
        self.handoffs = 0

    async def through(self, target: Any, chunk: list[Request]) -> list[bytes]:
        """The answers of ``target`` to ``chunk``, counting the thread-pool hand-offs on the way."""
        import fastapi.routing

        handoff = fastapi.routing.run_in_threadpool

        async def counted(run: Callable[..., Any], /, *a: Any, **k: Any) -> Any:
            self.handoffs += 1
            return await handoff(run, *a, **k)

        answers = []
        with patched(fastapi.routing, "run_in_threadpool", counted):
            for tenant, user, message in chunk:
                status, answer = await asgi_call(target, self.keys[tenant], body_of(user, message))()
                if status != 200:
                    raise SystemExit(f"POST /v1/recall answered {status}: {answer[:300]!r}")
                answers.append(answer)
        return answers

    async def app_and_direct(self, requests: list[Request], cpu: dict[str, list[float]]) -> None:
        """(a) each round through the app and straight to ``recall()``, in turn (neither always first)."""
        for r in range(self.args.rounds):
            chunk = requests[r :: self.args.rounds]
            for side in ("app", "direct")[:: 1 if r % 2 else -1]:
                started, pg0 = time.process_time(), self.pg.cpu()
                if side == "app":
                    await self.through(self.app, chunk)
                else:
                    for tenant, user, message in chunk:
                        self.rec.recall(tenant, user, message, now=NOW)
                cpu[side].append((time.process_time() - started) / len(chunk))
                if side == "app":
                    cpu["pg"].append((self.pg.cpu() - pg0) / len(chunk))
        cpu["handoffs"] = [self.handoffs / len(requests)]

    async def web_layer_alone(self, requests: list[Request], cpu: dict[str, list[float]]) -> None:
        """(b) both apps answering stored results, in alternate rounds, their answers compared byte for byte."""
        stored = StoredRecaller({(t, u, m): self.rec.recall(t, u, m, now=NOW) for t, u, m in requests}, self.rec.db)
        differ, counts = 0, {"this tree": 0, "before": 0}
        with patched(self.app.state, "recaller", stored), patched(self.before.state, "recaller", stored):
            for r in range(self.args.rounds):
                chunk = requests[r :: self.args.rounds]
                got = {}
                for name, target in (("this tree", self.app), ("before", self.before))[:: 1 if r % 2 else -1]:
                    self.handoffs = 0
                    started = time.process_time()
                    got[name] = await self.through(target, chunk)
                    cpu[name].append((time.process_time() - started) / len(chunk))
                    counts[name] += self.handoffs
                differ += sum(a != b for a, b in zip(got["this tree"], got["before"]))
        cpu["differ"] = [differ]
        cpu["handoffs this tree"] = [counts["this tree"] / len(requests)]
        cpu["handoffs before"] = [counts["before"] / len(requests)]

    async def profile_inline(self, requests: list[Request]) -> None:
        """cProfile over the app with the endpoint run inline (cProfile sees one thread)."""
        import fastapi.routing

        async def inline(run: Callable[..., Any], /, *a: Any, **k: Any) -> Any:
            return run(*a, **k)

        with patched(fastapi.routing, "run_in_threadpool", inline):
            profiler = cProfile.Profile(time.thread_time)  # CPU, not wall time: waits on PostgreSQL are free
            profiler.enable()
            for tenant, user, message in requests:
                await asgi_call(self.app, self.keys[tenant], body_of(user, message))()
            profiler.disable()
        show(profiler, self.args.top, "the ASGI app in process (endpoint inline)")

    async def run(self, requests: list[Request]) -> dict[str, list[float]]:
        cpu: dict[str, list[float]] = {"app": [], "direct": [], "pg": [], "this tree": [], "before": []}
        async with self.app.router.lifespan_context(self.app), self.before.router.lifespan_context(self.before):
            await self.through(self.app, requests[:20])
            await self.app_and_direct(requests, cpu)
            await self.web_layer_alone(requests, cpu)
            if self.args.profile:
                await self.profile_inline(requests)
        return cpu


def asgi_app(args: argparse.Namespace, db: Database, keys: dict[str, str], pg: Postgres, requests: list[Any]) -> None:
    """Part 2. (a) each round sends its requests through the app and, in turn, straight to ``recall()``
    (the process-wide recaller the app holds), so the web layer's cost is a difference taken side by
    side; (b) the web layer alone: this tree's app and the app with the route as it was
    (:func:`route_before`), both answering stored results (:class:`StoredRecaller`), in alternate rounds."""
    bench = AppBench(args, db, keys, pg)
    gc.collect()  # as jobs.service.app.from_environment does in a worker: what lives now is frozen
    gc.freeze()
    cpu = asyncio.run(bench.run(requests))
    n = len(requests)
    app_cpu, direct_cpu = statistics.median(cpu["app"]), statistics.median(cpu["direct"])
    print(f"\n2. the ASGI app in process (create_app, ASGI messages), {n} requests, CPU per request")
    print(f"   {'whole request through the app:':<58}{ms(app_cpu, 1)}")
    print(f"   {'the same recalls, recall() called directly:':<58}{ms(direct_cpu, 1)}")
    print(f"   {'the web layer (the difference):':<58}{ms(app_cpu - direct_cpu, 1)}")
    print(f"   {'PostgreSQL (its processes, meanwhile):':<58}{ms(statistics.median(cpu['pg']), 1)}")
    print("   the web layer alone (stored results; the block rendered and serialised each time):")
    new, old = statistics.median(cpu["this tree"]), statistics.median(cpu["before"])
    print(f"   {'  this tree:':<58}{ms(new, 1)}  ({cpu['handoffs this tree'][0]:.2f} thread-pool hand-offs)")
    print(f"   {'  the route as before (a153791):':<58}{ms(old, 1)}  ({cpu['handoffs before'][0]:.2f} hand-offs)")
    print(
        f"   {'  ratio this tree / before:':<58}{new / old:6.2f}   "
        f"answers byte for byte: {n - int(cpu['differ'][0])} of {n} identical"
    )
