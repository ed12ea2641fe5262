"""`episodes api`: the HTTP memory service (FastAPI on uvicorn)."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import click

from jobs import config
from jobs.cli.base import Context
from jobs.cli.mcp import service_database


@click.command("api")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on (0.0.0.0: all).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="TCP port.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes; /metrics then aggregates all of them.",
)
@click.pass_obj
def api_command(obj: Context, host: str, port: int, workers: int) -> None:
    """Serve recall, transcripts, episodes, events and users over HTTP with per-tenant API keys.

    Create a key first with `episodes keys create`. SIGTERM (or Ctrl-C) stops taking connections
    and lets requests in flight finish (up to Settings.shutdown_deadline_seconds, 30 s). OpenAPI at /openapi.json.
    The port is bound first: one in use is one line and exit status 1.
    It logs in as episodes_service, or EPISODES_SERVICE_DATABASE_URL (docs/operations.md, "Database roles").
    """
    from jobs.service import server

    sock = server.listen(host, port)  # first: a port in use is one line, before anything says "listening"
    port = sock.getsockname()[1]  # the one chosen, for --port 0
    try:
        service_database(obj, "episodes api").close()  # one line now if unreachable, not current, or too strong
        metrics = Path(tempfile.mkdtemp(prefix="episodes-metrics-")) if workers > 1 else None
        if metrics is not None:
            config.share_metrics_dir(metrics)  # before the workers start: they inherit it
        banner = f"episodes api listening on http://{host}:{port} ({workers} worker{'s' if workers > 1 else ''})"
        try:
            server.run(
                "jobs.service.app:from_environment",
                sock,
                ready=lambda: click.echo(banner, err=True),  # once it takes connections, not before
                factory=True,
                workers=workers,
                access_log=False,
                log_config=None,
                server_header=False,
                timeout_graceful_shutdown=max(1, math.ceil(obj.settings.shutdown_deadline_seconds)),
                **server.options(obj.settings),
            )
        finally:
            if metrics is not None:
                shutil.rmtree(metrics, ignore_errors=True)
    finally:
        sock.close()
