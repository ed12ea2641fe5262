"""Run the HTTP service under uvicorn with TCP_NODELAY on every connection, whatever the worker count.

With ``--workers`` > 1 uvicorn binds the listening socket itself (``Config.bind_socket``) and leaves its
protocol number at 0. Accepted sockets inherit it, and asyncio turns TCP_NODELAY on only for a socket
that says ``IPPROTO_TCP``; so Nagle's algorithm stayed on. A response leaves in two writes (headers,
then body): the body waited until the client acknowledged the headers, and Linux clients delay that
acknowledgement by up to 40 ms. On a kept-alive connection a recall took ~40 ms more than the service
spent on it (bench/api_load.py; uvicorn issue #3149). With one worker asyncio binds from the host and
port, the socket says ``IPPROTO_TCP``, and the delay never showed.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

STARTUP_FAILURE = 3  # uvicorn's exit status when the server did not start


class Config(uvicorn.Config):
    """uvicorn's configuration, with a listening socket whose accepted connections get TCP_NODELAY."""

    def bind_socket(self) -> socket.socket:
        sock = super().bind_socket()
        return tcp_socket(sock)


def tcp_socket(sock: socket.socket) -> socket.socket:
    """``sock`` itself if asyncio will set TCP_NODELAY on what it accepts; a TCP socket left at protocol 0
    comes back as the same descriptor saying ``IPPROTO_TCP`` (``sock`` is detached)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto != socket.IPPROTO_TCP:
        return socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    return sock


def run(app: str, **options: Any) -> None:
    """What ``uvicorn.run`` does for an import string without reload, with :class:`Config`."""
    config = Config(app, **options)
    server = uvicorn.Server(config)
    try:
        if config.workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    if config.workers == 1 and not server.started:
        sys.exit(STARTUP_FAILURE)
