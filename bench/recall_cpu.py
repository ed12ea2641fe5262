"""The service's CPU per recall, by part: where `episodes api` spends the CPU of one answered
POST /v1/recall, beside PostgreSQL's; prints figures, asserts nothing.

    python bench/recall_cpu.py                              # 6,000 episodes of 100 typical users, ~2 min
    python bench/recall_cpu.py --profile                    # and cProfile's top functions (CPU time)
    python bench/recall_cpu.py --baseline /tmp/episodes-old # and an older tree's service, side by side

The data is bench/_data.py's (``--episodes`` over ``--users``, no heavy user by default: a typical
user holds ~60 episodes, as in bench/api_load.py's 200,000 of 2,000). Users are drawn in proportion
to their episodes; each request is a new 10-word opening message. CPU is process time (user +
system, every thread) per request, the median of ``--rounds`` rounds; PostgreSQL's is its processes'
CPU over the same rounds (/proc). The machine's other work shows in every figure: compare figures
of one run, taken side by side, not figures of two runs.

1. **In process** (``Recaller.recall``, the path of ``jobs.recall.recall``): the whole call, then its
   parts on the same requests, each timed with the thread's CPU clock around the function: the
   embedding, the database read (psycopg's execute and fetches, ``scoring.fuse``, the rest: transaction,
   pipeline, pool), ``fitting.select``, rendering the block, and serialising the result two ways:
   ``Recall.to_json`` (what the route sends) and what FastAPI's ``response_model`` made of a returned
   dataclass. The two serialisations of every result are compared byte for byte.
2. **The ASGI app in process** (``create_app`` called with ASGI messages: no HTTP client or server in
   the way), through the middleware, the key check, request validation and the thread-pool hand-off:
   (a) each round through the app and straight to ``recall()`` in turn, the difference being the web
   layer with its waits; (b) the web layer alone: the app answering stored results (no database, no
   embedding; the block rendered and serialised each time), this tree's route against the route as it
   was (``route_before``, a copy kept here), in alternate rounds, their answers compared byte for byte.
3. **`episodes api --workers 1` in a subprocess** (uvicorn, HTTP/1.1 on kept-alive connections, one
   request at a time; ``--clients N`` for N at once): its process's CPU per answered request from /proc
   (the client's is not counted). With ``--baseline DIR`` (a source tree, e.g. ``git archive <commit> |
   tar -x -C DIR``, with ``jobs/prompt_templates``, ``jobs/sql_files``, ``jobs/examples`` and
   ``jobs/reports`` linked to its ``prompts``, ``sql``, ``examples`` and ``reports``: the editable install
   maps those names to this tree) a second service runs from DIR; the two are asked the same requests in
   alternate rounds and their answers compared byte for byte.

With ``--profile`` parts 1 and 2 run again under cProfile with a CPU clock (its own overhead inflates
every figure: read the shares); in part 2 the endpoint then runs inline, since cProfile sees one thread.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _blas  # noqa: F401  numpy's BLAS threads as `episodes` sets them: before numpy loads
import _cpu_tools
import numpy as np
from _common import cpu_seconds, free_port, process_tree
from _cpu_tools import Parts, Postgres, ms, patched, profile
from _data import NOW, TENANTS, add_data_arguments, bench_data, counts_of, sentence
from _recall_asgi import asgi_app, body_of

from jobs import logs
from jobs.config import load
from jobs.db import Database
from jobs.recall import Recaller, recaller, result
from jobs.service.keys import create_key


def requests_of(args: argparse.Namespace, n: int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` (tenant, user, opening message), users drawn in proportion to their episodes."""
    rng = np.random.default_rng(seed)
    owners = np.repeat(np.arange(len(counts := counts_of(args))), counts)
    return [
        (f"t{u % TENANTS}", f"u{u}", sentence(rng, 10))
        for u in (int(owners[rng.integers(len(owners))]) for _ in range(n))
    ]


def fastapi_way() -> Callable[[result.Recall], bytes]:
    """What FastAPI did with a ``Recall`` a route returned under ``response_model=Recall``: validate it
    (a copy) with the route's response field, then dump that copy to JSON (fastapi.routing)."""
    from fastapi.routing import APIRoute

    from jobs.service.routes import recall as recall_route

    (route,) = [r for r in recall_route.router.routes if isinstance(r, APIRoute) and r.path == "/v1/recall"]
    field = route.response_field
    assert field is not None

    def serialise(recalled: result.Recall) -> bytes:
        value, errors = field.validate(recalled, {}, loc=("response",))
        if errors:
            raise SystemExit(f"the response model refused a recall: {errors}")
        body: bytes = field.serialize_json(value, by_alias=True)
        return body

    return serialise


