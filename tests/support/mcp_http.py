"""The MCP SDK client over streamable HTTP, with the headers a test gives (an API key, the user)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport with our headers; it leaves a client it was given open, so close it."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
