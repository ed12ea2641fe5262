"""`episodes api` under load: POST /v1/recall from N concurrent HTTP clients on generated episodes
(bench/_data.py; 1M by default), while new episodes keep committing; prints figures, asserts nothing.

    python bench/api_load.py --home /tmp/rb --keep                       # 8, 32, 128 clients; keeps the data
    python bench/api_load.py --home /tmp/rb --keep --clients 32 --rate 100,150,200   # latency at an offered rate
    python bench/api_load.py --home /tmp/rb --keep --clients 32 --rate 100 --restart-db   # a database restart
    python bench/api_load.py --episodes 30000 --users 300 --heavy-users 3 --heavy-size 3000   # small, ~2 min
    python bench/api_load.py --home /tmp/rb47 --keep --episodes 200000 --heavy-users 8 --clients 32 --rate 100
                                                                          # issue 47's goal (heavy users of 10,000)

The data is loaded into ``--home`` unless a run with the same sizes kept it there (bench/recall.py
shares it). Every episode has its lines (``--lines`` on average, each with its vector), two events and
three entities (bench/_data.py), and the writer's new episodes have lines too; the bench prints the
storage per 1,000 episodes of the four tables with their indexes (pg_total_relation_size) after loading. Users are drawn in proportion to their episodes (one recall per session, one episode per
session), so the 20 users with 10,000 episodes each get a fifth of the requests. Each client keeps
one HTTP/1.1 connection and sends its next request when the previous answer arrives (closed loop:
by Little's law its mean latency is clients / throughput, so latency goals are read at an offered
``--rate``). A writer thread commits ``--write-rate`` new episodes per second for random users
throughout. Before the phases every user is recalled ``--prime`` times, so PostgreSQL's cache and the
workers are warm as in a service that has been up a while; each phase then runs
``--warmup`` seconds unmeasured and ``--seconds`` measured.

Where the cost lands: for the measured part of each phase, the CPU time per answered request of
the service's processes, of the PostgreSQL server's and of this load generator, and the most
requests per second the machine's cores would allow at that cost. Each phase ends with a line
setting its figures beside issue 47's goals: 0 errors, p95 <= 150 ms, CPU per recall (service and
PostgreSQL, the load generator left out) <= 12 ms. Those figures are all-in: they hold the writer's
episodes and the server's own work too, spread over the recalls answered (so over fewer of them the slower
the service). Before the phases the writer runs ``--background`` seconds alone; each phase then also prints
its figures with that rate taken out, the recall's own cost.

Beside the HTTP figures, in the same run: the documented in-process ``recall()`` (embedding
included) for a sample of users, against the same users over HTTP one request at a time, so the
cost of HTTP is a ratio (:func:`one_at_a_time` says how both sides are made comparable).

With ``--restart-db`` the embedded PostgreSQL is restarted (pg_ctl restart, fast) in the middle of
the phase: the bench reports how long recalls answered 503, any
other error, and "wrong answers": probe users that nobody writes to are asked the same question
ten times a second in every phase (beside the offered rate, not in its latencies), and every 200
must equal the answer taken before the load.

The load generator runs on the same two cores as the service; its clients speak HTTP/1.1 over raw
asyncio streams, as cheaply as the figures allow (httpx cost ~5 ms of CPU a request).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import _blas  # noqa: F401  numpy's BLAS threads as `episodes` sets them: before numpy loads
import httpx
import numpy as np
import psycopg
from _common import free_port
from _data import (
    TENANTS,
    BenchData,
    add_data_arguments,
    bench_data,
    counts_of,
    percentiles,
    sentence,
    storage,
    storage_lines,
)
from _load_client import NOW, Phase, client_loop, prime
from _load_service import CpuClock, Writer, gc_passes, recall_seconds, rss_mb, worker_pids

from jobs.config import load
from jobs.db import Database
from jobs.recall import close_recallers, recall
from jobs.service.keys import create_key

PROBE_RATE = 10.0  # probe recalls a second in every phase, beside the measured ones


async def run_phase(
    base: tuple[str, int],
    keys: dict[str, str],
    users: np.ndarray,
    clients: int,
    warmup: float,
    seconds: float,
    probe: dict[int, tuple[str, list[int]]],
    restart: Callable[[], None] | None,
    rate: float,
    clock: CpuClock,
) -> Phase:
    phase = Phase()
    warm_until = time.perf_counter() + warmup
    interval = clients / rate if rate else 0.0
    await asyncio.gather(
        *(client_loop(base, keys, users, warm_until, None, i, interval=interval) for i in range(clients))
    )
    before, started = clock.read(), time.perf_counter()
    until = started + seconds
    tasks = [client_loop(base, keys, users, until, phase, 1000 + i, interval=interval) for i in range(clients)]
    # The probe client asks on a schedule of its own (PROBE_RATE a second), in addition to the offered
    # rate; as fast as answers came it sent ~150 probes a second, more than most phases offered.
    tasks.append(client_loop(base, keys, users, until, phase, 7, probe, interval=1 / PROBE_RATE))
    if restart is not None:
        tasks.append(restart_midway(restart, seconds / 3))
    await asyncio.gather(*tasks)
    after = clock.read()
    phase.cpu = {name: after[name] - before[name] for name in before}
    phase.wall = time.perf_counter() - started
    return phase


def background(clock: CpuClock, seconds: float) -> dict[str, float]:
    """CPU seconds a second of the service's processes and PostgreSQL's with no recall asked: the writer's episodes
    (PostgreSQL's side of them: the thread is the load generator's) and the server's own work (autovacuum, the
    checkpointer). Each phase's figures count them too, spread over the recalls it answered."""
    before = clock.read()
    time.sleep(seconds)
    after = clock.read()
    return {name: (after[name] - before[name]) / seconds for name in before}


