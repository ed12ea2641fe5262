"""`episodes status`: one screen that tells an operator where things stand."""

from __future__ import annotations

from jobs import migrate
from jobs.citus.cluster import cluster_status
from jobs.config import Settings, default_model
from jobs.db import Conn, Database, one
from jobs.lifecycle.reembed import reembed_progress
from jobs.llm.spend import DailyCap, backend_of, model_of, spend_today
from jobs.logs import hide_secrets
from jobs.sql import query
from jobs.wording import counted

EMBEDDER_NOTES = {"minilm": ": all-MiniLM-L6-v2, int8 weights", "minilm-fp32": ": all-MiniLM-L6-v2, float32"}


def render_status(db: Database) -> str:
    settings = db.settings
    lines = [f"database     {hide_secrets(db.location)}"]  # sslpassword= too, not only password=
    with db.connect(autocommit=True) as conn:
        have = migrate.current_version(conn)
        if not have:
            lines.append("schema       not initialised (run `episodes init`)")
            return "\n".join(lines)
        dim = one(conn.execute("SELECT value FROM episodes_settings WHERE key = 'embedding_dim'"))["value"]
        name = one(conn.execute("SELECT value FROM episodes_settings WHERE key = 'embedder'"))["value"]
        lines.append(f"schema       version {have} (code {migrate.code_version()}), embeddings {dim}-d ({name})")
        if (spread := cluster_status(conn)) is not None:
            lines.extend(spread.lines())
        if have >= 14 and (progress := reembed_progress(conn)) is not None:  # migration 0014
            lines.append(f"reembed      {progress.line()} (`episodes reembed --embedder {progress.embedder}` resumes)")
        lines.append(f"extractor    {extractor_label(settings)}")
        if settings.resolved_extractor != "offline":
            lines.append(f"today        {spend_line(db)}")
        lines.append(f"embedder     {settings.embedder}{EMBEDDER_NOTES.get(settings.embedder, '')} (EPISODES_EMBEDDER)")
        states = {r["state"]: r["n"] for r in conn.execute(query("status_transcripts"))}
        order = ["open", "pending", "running", "done", "dead"]
        lines.append("transcripts  " + " · ".join(f"{s} {states.get(s, 0)}" for s in order))
        q = one(conn.execute(query("status_queue")))
        oldest = q["oldest_pending_seconds"]
        lines.append(
            f"queue        {q['due']} due · {q['backing_off']} backing off after failures · "
            f"oldest pending {_age(oldest)} · {q['expired_leases']} expired claims"
        )
        hour = one(conn.execute(query("status_last_hour")))
        lines.append(
            f"last hour    {counted(hour['episodes'], 'episode')} · "
            f"{counted(hour['model_calls'], 'model call')} ({hour['failed_calls']} failed)"
        )
        rows = conn.execute(query("status_episodes")).fetchall()
        invented = one(conn.execute(query("status_invented_summaries")))["n"]  # issue 46 #15
        not_stored = f", {counted(invented, 'invented summary', 'invented summaries')} not stored"
        if rows:
            parts = [f"{r['kind']}/{r['status']} {r['n']}" for r in rows]
            dropped_ev = sum(r["dropped_events"] for r in rows)
            dropped_en = sum(r["dropped_entities"] for r in rows)
            tokens_in = sum(r["input_tokens"] for r in rows)
            tokens_out = sum(r["output_tokens"] for r in rows)
            cost = sum(float(r["cost_usd"]) for r in rows)
            lines.append("episodes     " + " · ".join(parts))
            lines.append("made by      " + made_by(conn))
            lines.append(
                f"grounding    dropped {counted(dropped_ev, 'ungrounded event')}, "
                f"{counted(dropped_en, 'entity', 'entities')} not in the transcript{not_stored}"
            )
            lines.append(f"tokens       {tokens_in:,} in / {tokens_out:,} out, est. ${cost:.4f}")
        else:
            lines.append("episodes     none yet (run `episodes run`)")
            if invented:
                lines.append(f"grounding    dropped{not_stored[1:]}")
        dead = conn.execute(query("status_dead_letters"), {"limit": 5}).fetchall()
        for r in dead:
            lines.append(
                f"dead letter  {r['tenant_id']}/{r['session_id']} after {counted(r['attempts'], 'attempt')}: "
                f"{hide_secrets(r['last_error'] or '')}"
            )
        runs = conn.execute(query("status_job_runs"), {"limit": 5}).fetchall()
        if runs:
            lines.append("last runs")
            for r in runs:
                took = (r["finished_at"] - r["started_at"]).total_seconds() if r["finished_at"] else None
                counts = " ".join(f"{k}={v}" for k, v in (r["counts"] or {}).items())
                lines.append(
                    f"  {r['started_at']:%Y-%m-%d %H:%M:%S} {r['job']:<10} {r['status']:<7} "
                    + (f"{took:.1f}s " if took is not None else "running ")
                    + counts
                    + (f" error: {hide_secrets(r['error'])}" if r["error"] else "")
                )
    return "\n".join(lines)


def made_by(conn: Conn) -> str:
    """Which back ends and models wrote the current episodes, most first (jobs.llm.spend names them)."""
    found = conn.execute(
        "SELECT model, count(*) AS n FROM episodes WHERE status = 'current' "
        "GROUP BY model ORDER BY n DESC, model LIMIT 6"
    ).fetchall()
    named = []
    for r in found:
        backend, model = backend_of(r["model"]), model_of(r["model"])
        named.append(f"{backend} {r['n']}" if model == backend else f"{backend} ({model}) {r['n']}")
    return " · ".join(named)


def spend_line(db: Database) -> str:
    """What the back end in use spent today (UTC), and its daily cap (jobs.llm.spend)."""
    backend = db.settings.resolved_extractor
    spent = spend_today(db, backend)
    line = (
        f"{backend} spent {spent.tokens:,} tokens on {counted(spent.sessions, 'session')}, est. ${spent.cost_usd:.4f}"
    )
    cap = DailyCap.from_settings(db.settings, backend)
    if cap is None:
        return line + " · no daily cap (EPISODES_DAILY_TOKEN_CAP, EPISODES_DAILY_SESSION_CAP)"
    limits = " and ".join(
        x
        for x in (
            f"{cap.tokens:,} tokens" if cap.tokens is not None else "",
            f"{counted(cap.sessions, 'session')}" if cap.sessions is not None else "",
        )
        if x
    )
    held = cap.reached(spent)
    return line + f" · daily cap {limits}" + (": reached, the queue is held until 00:00 UTC" if held else "")


def extractor_label(settings: Settings) -> str:
    """The back end new episodes come from, and its model, as `auto` resolves it (Settings.resolved_extractor)."""
    chosen = settings.resolved_extractor
    how = "EPISODES_EXTRACTOR" if settings.extractor != "auto" else "auto"
    if chosen == "offline":
        why = "no ANTHROPIC_API_KEY or OPENAI_BASE_URL" if settings.extractor == "auto" else "EPISODES_EXTRACTOR"
        return f"offline ({why}: deterministic, lower quality)"
    if chosen == "anthropic":
        return f"anthropic, model {settings.model} ({how})"
    if chosen == "openai":
        where = hide_secrets(settings.openai_base_url) if settings.openai_base_url else "the SDK default"
        model = "unset: set EPISODES_MODEL" if settings.model == default_model() else settings.model
        return f"openai at {where}, model {model} ({how})"
    if chosen == "claude-code":
        return f"claude-code, model {settings.model} through your Claude Code login ({how}; spends your subscription)"
    return f"{chosen} ({how})"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = float(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"
