"""A request body has a time limit (issue 46, finding 12): a client with a valid key that sends its body a
byte at a time is answered 408 and cut off once Settings.api_body_timeout_seconds has passed since the body
was first read, however steadily the bytes keep coming. uvicorn's own timeouts cover keep-alive only, and
the header deadline (jobs.service.server) ends when the headers are in, so before this such a client held a
request open for as long as it liked."""

from __future__ import annotations

import select
import socket

from support.api_server import serve
from support.waiting import wait_until

from jobs.config import Settings
from jobs.db import Database
from jobs.service.keys import create_key


def test_a_body_trickled_a_byte_at_a_time_is_answered_408_and_closed(settings: Settings) -> None:
    with Database(settings.with_(api_body_timeout_seconds=2.0)) as db, serve(db) as url:
        secret = create_key(db, "acme", ("ingest",))[1]
        port = int(url.rsplit(":", 1)[1])
        body = b'{"tenant_id": "acme", "user_id": "u", "session_id": "s", "messages": []}' * 20
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                b"POST /v1/transcripts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + secret.encode() + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
            )
            answer = bytearray()
            sent = 0
            closed = False

            def answered_and_closed() -> bool:
                """Send one more byte of the body (while the server takes them), read what it answered."""
                nonlocal sent, closed
                if sent < len(body) and not answer:
                    try:
                        sock.sendall(body[sent : sent + 1])
                        sent += 1
                    except OSError:
                        pass  # the server closed its side
                while select.select([sock], [], [], 0)[0]:
                    try:
                        chunk = sock.recv(65536)
                    except ConnectionResetError:
                        chunk = b""
                    if not chunk:
                        closed = True
                        break
                    answer.extend(chunk)
                return closed

            # One byte every half second (the 2 s limit is reached after ~4 of the ~1,400 bytes); a minute at most.
            wait_until(answered_and_closed, 60, "the server to answer the trickled body and close", every=0.5)
        assert sent < len(body), "the whole body went through: the test tested nothing"
        head, _, payload = bytes(answer).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), bytes(answer)
        assert b"connection: close" in head.lower(), head
        assert b'"body_too_slow"' in payload and b"within 2 s" in payload, payload
