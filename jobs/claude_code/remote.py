"""The hooks' remote mode: `episodes api` does the work (POST /v1/recall, POST /v1/transcripts).

The key is read from the environment variable named at install (``--key-env``, default
EPISODES_API_KEY), never written into settings.json. The tenant is the key's. Only ``http.client``
is imported for SessionStart, so the hook's cost is the process start plus one request to a warm
service; the first prompt also renders the block of what is new (jobs.claude_code.injection).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jobs.claude_code import session_state
from jobs.claude_code.handover import session_records
from jobs.claude_code.hook_settings import START_ROUTE
from jobs.claude_code.places import project_purpose
from jobs.config import env

TIMEOUT_SECONDS = 4.0


class RemoteError(Exception):
    """`episodes api` refused or could not be reached (the hook logs it and fails open)."""


def post(
    api: str,
    key_env: str,
    path: str,
    body: dict[str, Any],
    timeout: float = TIMEOUT_SECONDS,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST JSON to ``api`` + ``path`` with the bearer key from ``key_env`` (and ``headers``); the decoded answer."""
    import http.client

    key = env(key_env) or ""
    if not key:
        raise RemoteError(f"no API key in ${key_env}; set it in the environment Claude Code runs in")
    parts = urlsplit(api.rstrip("/") + path)
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        data = json.dumps(body).encode("utf-8")
        conn.request(
            "POST",
            parts.path + (f"?{parts.query}" if parts.query else ""),
            body=data,
            headers={
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                **(headers or {}),
            },
        )
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise RemoteError(f"{path} answered {response.status}: {raw[:300].decode('utf-8', 'replace')}")
    return json.loads(raw)


def start_view(args: argparse.Namespace, user: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The session's start block and the ids it shows, from ``POST /v1/claude-code/session-start`` (the
    route the installed sh/curl SessionStart hook calls; jobs.claude_code.start_view)."""
    where = git_place(str(payload.get("cwd") or ""))
    sent = {f"X-Episodes-{k.title()}": v.encode("utf-8").decode("latin-1") for k, v in where.items()}
    return dict(
        post(
            args.api,
            args.key_env,
            f"{START_ROUTE}?user_id={quote(user, safe='')}&format=json",
            {"cwd": payload.get("cwd")},
            headers=sent,  # as the sh hook sends them (HTTP headers are Latin-1: UTF-8 bytes as such)
        )
    )


def git_place(cwd: str) -> dict[str, str]:
    """``repo``, ``branch`` and ``head`` of the session's folder, read from git's files (no git process); none
    outside git (issue 49: the service leaves out other branches' unmerged sessions)."""
    from jobs.repository.identity import place_of

    place = place_of(cwd) if cwd else None
    where = {"repo": place.identity, "branch": place.branch, "head": place.head} if place else {}
    return {k: v for k, v in where.items() if v}


def session_start(args: argparse.Namespace, user: str, payload: dict[str, Any]) -> str:
    """SessionStart where the sh/curl hook could not be installed: the same route, from Python."""
    sid = str(payload.get("session_id") or "")
    state = session_state.load(sid)
    view = start_view(args, user, payload)
    state.cwd, state.transcript_path = payload.get("cwd"), payload.get("transcript_path")
    session_state.remember_start(state, view.get("episodes") or [], view.get("open_items") or [])
    session_state.save(sid, state)
    return str(view.get("block") or "")


def first_prompt(args: argparse.Namespace, user: str, payload: dict[str, Any]) -> str:
    """What recall finds relevant to the first prompt and the session did not see at its start. The
    start view is asked for again (the sh/curl SessionStart hook keeps no state here): the same
    recall a moment later, so the same episodes, unless one was summarised in between."""
    claimed = session_state.claim_first_prompt(payload)
    if claimed is None:
        return ""
    sid, state, prompt = claimed
    import datetime as dt

    from jobs.claude_code import injection

    view = start_view(args, user, payload)
    session_state.remember_start(state, view.get("episodes") or [], view.get("open_items") or [])
    cwd = str(payload.get("cwd") or "")
    answer = post(
        args.api,
        args.key_env,
        "/v1/recall",
        {
            "user_id": user,
            "message": prompt[:20_000],
            "purpose": project_purpose(cwd),
            "budget_tokens": injection.PROMPT_BUDGET_TOKENS,
            **git_place(cwd),  # issue 49: other branches' sessions as pending
        },
    )
    block = injection.prompt_block(
        state,
        dt.datetime.fromisoformat(answer["now"]),
        injection.episodes_from(answer.get("episodes") or []),
        injection.open_items_from(answer.get("open_items") or []),
    )
    session_state.save(sid, state)
    return block


def hand_over(args: argparse.Namespace, user: str, payload: dict[str, Any], *, close: bool) -> None:
    if close:
        session_state.mark_ended(payload)
    store(
        args.api,
        args.key_env,
        Path(str(payload.get("transcript_path") or "")),
        user_id=user,
        close=close,
        cwd=payload.get("cwd"),
        idle_close_seconds=_idle_close(),
    )


def store(
    api: str, key_env: str, path: Path, *, user_id: str, close: bool, cwd: str | None, idle_close_seconds: float | None
) -> dict[str, Any]:
    """POST one session file's records to /v1/transcripts (the key's tenant); the answer."""
    records = [
        item
        for _, item in session_records(
            path, tenant_id="", user_id=user_id, close=close, idle_close_seconds=idle_close_seconds, cwd=cwd
        )
        if isinstance(item, dict)
    ]
    if not records:
        return {"accepted": 0, "unchanged": 0, "rejected": 0, "results": []}
    for record in records:
        record.pop("tenant_id", None)  # the key's tenant
    answer = post(api, key_env, "/v1/transcripts", {"transcripts": records}, timeout=20.0)
    if answer.get("rejected"):
        reasons = [r.get("reason") for r in answer.get("results", []) if r.get("result") == "rejected"]
        raise RemoteError(f"/v1/transcripts rejected {answer['rejected']}: {reasons[:3]}")
    return dict(answer)


def _idle_close() -> float | None:
    from jobs.config import load

    return load().idle_close_seconds


def sync_store(api: str, key_env: str) -> Callable[[Sequence[tuple[str, dict[str, Any]]]], tuple[int, int, list[str]]]:
    """The store of `episodes claude-code sync` in remote mode (jobs.claude_code.sync.Store)."""

    def store_records(records: Sequence[tuple[str, dict[str, Any]]]) -> tuple[int, int, list[str]]:
        bodies = [{k: v for k, v in record.items() if k != "tenant_id"} for _, record in records]
        answer = post(api, key_env, "/v1/transcripts", {"transcripts": bodies}, timeout=60.0)
        rejected = [
            f"{records[r['index']][0]}: {r.get('reason')}"
            for r in answer.get("results", [])
            if r.get("result") == "rejected"
        ]
        return int(answer.get("accepted", 0)), int(answer.get("unchanged", 0)), rejected

    return store_records
