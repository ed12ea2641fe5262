"""Exporting everything held about one user, as JSON: the data behind "what do you remember about me?".

The document (format ``episodes-user-export/1``) holds, for one (tenant, user):

- ``transcripts``: every stored session with its messages as stored, times, purpose, work state and
  ``metadata``, what the host handed over beside it (a Claude Code session's project folder, git branch
  and client version; null when none was given);
- ``episodes``: the session episodes (current and superseded), each with its key events (evidence
  indexes and quotes) and entities;
- ``super_summaries``: the compressed periods, with the ids of the episodes each one ``replaces``;
- ``model_calls``: metadata of every model call made for the user (template, model, tokens, cost,
  latency, outcome; never prompts or outputs, which are not stored);
- ``counts`` of each, and ``notes`` that explain the document to its reader.

Embeddings are left out unless asked for (``with_embeddings``): 384 numbers per episode mean
nothing to a person. The document is read in one statement, so it is one consistent snapshot, and
through the tenant's row-level security, so it can hold nothing of another tenant.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from jobs.db import Database, one
from jobs.sql import query

FORMAT = "episodes-user-export/1"
NOTES = [
    "Episodes are short summaries of your sessions, written by a model (model 'offline': by a "
    "deterministic program without a model) and shown to the agent at the start of later sessions.",
    "Personal data such as e-mail addresses, phone numbers, card numbers, IBANs, IP addresses and "
    "secrets is replaced by placeholders like [EMAIL] before a session is summarised.",
    "Super-summaries condense older episodes of a period; 'replaces' lists the episodes they stand for.",
    "Model calls list what each call cost and how it ended; prompts and answers are not stored.",
    "A session's metadata is what the application (or Claude Code) handed over beside it, such as the "
    "project folder, git branch and program versions; null when it gave none.",
]


def export_user(db: Database, tenant_id: str, user_id: str, *, with_embeddings: bool = False) -> dict[str, Any]:
    """Everything held about ``user_id`` in ``tenant_id`` as a JSON-ready dict."""
    if not user_id:
        raise ValueError("user_id must be a non-empty string")
    with db.tenant(tenant_id) as conn:
        doc = one(
            conn.execute(
                query("export_user"),
                {
                    "tenant_id": tenant_id,
                    "user_id": user_id,
                    "with_embeddings": with_embeddings,
                },
            )
        )["doc"]
    return {
        "format": FORMAT,
        "tenant_id": tenant_id,
        "user_id": user_id,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(),
        "with_embeddings": with_embeddings,
        "counts": {key: len(doc[key]) for key in ("transcripts", "episodes", "super_summaries", "model_calls")},
        "notes": NOTES,
        **doc,
    }


def dumps(document: dict[str, Any]) -> str:
    """The document as indented JSON (non-ASCII kept as is; dates and other values as text)."""
    return json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n"


def write_export(document: dict[str, Any], path: Path) -> None:
    """Write atomically, readable by the owner only: the file is personal data."""
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps(document))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