def without_background(phase: Phase, per_second: dict[str, float], answered: int) -> str:
    """The phase's CPU per answered recall with the background's rate (:func:`background`) taken out."""
    own = {
        name: 1000 * max(0.0, phase.cpu[name] - per_second.get(name, 0.0) * phase.wall) / answered
        for name in ("service", "postgres")
    }
    return (
        f"without the background (its rate x {phase.wall:.1f} s): service {own['service']:.2f} + PostgreSQL "
        f"{own['postgres']:.2f} = {own['service'] + own['postgres']:.2f} ms per answered recall"
    )


def goals(phase: Phase, spent: dict[str, float]) -> str:
    """The phase's figures beside issue 47's goals (0 errors, p95 <= 150 ms, service + PostgreSQL <= 12 ms)."""
    errors = sum(v for k, v in phase.status.items() if k != 200)
    p95 = float(np.percentile(np.array(phase.latencies) * 1000, 95)) if phase.latencies else float("nan")
    cpu = spent.get("service", 0.0) + spent.get("postgres", 0.0)

    def mark(ok: bool) -> str:
        return "met" if ok else "NOT met"

    return (
        f"goals: errors {errors} (0: {mark(errors == 0)}), p95 {p95:.0f} ms (<= 150: {mark(p95 <= 150)}), "
        f"CPU per recall {cpu:.2f} ms, service {spent.get('service', 0.0):.2f} + PostgreSQL "
        f"{spent.get('postgres', 0.0):.2f} (<= 12: {mark(cpu <= 12)})"
    )


async def restart_midway(restart: Callable[[], None], after: float) -> None:
    await asyncio.sleep(after)
    started = time.perf_counter()
    await asyncio.to_thread(restart)
    print(f"  database restarted (pg_ctl restart -m fast) in {time.perf_counter() - started:.2f} s")


