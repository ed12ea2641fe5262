"""``/mcp`` on `episodes api`: the MCP tools (:mod:`jobs.service.mcp_tools`) over streamable HTTP.

Each request carries the API key (``Authorization: Bearer <key>``), checked exactly as for the REST
routes (:func:`jobs.service.auth.authenticate`, the same cache, the same rate limit, the same 401
and 429), and ``X-Episodes-User``, the user whose memory the session reads. The key fixes the
tenant; each tool then checks the scope it needs (``recall`` to read, ``write`` to forget) and
answers a tool error, not an HTTP one, when the key lacks it.

Why the user is a header and not a tool argument: the host application that holds the key decides
whose memory a conversation may see, once, where it configures the connection (Claude Code's
``--header``); the model cannot reach another user's memory by changing an argument, whatever a
transcript or a web page talks it into; and the tools are the same as over stdio, where the command
line fixes the user.

Why stateless, JSON responses: every tool is one request and one answer (none asks the client
anything back), so no session state needs to live in the process, and ``episodes api --workers N``
serves any request from any worker. DNS-rebinding protection (a check of the Host header, for
servers that trust anyone who can reach them) is off: every request must carry a key.

Why only POST: the transport's ``GET`` opens a stream for messages the server starts on its own, and
this server starts none; such a stream stayed open for ever, holding a connection and a worker's task
per client. ``GET`` (and any method but ``POST``) answers 405 with ``Allow: POST``, which the MCP
specification names as the answer of a server that offers no such stream; clients then carry on with
POST alone.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from jobs.db import Database
from jobs.recall.recaller import Recaller
from jobs.service.auth import authenticate, throttle
from jobs.service.errors import ApiError
from jobs.service.mcp_tools import Caller, build_server

PATH = "/mcp"
USER_HEADER = "X-Episodes-User"
_MAX_USER = 256


def _bearer(request: Request) -> str | None:
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    return secret.strip() or None if scheme.lower() == "bearer" else None


def _user(request: Request) -> str:
    user = request.headers.get(USER_HEADER, "").strip()
    if not user or len(user) > _MAX_USER:
        raise ApiError(
            400,
            "invalid_request",
            f"send the {USER_HEADER} header: the id of the user whose memory "
            f"this session reads (1-{_MAX_USER} characters)",
            field=f"header.{USER_HEADER.lower()}",
        )
    return user


class McpEndpoint:
    """The ASGI app at ``/mcp``: the key and the user, then the SDK's transport.

    An :class:`ApiError` or a database outage raised here is answered by the app's handlers
    (jobs/service/errors.py), so a refused request has the same JSON error body as on any route."""

    def __init__(self, manager: StreamableHTTPSessionManager, max_body: int) -> None:
        self.manager, self.max_body = manager, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if request.method != "POST":  # no stream of server-initiated messages: nothing for GET to wait on
            raise ApiError(
                405,
                "method_not_allowed",
                "this MCP endpoint takes POST only (no server-initiated stream): send each JSON-RPC message as a POST",
                headers={"Allow": "POST"},
            )
        key = await authenticate(request, _bearer(request))  # from the headers: no byte of the body read yet
        user = _user(request)
        throttle(request, key)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            raise ApiError(413, "body_too_large", f"request body over the limit of {self.max_body:,} bytes")
        request.state.mcp_caller = Caller(key.tenant_id, user, key.scopes)
        await self.manager.handle_request(scope, receive, send)


def caller_of(ctx: Context[Any, Any]) -> Caller:
    """The :class:`Caller` that :class:`McpEndpoint` put on the request of this tool call."""
    caller = getattr(getattr(ctx.request_context.request, "state", None), "mcp_caller", None)
    if not isinstance(caller, Caller):
        raise ToolError("forbidden: no API key on this request")
    return caller


def mount(app: FastAPI, db: Database, recaller: Recaller, max_body: int) -> StreamableHTTPSessionManager:
    """Serve the tools at :data:`PATH` on ``app``; return the session manager, whose ``run()`` the
    app's lifespan must enter (a route's own lifespan is not run by its parent app)."""
    server = build_server(db, recaller, caller_of)
    server.streamable_http_app(  # builds server.session_manager; the Starlette app it returns is not needed
        stateless_http=True,
        json_response=True,
        max_request_body_size=max_body,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.router.routes.append(Route(PATH, McpEndpoint(server.session_manager, max_body), include_in_schema=False))
    return server.session_manager
