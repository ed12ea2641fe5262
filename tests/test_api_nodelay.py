"""`episodes api` binds a listening socket whose accepted connections get TCP_NODELAY, for one worker or many.

uvicorn's own ``Config.bind_socket`` leaves the protocol number at 0, so asyncio never set TCP_NODELAY on
what the workers accepted, and each kept-alive response's body waited for the client's delayed ACK of
its headers (~40 ms on Linux; jobs/service/server.py). The service binds its socket itself (``listen``).
"""

from __future__ import annotations

import asyncio
import socket

from jobs.service.server import listen


def accepted_nodelay(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection that an asyncio server on ``listener`` (as a uvicorn worker runs it) accepts."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        seen: asyncio.Future[int] = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Probe, sock=listener)
        _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
        try:
            return await asyncio.wait_for(seen, 30)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass  # the probe closed its side first
            server.close()
            await server.wait_closed()

    return asyncio.run(main())


def test_the_socket_episodes_api_binds_first_gives_tcp_nodelay() -> None:
    """`episodes api` binds its port before anything else (jobs.service.server.listen), for one worker or many."""
    listener = listen("127.0.0.1", 0)
    try:
        assert listener.family == socket.AF_INET and listener.proto == socket.IPPROTO_TCP
        assert accepted_nodelay(listener) != 0
    finally:
        listener.close()
