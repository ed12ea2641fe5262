"""The load generator of bench/api_load.py: its raw keep-alive HTTP/1.1 connection, one client's loop and the
priming pass, and what a phase records."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
from _data import TENANTS, sentence

NOW = "2026-01-02T00:00:00+00:00"


class Phase:
    """One load phase: latencies of 200s, status counts, 503 window, probe mismatches."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.status: dict[int | str, int] = {}
        self.first_503: float | None = None
        self.last_503: float | None = None
        self.wrong = self.probes = 0
        self.cpu: dict[str, float] = {}  # CPU seconds of the measured part, by who spent them
        self.wall = 0.0  # seconds the measured part took (the last answers come after its end)


class ClosedBeforeAnswering(ConnectionError):
    """The server closed the connection before any byte of the answer (e.g. a kept-alive one left idle)."""


class Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough HTTP for this bench.

    The load generator shares the two cores with the service; httpx cost ~5 ms of CPU per request
    here (0.54 of a core at 110 recalls/s), which the service's figures then paid for. A request
    here is one prebuilt byte string and the answer one header read and one body read."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, token: str, body: bytes) -> tuple[int, bytes]:
        """The answer's status and body. A kept-alive connection the server has closed meanwhile (uvicorn
        closes one idle for 5 s) is reopened and the request sent again once, as HTTP clients do."""
        reused = self.writer is not None
        try:
            return await self._post(path, token, body)
        except ClosedBeforeAnswering:
            if not reused:
                raise
        return await self._post(path, token, body)

    async def _post(self, path: str, token: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        try:
            self.writer.write(head + body)
            header = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            self.close()
            raise (ConnectionError("connection lost") if exc.partial else ClosedBeforeAnswering()) from None
        except OSError:
            self.close()
            raise ClosedBeforeAnswering() from None
        try:
            lines = header.split(b"\r\n")
            status = int(lines[0].split(b" ", 2)[1])
            length = next(
                int(line.split(b":", 1)[1]) for line in lines[1:] if line.lower().startswith(b"content-length:")
            )
            return status, await self.reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, StopIteration, ValueError):
            self.close()
            raise ConnectionError("connection lost") from None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def client_loop(
    base: tuple[str, int],
    keys: dict[str, str],
    users: np.ndarray,
    until: float,
    phase: Phase | None,
    seed: int,
    probe: dict[int, tuple[str, list[int]]] | None = None,
    interval: float = 0.0,
) -> None:
    """One client on its own connection. With ``interval`` > 0 it sends on a schedule (Poisson
    arrivals, mean ``interval``) and a latency counts from the scheduled moment, so time spent queued
    behind a slow answer counts too (no coordinated omission); with 0 it sends the next request when
    the previous answer arrives."""
    rng = np.random.default_rng(seed)
    probe_users = list(probe) if probe else []
    connection = Connection(*base)
    scheduled = time.perf_counter() + (rng.exponential(interval) if interval else 0.0)
    while time.perf_counter() < until:
        if interval:
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        u = probe_users[int(rng.integers(len(probe_users)))] if probe_users else int(users[rng.integers(len(users))])
        tenant = f"t{u % TENANTS}"
        message = f"probe question {u}" if probe_users else sentence(rng, 10)
        started = scheduled if interval else time.perf_counter()
        scheduled += rng.exponential(interval) if interval else 0.0
        body = b""
        try:
            status, body = await connection.post(
                "/v1/recall", keys[tenant], json.dumps({"user_id": f"u{u}", "message": message, "now": NOW}).encode()
            )
            key: int | str = status
        except ConnectionError:
            key = "connection lost"
            await asyncio.sleep(0.05)
        took = time.perf_counter() - started
        if phase is None:
            continue
        phase.status[key] = phase.status.get(key, 0) + 1
        if key == 503:
            phase.first_503 = phase.first_503 or started
            phase.last_503 = time.perf_counter()
            await asyncio.sleep(0.05)  # a client honouring Retry-After would wait longer; keep probing the outage
        elif key == 200:
            if probe_users and probe is not None:
                phase.probes += 1
                answer = json.loads(body)
                if (answer["block"], [e["id"] for e in answer["episodes"]]) != probe[u]:
                    phase.wrong += 1
            else:
                phase.latencies.append(took)
    connection.close()


async def prime(base: tuple[str, int], keys: dict[str, str], users: int, passes: int, clients: int = 32) -> float:
    """``passes`` recalls of every user, in a random order over ``clients`` connections: the caches are then
    warm, as in a service that has been up a while. Returns seconds."""
    order = np.concatenate([np.random.default_rng(p).permutation(users) for p in range(passes)]).tolist()
    started = time.perf_counter()

    async def one_client() -> None:
        connection = Connection(*base)
        while order:
            u = order.pop()
            await connection.post(
                "/v1/recall",
                keys[f"t{u % TENANTS}"],
                json.dumps({"user_id": f"u{u}", "message": "prime", "now": NOW}).encode(),
            )
        connection.close()

    await asyncio.gather(*(one_client() for _ in range(clients)))
    return time.perf_counter() - started
