"""Summarize throughput against the fake Anthropic server (separate process) at latency L, concurrency C.

    python bench/summarize_throughput.py [--transcripts 640] [--latency 2.0] [--concurrency 32]

Phase 1 (C=1, L=0): per-episode overhead outside the model call = wall time per episode minus
the model call, which is the HTTP request the SDK makes (timed in the HTTP transport: sending the
request and reading the whole answer). The SDK's own work around it (building the request,
parsing the answer) counts as overhead, as do claim, reads, rendering, validation, grounding,
embedding and the write. A per-stage breakdown follows the other figures.
Phase 2 (C, L): episodes/s and its ratio to the limit C/L. Also the offline extractor's rate.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import anthropic
import httpx2
from _common import ROOT, bench_database, median, peak_rss_mb, percentile, scratch_home
from ingest_rate import generate

from jobs import config, migrate
from jobs.db import Database
from jobs.embeddings import get_embedder
from jobs.extract import make_extractor
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest
from jobs.llm import ToolCaller
from jobs.summarize import run_summarize


class TimedTransport(httpx2.HTTPTransport):
    """The SDK's HTTP transport, timing each request from sending it to reading the whole answer."""

    def __init__(self) -> None:
        super().__init__(limits=anthropic.DEFAULT_CONNECTION_LIMITS)
        self.seconds = 0.0
        self._lock = threading.Lock()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        started = time.perf_counter()
        response = super().handle_request(request)
        response.read()
        with self._lock:
            self.seconds += time.perf_counter() - started
        return response


def timed_extractor(settings: config.Settings) -> tuple[AnthropicExtractor, TimedTransport]:
    transport = TimedTransport()
    client = anthropic.Anthropic(
        api_key=settings.anthropic_api_key,
        base_url=settings.anthropic_base_url,
        max_retries=settings.max_retries,
        timeout=settings.model_timeout_s,
        http_client=anthropic.DefaultHttpxClient(transport=transport),
    )
    return AnthropicExtractor(settings, ToolCaller(settings, client)), transport


def fake_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "fake_anthropic.py"),
            "--port",
            "0",
            "--latency",
            str(latency),
            "--responder",
            "support.episode_responder:responder",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT / "tests",
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    line = proc.stdout.readline().strip()
    return proc, line.split("=", 1)[1]


def phase(settings: config.Settings, n: int, concurrency: int, latency: float, data, extractor_name: str) -> dict:
    with Database(settings) as db:
        with db.admin() as conn:
            conn.execute("TRUNCATE transcripts, episodes, model_calls, job_runs CASCADE")
        ingest(db, [data])
        proc, url = (None, None)
        if extractor_name == "anthropic":
            proc, url = fake_server(latency)
        try:
            run_settings = settings.with_(
                anthropic_api_key="bench", anthropic_base_url=url, max_retries=0, pool_size=max(concurrency + 2, 8)
            )
            with Database(run_settings, url=db.url) as run_db:
                transport = None
                if extractor_name == "anthropic":
                    extractor, transport = timed_extractor(run_settings)
                else:
                    extractor = make_extractor(run_settings, "offline")
                t = time.perf_counter()
                report = run_summarize(run_db, extractor=extractor, concurrency=concurrency)
                wall = time.perf_counter() - t
                extractor.close()
                with run_db.admin() as conn:
                    lat = [r["latency_ms"] for r in conn.execute("SELECT latency_ms FROM model_calls")]
                    episodes = conn.execute(
                        "SELECT count(*) AS n, count(DISTINCT session_id) AS d FROM episodes WHERE status = 'current'"
                    ).fetchone()
        finally:
            if proc:
                proc.terminate()
                proc.wait()
    return {
        "done": report.counts["done"],
        "wall": wall,
        "rate": report.counts["done"] / wall,
        "latency_ms": lat,
        "episodes": episodes["n"],
        "distinct": episodes["d"],
        "http_s": transport.seconds if transport else 0.0,
        "stages": report.stage_seconds,
    }


def breakdown(result: dict) -> str:
    """Milliseconds per episode by stage; extract is split into HTTP, the SDK around it, and the rest."""
    n = result["done"]
    ms = {stage: seconds / n * 1000 for stage, seconds in result["stages"].items()}  # in the order first timed
    http = result["http_s"] / n * 1000
    sdk = sum(result["latency_ms"]) / n  # model_calls.latency_ms: the SDK call, HTTP included
    parts = [
        f"{stage} {ms[stage]:.1f}"
        if stage != "extract"
        else f"extract {ms[stage]:.1f} (HTTP {http:.1f} + SDK around it {sdk - http:.1f} "
        f"+ render/validate {ms[stage] - sdk:.1f})"
        for stage in ms
    ]
    parts += [f"other {result['wall'] / n * 1000 - sum(ms.values()):.1f}"]
    return " · ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transcripts", type=int, default=640)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--overhead-transcripts", type=int, default=200)
    args = parser.parse_args()
    get_embedder("minilm").embed(["warm up"])
    with scratch_home() as home:
        url = bench_database(home / "pgdata")
        settings = config.Settings(database_url=url, home=home)
        with Database(settings) as db, db.connect() as conn:
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
        small, big = home / "small.jsonl", home / "big.jsonl"
        generate(small, args.overhead_transcripts, 12)
        generate(big, args.transcripts, 12)

        one = phase(settings, args.overhead_transcripts, 1, 0.0, small, "anthropic")
        per_episode_ms = one["wall"] / one["done"] * 1000
        http_ms = one["http_s"] / one["done"] * 1000
        sdk_ms = sum(one["latency_ms"]) / one["done"]
        print(
            f"overhead outside the model call (C=1, L=0, {one['done']} episodes): "
            f"{per_episode_ms - http_ms:.1f} ms/episode (wall {per_episode_ms:.1f} ms - model call {http_ms:.1f} ms "
            f"as HTTP request; {per_episode_ms - sdk_ms:.1f} ms if the SDK call as recorded, {sdk_ms:.1f} ms, "
            f"counted as model call)"
        )

        full = phase(settings, args.transcripts, args.concurrency, args.latency, big, "anthropic")
        limit = args.concurrency / args.latency
        lat = full["latency_ms"]
        print(
            f"throughput (C={args.concurrency}, L={args.latency}s, {full['done']} episodes): "
            f"{full['rate']:.2f} episodes/s = {full['rate'] / limit:.1%} of the limit C/L = {limit:.1f}/s; "
            f"model call p50 {median(lat):.0f} ms p95 {percentile(lat, 0.95):.0f} ms"
        )
        print(
            f"exactly once: {full['episodes']} current episodes for {full['distinct']} sessions "
            f"of {args.transcripts} transcripts"
        )

        print(f"stages, ms/episode at C=1: {breakdown(one)}")

        off = phase(settings, args.overhead_transcripts, 2, 0.0, small, "offline")
        print(
            f"offline extractor (C=2): {off['rate']:.1f} episodes/s ({off['wall'] / off['done'] * 1000:.1f} ms/episode)"
        )
    print(f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
