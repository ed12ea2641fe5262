"""The memory service: `episodes api` (HTTP, FastAPI on uvicorn), its API keys and its reads.

- :mod:`jobs.service.keys`: create, list, revoke and verify API keys (hashes only, owner-only table);
- :mod:`jobs.service.reads`: the tenant-scoped reads (episodes, one episode, typed events) as plain
  functions over a connection, shared by the HTTP routes and, later, the MCP tools;
- :mod:`jobs.service.app`: the ASGI application; routes live in :mod:`jobs.service.routes`.
"""