def one_at_a_time(
    base: str, port: int, keys: dict[str, str], sample: list[int], db: Database, rng: np.random.Generator
) -> dict[str, list[float]]:
    """Seconds of the in-process ``recall()`` ("local") and of the same recall over HTTP ("remote"), one
    request at a time, for each user of ``sample``, in alternating order so neither always runs first;
    "gap": how long each HTTP answer's body came after its headers (a stall there is Nagle's algorithm
    waiting for a delayed ACK: jobs/service/server.py); "handler": the service's own mean seconds per
    timed request, from its /metrics.

    The client is one kept-alive ``http.client`` connection with TCP_NODELAY, which sends each request
    (headers and body) in one write. Each user is recalled once on each side before the timed round,
    so both the process's copy and the copy held by the worker this connection reaches are warm: the
    load phases primed the service over other connections, which reach either worker."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.connect()
    assert connection.sock is not None
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    now = dt.datetime.fromisoformat(NOW)

    def in_process(u: int, message: str) -> None:
        recall(f"t{u % TENANTS}", f"u{u}", message, now=now, db=db)

    def over_http(u: int, message: str) -> None:
        body = json.dumps({"user_id": f"u{u}", "message": message, "now": NOW}).encode()
        headers = {"Authorization": f"Bearer {keys[f't{u % TENANTS}']}", "Content-Type": "application/json"}
        try:
            connection.request("POST", "/v1/recall", body=body, headers=headers)
            answer = connection.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # uvicorn closes a connection idle for 5 s (a slow in-process recall before it): reopen once
            connection.close()
            connection.connect()
            assert connection.sock is not None
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.request("POST", "/v1/recall", body=body, headers=headers)
            answer = connection.getresponse()
        headers_at = time.perf_counter()
        text = answer.read()
        gaps.append(time.perf_counter() - headers_at)
        if answer.status != 200:
            raise SystemExit(f"POST /v1/recall answered {answer.status}: {text[:500]!r}")

    gaps: list[float] = []
    for u in sample:
        in_process(u, "warm up")
        over_http(u, "warm up")
    gaps.clear()
    before = recall_seconds(base)
    local: list[float] = []
    remote: list[float] = []
    for i, u in enumerate(sample):
        message = sentence(rng, 10)
        for side in ((in_process, local), (over_http, remote))[:: 1 if i % 2 else -1]:
            t = time.perf_counter()
            side[0](u, message)
            side[1].append(time.perf_counter() - t)
    connection.close()
    after = recall_seconds(base)
    handler = (after[1] - before[1]) / max(after[0] - before[0], 1)
    return {"local": local, "remote": remote, "gap": gaps, "handler": [handler]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_arguments(parser)
    parser.add_argument("--clients", default="8,32,128", help="concurrent clients per phase, comma-separated")
    parser.add_argument("--workers", type=int, default=2, help="episodes api --workers")
    parser.add_argument(
        "--rate",
        default="0",
        help="offered recalls/s in total, comma-separated, one phase each "
        "(Poisson arrivals over the clients); 0: closed loop, as fast as "
        "answers come",
    )
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--prime",
        type=int,
        default=1,
        help="before the phases, this many recalls of every user (0: none; the caches then warm during the warm-up)",
    )
    parser.add_argument("--write-rate", type=float, default=20.0, help="new episodes committed per second")
    parser.add_argument(
        "--background",
        type=float,
        default=10.0,
        help="seconds the writer runs alone before the phases, to measure the CPU it and the server take without "
        "recalls (0: not measured)",
    )
    parser.add_argument("--sample", type=int, default=100, help="users in the in-process vs HTTP comparison")
    parser.add_argument(
        "--shared-buffers",
        default=None,
        help="e.g. 4GB: PostgreSQL's shared_buffers (embedded server; restarts it, and the setting stays in --home)",
    )
    parser.add_argument("--restart-db", action="store_true", help="restart the database in the middle of each phase")
    args = parser.parse_args()
    if load().database_url is not None:
        sys.exit(
            "api_load.py runs on the embedded server (it reads its processes' CPU time and can restart it): "
            "unset DATABASE_URL"
        )
    with bench_data(args, args.shared_buffers) as data:
        run(args, data)


def run(args: argparse.Namespace, data: BenchData) -> None:
    server, url, pgdata = data.server, data.url, data.home / "pgdata"

    def restart_db() -> None:  # pg_ctl keeps the socket and port; it runs as the server's system user
        subprocess.run(
            [str(server.bin_path / "pg_ctl"), "-D", str(pgdata), "restart", "-m", "fast", "-w", "-s"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=server.system_user,
        )

    rng = np.random.default_rng(args.seed)
    counts = counts_of(args)
    db = Database(load().with_(database_url=url))
    keys = {f"t{t}": create_key(db, f"t{t}", ("recall",), name="api_load")[1] for t in range(TENANTS)}
    users = np.repeat(np.arange(len(counts)), counts)  # drawing from this is drawing in proportion to episodes
    probe_users = [int(u) for u in rng.choice(np.arange(args.heavy_users, len(counts)), 5, replace=False)]

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "EPISODES_LOG_LEVEL": "WARNING",
        "EPISODES_API_RATE_LIMIT": "off",
    }  # a capacity bench: one key per tenant asks faster than the default 20/s
    # The service's log goes to a file: a pipe nobody reads fills at 64 kB of warnings (503s under load) and
    # then every thread that logs blocks on the handler's lock, the whole service with it.
    service_log = data.home / "api_load_service.log"
    api = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "api", "--port", str(port), "--workers", str(args.workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=service_log.open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    writer = Writer(url, counts, args.write_rate, set(probe_users), args.lines)
    with psycopg.connect(url) as conn:
        print("\n".join(storage_lines(storage(conn), int(counts.sum()))))
        print(f"shared_buffers {conn.execute('SHOW shared_buffers').fetchone()[0]}")
    try:
        for _ in range(600):
            if api.poll() is not None:
                break
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            api.terminate()
        if api.poll() is not None:
            sys.exit("episodes api did not become ready: " + service_log.read_text(errors="replace")[-2000:])
        print(
            f"episodes api --workers {args.workers} on {args.episodes:,} episodes of {args.users:,} users; "
            f"cores: {os.cpu_count()}; writer: {args.write_rate:g} episodes/s"
        )
        probe: dict[int, tuple[str, list[int]]] = {}
        with httpx.Client(base_url=base, timeout=30) as c:
            for u in probe_users:
                body = c.post(
                    "/v1/recall",
                    headers={"Authorization": f"Bearer {keys[f't{u % TENANTS}']}"},
                    json={"user_id": f"u{u}", "message": f"probe question {u}", "now": NOW},
                ).json()
                probe[u] = (body["block"], [e["id"] for e in body["episodes"]])
        if args.prime:
            took = asyncio.run(prime(("127.0.0.1", port), keys, len(counts), args.prime))
            print(f"primed: {args.prime} recall(s) of each of {len(counts):,} users in {took:.0f} s")
        writer.start()
        clock = CpuClock(api.pid, pgdata)
        idle: dict[str, float] = {}
        if args.background > 0:
            idle = background(clock, args.background)
            print(
                f"background, {args.background:g} s with the writer alone and no recall: service "
                f"{1000 * idle['service']:.1f} + PostgreSQL {1000 * idle['postgres']:.1f} ms of CPU a second"
            )
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        plan = [(int(c), float(r)) for c in args.clients.split(",") for r in args.rate.split(",")]
        for clients, rate in plan:
            gc_before = gc_passes(base)
            phase = asyncio.run(
                run_phase(
                    ("127.0.0.1", port),
                    keys,
                    users,
                    clients,
                    args.warmup,
                    args.seconds,
                    probe,
                    restart_db if args.restart_db else None,
                    rate,
                    clock,
                )
            )
            ok = len(phase.latencies)
            errors = {k: v for k, v in phase.status.items() if k != 200}
            offered = f"offered {rate:5.0f}/s" if rate else "closed loop"
            print(
                f"{clients:4d} clients, {offered}: {percentiles(phase.latencies)}  {ok / args.seconds:6.1f} recalls/s  "
                f"errors {errors or 0}  probes {phase.probes:,}, wrong answers {phase.wrong}"
            )
            answered = sum(phase.status.values()) or 1
            if not args.restart_db:  # a restart replaces the server's processes mid-phase
                spent = {name: 1000 * cpu / answered for name, cpu in phase.cpu.items()}
                total = sum(spent.values())
                print("      " + goals(phase, spent))
                if idle:
                    print("      " + without_background(phase, idle, answered))
                print(
                    "      CPU per answered request: "
                    + ", ".join(f"{n} {ms:.2f} ms" for n, ms in spent.items())
                    + f"; total {total:.2f} ms, so {os.cpu_count()} cores allow at most "
                    f"{1000 * (os.cpu_count() or 1) / total:.0f} requests/s at this cost"
                )
                gc_after = gc_passes(base)
                print(
                    "      garbage collector, both workers, warm-up included: "
                    + ", ".join(
                        f"generation {g} {gc_after[g][0] - gc_before.get(g, (0, 0))[0]:,.0f} passes "
                        f"{gc_after[g][1] - gc_before.get(g, (0, 0))[1]:.2f} s"
                        for g in sorted(gc_after)
                    )
                )
            if phase.first_503 is not None and phase.last_503 is not None:
                print(
                    f"      answered 503 for {phase.last_503 - phase.first_503:.2f} s "
                    f"({phase.status.get(503, 0)} responses), then recovered by itself"
                )
        workers = worker_pids(api.pid)
        print("RSS per worker: " + ", ".join(f"{rss_mb(p):.0f} MB" for p in workers))
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        busy = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
        writer.stop.set()
        writer.join()
        print(
            f"load generator CPU: {busy:.1f} s over the phases; writer committed {writer.written:,} episodes "
            f"({writer.failed} failed while the database was down)"
        )

        # The HTTP cost as a ratio: the same users, in-process recall() against one request at a time
        # (the writer stopped, so both sides read the same rows).
        got = one_at_a_time(base, port, keys, [int(u) for u in rng.choice(users, args.sample)], db, rng)
        local, remote = got["local"], got["remote"]
        print(f"in-process recall() (embedding included): {percentiles(local)}")
        print(
            f"the same over HTTP, one at a time:         {percentiles(remote)}  "
            f"(ratio of medians {np.median(remote) / np.median(local):.2f}; mean {np.mean(remote) * 1000:.1f} ms, "
            f"of which {got['handler'][0] * 1000:.1f} ms in the service's handler; the body came "
            f"{np.median(got['gap']) * 1000:.2f} ms after the headers, p50)"
        )
    finally:
        writer.stop.set()
        api.terminate()
        api.wait(30)
        close_recallers()
        db.close()


if __name__ == "__main__":
    main()
