"""Run the HTTP service under uvicorn with TCP_NODELAY on every connection, whatever the worker count.

The listening socket is ours (:func:`listen`), made with ``IPPROTO_TCP``: asyncio turns TCP_NODELAY on
only for accepted sockets that say so, and uvicorn's own ``Config.bind_socket`` (used with ``--workers``
> 1) leaves the protocol number at 0, so Nagle's algorithm stayed on. A response leaves in two writes
(headers, then body): the body waited until the client acknowledged the headers, and Linux clients
delay that acknowledgement by up to 40 ms. On a kept-alive connection a recall took ~40 ms more than the
service spent on it (bench/api_load.py; uvicorn issue #3149).

It is bound before anything says "listening": a port already in use
is one line and exit status 1 (``port N is in use; choose another with --port``), not a banner and then
uvicorn's traceback. And "listening" is said only once a worker takes connections (:func:`run`'s ``ready``,
called when uvicorn's startup is complete: the app built, its lifespan run, the socket listening); said
before, a client that believed it was refused for the 1-5 s the app takes to start.

Slow and idle clients are cut off (:class:`TimedH11Protocol`): the headers of each request must arrive
within ``Settings.api_header_timeout_seconds`` of the connection opening (or of the previous answer),
however slowly they trickle in, and a kept-alive connection with no request is closed after
``Settings.api_keep_alive_seconds``. uvicorn alone closes an idle kept-alive connection only if not one
byte arrives, and never a new connection that sends nothing, so one client could hold a worker's
connections open with a byte every few seconds. Header size is bounded by h11 (16 KiB).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
from collections.abc import Callable
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import Multiprocess

from jobs.config import Settings
from jobs.errors import EpisodesError

STARTUP_FAILURE = 3  # uvicorn's exit status when the server did not start


class PortInUse(EpisodesError):
    """The port is taken by another process."""


class Config(uvicorn.Config):
    """uvicorn's configuration with the header timeout of :class:`TimedH11Protocol`."""

    def __init__(self, app: Any, *, header_timeout: float = 10.0, **options: Any) -> None:
        super().__init__(app, **options)
        self.header_timeout = header_timeout


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (see the module's docstring)."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.header_timeout = float(getattr(config, "header_timeout", 10.0))
        self._header_deadline: asyncio.TimerHandle | None = None
        self._await_headers()  # made as the connection is accepted, just before connection_made

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are in: its body and answer may take long
            self._headers_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._await_headers()  # the next request on this connection has the same time for its headers

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_arrived()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        self._headers_arrived()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _headers_arrived(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        transport: asyncio.Transport | None = self.transport
        if transport is not None and not transport.is_closing() and self.conn.their_state is h11.IDLE:
            transport.close()


def options(settings: Settings) -> dict[str, Any]:
    """The timeouts of `episodes api`, as :class:`Config` options."""
    return {
        "http": TimedH11Protocol,
        "header_timeout": settings.api_header_timeout_seconds,
        "timeout_keep_alive": settings.api_keep_alive_seconds,
    }


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (not yet listening: uvicorn does that), or :class:`PortInUse`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait out TIME_WAIT
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} is in use; choose another with --port") from None
        raise EpisodesError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --host or --port"
        ) from None
    sock.set_inheritable(True)  # the worker processes serve it too
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server calling ``ready`` once its startup is complete (it takes connections)."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._ready()


class _Workers(Multiprocess):
    """uvicorn's worker supervisor calling ``ready`` once, when the first worker's startup is complete (from
    its loop, between the checks it makes of its workers: the pipe to a worker is used by one thread only)."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], ready: Callable[[], None]) -> None:
        super().__init__(config, sockets=sockets)
        self._ready: Callable[[], None] | None = ready

    def keep_subprocess_alive(self) -> None:
        super().keep_subprocess_alive()
        if self._ready is not None and not self.should_exit.is_set():
            if any(process.is_ready(timeout=1) for process in self.processes):
                ready, self._ready = self._ready, None
                ready()


def run(app: str, sock: socket.socket, *, ready: Callable[[], None] = lambda: None, **options: Any) -> None:
    """What ``uvicorn.run`` does for an import string without reload, with :class:`Config`, on ``sock``
    (from :func:`listen`); ``ready()`` is called once the service takes connections."""
    config = Config(app, **options)
    server = _Server(config, ready)
    try:
        if config.workers > 1:
            _Workers(config, [sock], ready).run()
        else:
            server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    if config.workers == 1 and not server.started:
        sys.exit(STARTUP_FAILURE)