def in_process(args: argparse.Namespace, db: Database, pg: Postgres, requests: list[tuple[str, str, str]]) -> float:
    """Part 1; returns the median CPU seconds per whole in-process recall."""
    import psycopg

    rec = Recaller(db)
    rec.embed("warm up")
    old_serialise = fastapi_way()
    whole: list[float] = []
    per_part: dict[str, list[float]] = {}
    pg_share: list[float] = []
    mismatches = 0
    for r in range(args.rounds):
        chunk = requests[r :: args.rounds]
        started, pg0 = time.process_time(), pg.cpu()
        for tenant, user, message in chunk:
            rec.recall(tenant, user, message, now=NOW)
        whole.append((time.process_time() - started) / len(chunk))
        pg_share.append((pg.cpu() - pg0) / len(chunk))
        parts = Parts()
        wrap = parts.wrap
        with (
            patched(recaller.Recaller, "_read", wrap(READ, recaller.Recaller._read)),
            patched(psycopg.Cursor, "execute", wrap(EXECUTE, psycopg.Cursor.execute)),
            patched(psycopg.Cursor, "fetchall", wrap(FETCH, psycopg.Cursor.fetchall)),
            patched(psycopg.Cursor, "fetchone", wrap(FETCH, psycopg.Cursor.fetchone)),
            patched(recaller, "fuse", wrap(FUSE, recaller.fuse)),
            patched(recaller, "select", wrap(FIT, recaller.select)),
        ):
            results = []
            for tenant, user, message in chunk:
                vector = wrap(EMBED, rec.embed)(message)
                results.append(wrap(VECTOR, rec.recall_vector)(tenant, user, message, vector, now=NOW))
        for recalled in results:
            wrap(RENDER, lambda x: x.block)(recalled)
        for recalled in results:
            new = wrap(TO_JSON, lambda x: x.to_json())(recalled)
            old = wrap(OLD_JSON, old_serialise)(recalled)
            mismatches += new != old
        spent = parts.spent
        spent[READ_REST] = spent[READ] - spent.get(EXECUTE, 0) - spent.get(FETCH, 0) - spent.get(FUSE, 0)
        spent[VECTOR_REST] = spent[VECTOR] - spent[READ] - spent[FIT]
        for name, seconds in spent.items():
            per_part.setdefault(name, []).append(seconds / len(chunk))
    n = len(requests)
    print(f"\n1. in process, Recaller.recall(), {n} recalls in {args.rounds} rounds (median of rounds, CPU per recall)")
    print(f"   {'whole recall():':<58}{ms(statistics.median(whole), 1)}")
    for name in LAYOUT:
        if name in per_part:
            print(f"   {name + ':':<58}{ms(statistics.median(per_part[name]), 1)}")
    print(f"   {'PostgreSQL (its processes, meanwhile):':<58}{ms(statistics.median(pg_share), 1)}")
    print(f"   Recall.to_json and the response_model's bytes: {n - mismatches} of {n} identical")
    if args.profile:
        profile(lambda: [rec.recall(t, u, m, now=NOW) for t, u, m in requests], args.top, "in-process recall()")
    return statistics.median(whole)


EMBED = "  embedding (Recaller.embed)"
VECTOR = "  the rest (Recaller.recall_vector)"
READ = "    database read (Recaller._read)"
EXECUTE = "      psycopg Cursor.execute (send, parameters)"
FETCH = "      psycopg Cursor.fetchall/fetchone (rows)"
FUSE = "      scoring.fuse"
READ_REST = "      the rest (transaction, pipeline, pool, dicts)"
FIT = "    fitting.select (renders the block once)"
VECTOR_REST = "    the rest (rows to results, unsummarised, Recall)"
RENDER = "  then: the block (Recall.block, rendered again)"
TO_JSON = "  then: Recall.to_json (the block kept)"
OLD_JSON = "  then: FastAPI response_model (validate + dump)"
LAYOUT = (EMBED, VECTOR, READ, EXECUTE, FETCH, FUSE, READ_REST, FIT, VECTOR_REST, RENDER, TO_JSON, OLD_JSON)


