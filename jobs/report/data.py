"""The report's data: the analyst views read into pandas frames, and the aggregations the page shows.

The views are read only through :func:`analyst_connection`, as ``episodes_analyst`` scoped to one
tenant or as ``episodes_operator`` across tenants, so a report never shows more than an analyst
could query. The queries are the named blocks of ``reports/report.sql``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pandas as pd
from psycopg import sql

from jobs.concepts import EVENT_TYPES, EventType
from jobs.db import Conn, Database, set_local
from jobs.resources import reports_dir
from jobs.sql import named_queries

ANALYST_ROLE = "episodes_analyst"
OPERATOR_ROLE = "episodes_operator"
# Chart colours, one per event type in the order of jobs.concepts.EVENT_TYPES.
EVENT_COLOURS = ("#2563eb", "#d97706", "#059669", "#9333ea", "#db2777", "#0891b2", "#65a30d", "#dc2626")
# (days open below which a question falls in the bucket, label).
AGING_BUCKETS = (
    (7, "under 1 week"),
    (30, "1–4 weeks"),
    (91, "1–3 months"),
    (182, "3–6 months"),
    (365, "6–12 months"),
    (math.inf, "over a year"),
)


@contextmanager
def analyst_connection(db: Database, tenant: str | None) -> Iterator[Conn]:
    """A read-only transaction that sees what an analyst sees.

    As ``episodes_analyst`` with ``episodes.tenant_id`` set when ``tenant`` is given (one tenant's
    rows), else as the cross-tenant ``episodes_operator``. Either way only the analyst views are
    readable. Times come back in UTC.
    """
    with db.pool.connection() as conn:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            # The views' `stale` columns use these (migration 0009); unset they default to 30 / 180 days.
            stale = {
                "episodes.stale_grace": f"{db.settings.stale_grace_seconds} seconds",
                "episodes.stale_age": f"{db.settings.stale_age_seconds} seconds",
            }
            scope = {} if tenant is None else {"episodes.tenant_id": tenant}
            set_local(conn, TimeZone="UTC", **stale, **scope)
            with analyst_role(conn, OPERATOR_ROLE if tenant is None else ANALYST_ROLE):
                yield conn


@contextmanager
def analyst_role(conn: Conn, role: str) -> Iterator[None]:
    """Be ``role`` inside ``conn``'s open transaction, until the block ends.

    SET ROLE, not SET LOCAL ROLE: on a Citus cluster the transaction's SET LOCAL commands are replayed
    on every worker connection it opens (``citus.propagate_set_commands``), so a SET LOCAL ROLE would
    make the views' owner-rights reads (migration 0017) reach the shards as the analyst, who may not
    read them. The role is reset when the block ends; if it fails, the rollback undoes the SET."""
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    yield
    conn.execute("RESET ROLE")


@cache
def report_queries() -> dict[str, str]:
    """The ``-- name:`` blocks of reports/report.sql, in file order."""
    return named_queries((reports_dir() / "report.sql").read_text(encoding="utf-8"), "reports/report.sql")


def load_frames(db: Database, tenant: str | None, since: dt.date | None) -> dict[str, pd.DataFrame]:
    """One DataFrame per report query, read through the analyst views."""
    start = dt.datetime.combine(since, dt.time(), tzinfo=dt.UTC) if since else None
    frames: dict[str, pd.DataFrame] = {}
    with analyst_connection(db, tenant) as conn:
        for name, sql in report_queries().items():
            cur = conn.execute(sql, {"since": start})
            columns = [d.name for d in cur.description or []]
            frames[name] = pd.DataFrame(cur.fetchall(), columns=columns)
    return frames


# -- aggregation ---------------------------------------------------------------------------------


def utc(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True)


def episodes_per_week(ep: pd.DataFrame) -> pd.DataFrame:
    """Session episodes per ISO week (Monday, UTC) of their end, with empty weeks as 0."""
    if ep.empty:
        return pd.DataFrame({"week": [], "episodes": []})
    weeks = utc(ep["ended_at"]).dt.tz_localize(None).dt.to_period("W-SUN").dt.start_time
    counts = weeks.value_counts().sort_index()
    full = pd.date_range(counts.index.min(), counts.index.max(), freq="7D")
    counts = counts.reindex(full, fill_value=0)
    return pd.DataFrame({"week": counts.index, "episodes": counts.to_numpy()})


def count_column(event_type: EventType) -> str:
    """The column of analyst.episode_timeline (and the report's episodes query) counting ``event_type``."""
    return f"{event_type}s"


def counted_types(ep: pd.DataFrame) -> list[tuple[EventType, str, str, str]]:
    """(type, column, label, colour) of each event type the episodes query counts, in the order of
    EVENT_TYPES: the chart follows the list and the analyst view, with no copy of its own."""
    return [
        (t, count_column(t), count_column(t).replace("_", " ").capitalize(), colour)
        for t, colour in zip(EVENT_TYPES, EVENT_COLOURS)
        if count_column(t) in ep.columns
    ]


def events_by_month(ep: pd.DataFrame) -> pd.DataFrame:
    """Key events per type and calendar month (UTC) of the session, with empty months as 0."""
    cols = [col for _, col, _, _ in counted_types(ep)]
    if ep.empty:
        return pd.DataFrame(columns=["month", *cols])
    month = utc(ep["ended_at"]).dt.tz_localize(None).dt.to_period("M")
    sums = ep[cols].astype(int).groupby(month).sum()
    full = pd.period_range(sums.index.min(), sums.index.max(), freq="M")
    sums = sums.reindex(full, fill_value=0)
    return sums.rename_axis("month").reset_index()


def top_topics(ep: pd.DataFrame, n: int = 12) -> pd.DataFrame:
    """Topic tags by number of session episodes carrying them (ties alphabetical)."""
    tags = ep["topic_tags"].explode().dropna() if not ep.empty else pd.Series([], dtype=object)
    counts = tags.value_counts().rename_axis("topic").reset_index(name="episodes")
    return counts.sort_values(["episodes", "topic"], ascending=[False, True]).head(n).reset_index(drop=True)


def top_entities(en: pd.DataFrame, n: int = 12) -> pd.DataFrame:
    """Entities by number of episodes mentioning them (case-insensitive), with the commonest spelling."""
    if en.empty:
        return pd.DataFrame(columns=["entity", "kind", "episodes", "users"])
    grouped = en.groupby("entity_key")
    out = pd.DataFrame(
        {
            "entity": grouped["entity"].agg(lambda s: s.value_counts().index[0]),
            "kind": grouped["kind"].agg(lambda s: s.value_counts().index[0]),
            "episodes": grouped["episode_id"].nunique(),
            "users": en.drop_duplicates(["entity_key", "tenant_id", "user_id"]).groupby("entity_key").size(),
        }
    )
    return out.sort_values(["episodes", "entity"], ascending=[False, True]).head(n).reset_index(drop=True)


def question_aging(oq: pd.DataFrame) -> pd.DataFrame:
    """Still-open questions by how long they have been open."""
    days = oq.loc[oq["status"] == "open", "days_open"].astype(int) if not oq.empty else pd.Series([], dtype=int)
    edges = [-1, *[b for b, _ in AGING_BUCKETS]]
    labels = [name for _, name in AGING_BUCKETS]
    buckets = pd.cut(days, bins=edges, labels=labels, right=False)
    counts = buckets.value_counts().reindex(labels, fill_value=0)
    return pd.DataFrame({"bucket": labels, "open": counts.to_numpy()})


def cost_per_day(cost: pd.DataFrame) -> pd.DataFrame:
    """Calls, tokens and estimated cost per UTC day, over all tenants in scope, split live / batch."""
    cols = ["calls", "failed_calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
    if cost.empty:
        return pd.DataFrame(columns=["day", *cols, "cost_usd", "live_cost_usd", "batch_cost_usd"])
    cost = cost.assign(day=pd.to_datetime(cost["day"]), cost_usd=cost["cost_usd"].astype(float))
    daily = cost.groupby("day")[cols].sum().astype(int)
    by_mode = cost.pivot_table(index="day", columns="mode", values="cost_usd", aggfunc="sum", fill_value=0.0)
    daily["cost_usd"] = cost.groupby("day")["cost_usd"].sum()
    for mode in ("live", "batch"):
        daily[f"{mode}_cost_usd"] = by_mode[mode] if mode in by_mode else 0.0
    return daily.reset_index()
