"""Building the report: read the frames, aggregate them, and lay out the numbers, charts and
tables of the page as one :class:`Report`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import pandas as pd
from pandas.api.typing import NaTType, NAType
from pandas.api.typing.aliases import Scalar

from jobs.concepts import EventType
from jobs.db import Database
from jobs.report.charts import (
    Chart,
    bar_chart,
    column_chart,
    day_ticks,
    time_ticks,
    usd_format,
)
from jobs.report.data import (
    cost_per_day,
    counted_types,
    episodes_per_week,
    events_by_month,
    load_frames,
    question_aging,
    top_entities,
    top_topics,
    utc,
)

DECISION_ROWS = 200
FAILURE_ROWS = 50
DAY_ROWS = 14

Cell: TypeAlias = Scalar | NaTType | NAType | None  # one value of a frame's row


@dataclass
class Report:
    """One page: the numbers (``data``, also embedded as JSON), chart geometry and table rows."""

    tenant: str | None
    since: dt.date | None
    generated_at: dt.datetime
    data: dict[str, Any]
    charts: dict[str, Chart]
    tables: dict[str, list[dict[str, Any]]]

    @property
    def scope(self) -> str:
        return f"tenant {self.tenant}" if self.tenant else "all tenants"


def build_report(
    db: Database, *, tenant: str | None = None, since: dt.date | None = None, now: dt.datetime | None = None
) -> Report:
    """Read, aggregate and lay out everything the page shows."""
    f = load_frames(db, tenant, since)
    ep, dec, oq, cm, cost, fail = (
        f[k] for k in ("episodes", "decisions", "open_questions", "commitments", "cost", "failures")
    )
    weekly, monthly, topics = episodes_per_week(ep), events_by_month(ep), top_topics(ep)
    entities, aging, daily = top_entities(f["entities"]), question_aging(oq), cost_per_day(cost)
    ended = utc(ep["ended_at"]) if not ep.empty else None
    summary = {
        "episodes": len(ep),
        "tenants": int(ep["tenant_id"].nunique()) if not ep.empty else 0,
        "users": len(ep[["tenant_id", "user_id"]].drop_duplicates()) if not ep.empty else 0,
        "first_session": ended.min().date().isoformat() if ended is not None else None,
        "last_session": ended.max().date().isoformat() if ended is not None else None,
        "offline_episodes": _count(ep, "model", "offline"),
        "decisions": len(dec),
        "open_questions": _count(oq, "status", "open"),
        "resolved_questions": _count(oq, "status", "resolved"),
        "median_days_to_resolve": _median_days_to_resolve(oq),
        "commitments_open": _count(cm, "status", "open"),
        "commitments_overdue": _count(cm, "status", "overdue"),
        "commitments_done": _count(cm, "status", "done"),
        "model_calls": _total(daily, "calls"),
        "failed_calls": _total(daily, "failed_calls"),
        "input_tokens": _total(daily, "input_tokens"),
        "output_tokens": _total(daily, "output_tokens"),
        "cache_read_tokens": _total(daily, "cache_read_tokens"),
        "cost_usd": round(float(daily["cost_usd"].sum()), 6) if not daily.empty else 0.0,
        "dead_letters": _count(fail, "source", "dead_letter"),
        "retrying": _count(fail, "source", "retrying"),
        "failed_model_calls": _count(fail, "source", "model_call"),
    }
    data = {
        "scope": {"tenant": tenant, "since": since.isoformat() if since else None},
        "summary": summary,
        "episodes_per_week": [
            {"week": f"{w:%Y-%m-%d}", "episodes": int(n)} for w, n in zip(weekly["week"], weekly["episodes"])
        ],
        "events_by_month": [
            {"month": str(r["month"]), **{c: int(r[c]) for _, c, _, _ in counted_types(ep)}} for r in _records(monthly)
        ],
        "top_topics": [{"topic": r["topic"], "episodes": int(r["episodes"])} for r in _records(topics)],
        "top_entities": [
            {"entity": r["entity"], "kind": r["kind"], "episodes": int(r["episodes"]), "users": int(r["users"])}
            for r in _records(entities)
        ],
        "open_question_aging": [{"bucket": r["bucket"], "open": int(r["open"])} for r in _records(aging)],
        "cost_per_day": [
            {
                "day": f"{r['day']:%Y-%m-%d}",
                **{k: (round(float(v), 6) if "cost" in k else int(v)) for k, v in r.items() if k != "day"},
            }
            for r in _records(daily)
        ],
        "failures": {
            "dead_letter": summary["dead_letters"],
            "retrying": summary["retrying"],
            "model_call": summary["failed_model_calls"],
        },
    }
    charts = _charts(weekly, monthly, topics, aging, daily, counted_types(ep))
    tables = _tables(dec, oq, cm, fail, entities, daily, tenant)
    return Report(tenant, since, now or dt.datetime.now(dt.UTC), data, charts, tables)


def _median_days_to_resolve(oq: pd.DataFrame) -> float | None:
    """Median days from raising a question to its resolution, over the resolved ones (None if none)."""
    days = oq.loc[oq["status"] == "resolved", "days_open"].astype(float) if not oq.empty else None
    return float(days.median()) if days is not None and len(days) else None


def _count(df: pd.DataFrame, column: str, value: str) -> int:
    return int((df[column] == value).sum()) if not df.empty else 0


def _total(df: pd.DataFrame, column: str) -> int:
    return int(df[column].sum()) if not df.empty else 0


def _charts(
    weekly: pd.DataFrame,
    monthly: pd.DataFrame,
    topics: pd.DataFrame,
    aging: pd.DataFrame,
    daily: pd.DataFrame,
    counted: list[tuple[EventType, str, str, str]],
) -> dict[str, Chart]:
    weeks = list(weekly["week"])
    months = [p.to_timestamp() for p in monthly["month"]]
    charts = {
        "weekly": column_chart(
            "Episodes per week",
            [f"week of {w:%d %b %Y}" for w in weeks],
            [("Episodes", "#4f46e5", list(weekly["episodes"]))],
            time_ticks(weeks, False),
            axis_title="episodes",
        ),
        "events": column_chart(
            "Key events per month",
            [f"{m:%B %Y}" for m in months],
            [(label, colour, list(monthly[col])) for _, col, label, colour in counted],
            time_ticks(months, True),
            axis_title="events",
        ),
        "topics": bar_chart("Top topics", list(topics["topic"]), list(topics["episodes"])),
        "aging": bar_chart(
            "Open questions by age", list(aging["bucket"]), list(aging["open"]), colour="#d97706", label_w=120
        ),
    }
    if not daily.empty:
        days = pd.date_range(daily["day"].min(), daily["day"].max(), freq="D")
        full = daily.set_index("day").reindex(days, fill_value=0)
        ticks = day_ticks(list(days))
        labels = [f"{d:%d %b %Y}" for d in days]
        charts["tokens"] = column_chart(
            "Tokens per day",
            labels,
            [
                ("Input", "#4f46e5", list(full["input_tokens"])),
                ("Output", "#0891b2", list(full["output_tokens"])),
                ("Cache read", "#a5b4fc", list(full["cache_read_tokens"])),
            ],
            ticks,
            axis_title="tokens",
            width=510,
            height=240,
        )
        charts["cost"] = column_chart(
            "Estimated cost per day",
            labels,
            [("Live", "#059669", list(full["live_cost_usd"])), ("Batch", "#6ee7b7", list(full["batch_cost_usd"]))],
            ticks,
            axis_title="USD",
            fmt=usd_format(float(daily["cost_usd"].max())),
            integer=False,
            width=510,
            height=240,
        )
    return charts


def _tables(
    dec: pd.DataFrame,
    oq: pd.DataFrame,
    cm: pd.DataFrame,
    fail: pd.DataFrame,
    entities: pd.DataFrame,
    daily: pd.DataFrame,
    tenant: str | None,
) -> dict[str, list[dict[str, Any]]]:
    def who(r: dict[str, Any]) -> str:
        return r["user_id"] if tenant else f"{r['tenant_id']} / {r['user_id']}"

    decisions = [
        {
            "date": r["decided_at"].date().isoformat(),
            "user": who(r),
            "what": r["what"],
            "topics": ", ".join(r["topic_tags"] or []),
            "session": r["session_id"],
        }
        for r in _records(dec.head(DECISION_ROWS))
    ]
    still_open = oq[oq["status"] == "open"].sort_values("days_open", ascending=False) if not oq.empty else oq
    questions = [
        {
            "raised": r["raised_at"].date().isoformat(),
            "user": who(r),
            "question": r["question"],
            "days": int(r["days_open"]),
        }
        for r in _records(still_open.head(10))
    ]
    overdue = cm[cm["status"] == "overdue"].sort_values("days_overdue", ascending=False) if not cm.empty else cm
    commitments = [
        {"due": r["due"].isoformat(), "user": who(r), "what": r["what"], "days": int(r["days_overdue"])}
        for r in _records(overdue.head(10))
    ]
    failures = [
        {
            "when": r["failed_at"].strftime("%Y-%m-%d %H:%M") if pd.notna(r["failed_at"]) else "",
            "source": r["source"].replace("_", " "),
            "user": who(r),
            "session": _text(r["session_id"]),
            "detail": _text(r["outcome"]) or _attempts(r["attempts"]),
            "error": _text(r["error"])[:240],
        }
        for r in _records(fail.head(FAILURE_ROWS))
    ]
    days = [
        {
            "day": f"{r['day']:%Y-%m-%d}",
            "calls": int(r["calls"]),
            "failed": int(r["failed_calls"]),
            "input": int(r["input_tokens"]),
            "output": int(r["output_tokens"]),
            "cached": int(r["cache_read_tokens"]),
            "cost": float(r["cost_usd"]),
        }
        for r in _records(daily.sort_values("day", ascending=False).head(DAY_ROWS))
    ]
    return {
        "decisions": decisions,
        "questions": questions,
        "overdue": commitments,
        "failures": failures,
        "entities": _records(entities),
        "days": days,
    }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as dicts. The stubs type the keys as Hashable; every column here is named by
    report.sql or by the aggregations in jobs.report.data, so every key is a str."""
    return cast(list[dict[str, Any]], frame.to_dict("records"))


def _attempts(value: Cell) -> str:
    if _text(value) == "":
        return ""
    n = int(float(str(value)))
    return f"{n} attempt{'s' if n != 1 else ''}"


def _text(value: Cell) -> str:
    """A cell as text: missing values (None, NaN, NaT, NA) become empty."""
    return "" if pd.isna(value) else str(value)