class Service:
    """`episodes api --workers 1` in a subprocess, from this tree or from ``tree``."""

    def __init__(self, url: str, tree: Path | None) -> None:
        self.port = free_port()
        env = {**os.environ, "DATABASE_URL": url, "EPISODES_LOG_LEVEL": "WARNING", "EPISODES_API_RATE_LIMIT": "off"}
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jobs.cli", "api", "--port", str(self.port), "--workers", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=tree or None,
        )
        for _ in range(600):
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                break
            except OSError:
                time.sleep(0.2)
        if self.process.poll() is not None:
            raise SystemExit(
                "episodes api did not start: "
                + (self.process.stderr.read().decode()[-2000:] if self.process.stderr else "")
            )

    def connection(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.connect()
        assert connection.sock is not None
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def post(self, connection: http.client.HTTPConnection, token: str, body: bytes) -> bytes:
        connection.request(
            "POST",
            "/v1/recall",
            body=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        answer = connection.getresponse()
        text = answer.read()
        if answer.status != 200:
            raise SystemExit(f"POST /v1/recall answered {answer.status}: {text[:300]!r}")
        return text

    def cpu(self) -> float:
        return cpu_seconds(process_tree(self.process.pid))

    def system_cpu(self) -> float:
        return cpu_seconds(process_tree(self.process.pid), (12,))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        if self.process.stderr is not None:
            self.process.stderr.close()


def run_round(service: Service, keys: dict[str, str], chunk: list[Any], clients: int) -> list[bytes]:
    """The answers to ``chunk``'s requests, sent over ``clients`` connections at once."""
    answers: list[bytes] = [b""] * len(chunk)

    def client(k: int) -> None:
        connection = service.connection()
        for i in range(k, len(chunk), clients):
            tenant, user, message = chunk[i]
            answers[i] = service.post(connection, keys[tenant], body_of(user, message))
        connection.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def over_http(args: argparse.Namespace, url: str, keys: dict[str, str], pg: Postgres, requests: list[Any]) -> None:
    """Part 3."""
    services: dict[str, Service] = {}
    try:
        services["this tree"] = Service(url, None)
        if args.baseline:  # a baseline that does not start stops this tree's service too (finally)
            services["baseline " + str(args.baseline)] = Service(url, args.baseline)
        for service in services.values():
            run_round(service, keys, requests[:20], 1)  # warm up
        cpu: dict[str, list[float]] = {name: [] for name in services}
        system: dict[str, list[float]] = {name: [] for name in services}
        pg_share: dict[str, list[float]] = {name: [] for name in services}
        differ = 0
        for r in range(args.rounds):
            chunk = requests[r :: args.rounds]
            got = {}
            order = list(services.items())[:: 1 if r % 2 else -1]  # neither always first
            for name, service in order:
                started, sys0, pg0 = service.cpu(), service.system_cpu(), pg.cpu()
                got[name] = run_round(service, keys, chunk, args.clients)
                cpu[name].append((service.cpu() - started) / len(chunk))
                system[name].append((service.system_cpu() - sys0) / len(chunk))
                pg_share[name].append((pg.cpu() - pg0) / len(chunk))
            if len(got) == 2:
                a, b = got.values()
                differ += sum(x != y for x, y in zip(a, b))
        n = len(requests)
        print(
            f"\n3. episodes api --workers 1 over HTTP, {n} requests in {args.rounds} rounds, {args.clients} client(s); "
            "CPU per request, median of rounds"
        )
        for name in services:
            print(
                f"   {name}: service {ms(statistics.median(cpu[name]), 1)} "
                f"(system {ms(statistics.median(system[name]), 1)}), "
                f"PostgreSQL {ms(statistics.median(pg_share[name]), 1)}"
            )
        if len(services) == 2:
            a, b = (statistics.median(v) for v in cpu.values())
            print(f"   ratio this tree / baseline: {a / b:.2f}; answers byte for byte: {n - differ} of {n} identical")
    finally:
        for service in services.values():
            service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_arguments(parser)
    parser.set_defaults(episodes=6000, users=100, heavy_users=0)
    parser.add_argument("--requests", type=int, default=400, help="recalls per path")
    parser.add_argument("--rounds", type=int, default=8, help="rounds the requests are split into (medians)")
    parser.add_argument("--clients", type=int, default=1, help="concurrent connections in part 3")
    parser.add_argument("--profile", action="store_true", help="cProfile's top functions of parts 1 and 2")
    parser.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    parser.add_argument("--profile-dir", type=Path, help="with --profile, also write each profile there (pstats files)")
    parser.add_argument(
        "--baseline", type=Path, help="a source tree of an older commit, served beside this one in part 3"
    )
    parser.add_argument("--skip", default="", help="parts to leave out, comma-separated: 1, 2, 3")
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "jobs" / "sql_files").exists():
        parser.error(
            f"--baseline {args.baseline}: no jobs/sql_files there; export a tree with git archive and link "
            "jobs/prompt_templates, jobs/sql_files, jobs/examples and jobs/reports to ../prompts, ../sql, "
            "../examples and ../reports (see the module's docstring)"
        )
    skip = set(args.skip.split(",")) - {""}
    _cpu_tools.DUMP_TO = args.profile_dir
    warnings.simplefilter("error")  # a serialiser warning (an unexpected value type) is a finding
    logs.setup("text", "WARNING")  # as bench/api_load.py runs the service: the access log filtered out
    with bench_data(args) as data:
        pg = Postgres(data.home / "pgdata" if data.server is not None else None)
        db = Database(load().with_(database_url=data.url))
        keys = {f"t{t}": create_key(db, f"t{t}", ("recall",), name="recall_cpu")[1] for t in range(TENANTS)}
        requests = requests_of(args, args.requests, args.seed)
        gc.collect()  # as jobs.service.app.from_environment does in a worker: what lives now is frozen
        gc.freeze()
        print(
            f"{args.episodes:,} episodes of {args.users:,} users; cores: {os.cpu_count()}; "
            f"load average {os.getloadavg()[0]:.2f} at the start"
        )
        try:
            if "1" not in skip:
                in_process(args, db, pg, requests)
            if "2" not in skip:
                asgi_app(args, db, keys, pg, requests)
            if "3" not in skip:
                over_http(args, data.url, keys, pg, requests)
        finally:
            from jobs.recall import close_recallers

            close_recallers()
            db.close()


if __name__ == "__main__":
    main()
