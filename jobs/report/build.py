"""`episodes report`: one self-contained HTML page of what the analyst views hold.

The data is read only through the ``analyst`` views, as ``episodes_analyst`` scoped to one tenant
or as ``episodes_operator`` across tenants, so a report never shows more than an analyst could
query. pandas does the aggregation; chart geometry (scales, ticks, bars) is computed here and drawn
as inline SVG by ``reports/report.html.j2``. The page loads nothing: no scripts, fonts or images,
and a Content-Security-Policy that forbids fetching any. The numbers it shows are also embedded as
JSON (``<script type="application/json" id="report-data">``) for tests and other tools.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
import psycopg

from jobs.db import Database
from jobs.resources import reports_dir

ANALYST_ROLE = "episodes_analyst"
OPERATOR_ROLE = "episodes_operator"
TEMPLATE = "report.html.j2"
EVENT_TYPES = (("decisions", "Decisions", "#2563eb"), ("open_questions", "Open questions", "#d97706"),
               ("commitments", "Commitments", "#059669"), ("surprises", "Surprises", "#9333ea"))
AGING_BUCKETS = ((7, "under 1 week"), (30, "1–4 weeks"), (91, "1–3 months"), (182, "3–6 months"),
                 (365, "6–12 months"), (math.inf, "over a year"))
DECISION_ROWS = 200
FAILURE_ROWS = 50
DAY_ROWS = 14
_HEADER = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)


@contextmanager
def analyst_connection(db: Database, tenant: str | None) -> Iterator[psycopg.Connection]:
    """A read-only transaction that sees what an analyst sees.

    As ``episodes_analyst`` with ``episodes.tenant_id`` set when ``tenant`` is given (one tenant's
    rows), else as the cross-tenant ``episodes_operator``. Either way only the analyst views are
    readable. Times come back in UTC.
    """
    with db.pool.connection() as conn:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute("SET LOCAL TIME ZONE 'UTC'")
            if tenant is None:
                conn.execute(f"SET LOCAL ROLE {OPERATOR_ROLE}")
            else:
                conn.execute(f"SET LOCAL ROLE {ANALYST_ROLE}")
                conn.execute("SELECT set_config('episodes.tenant_id', %s, true)", (tenant,))
            yield conn


@cache
def report_queries() -> dict[str, str]:
    """The ``-- name:`` blocks of reports/report.sql."""
    parts = _HEADER.split((reports_dir() / "report.sql").read_text(encoding="utf-8"))
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2])}


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


# -- charts: geometry here, markup in the template -----------------------------------------------


@dataclass
class Chart:
    """Everything the SVG macro needs, in pixels of the viewBox."""

    title: str
    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    bars: list[dict[str, Any]] = field(default_factory=list)
    yticks: list[dict[str, Any]] = field(default_factory=list)
    xticks: list[dict[str, Any]] = field(default_factory=list)
    labels: list[dict[str, Any]] = field(default_factory=list)
    legend: list[dict[str, str]] = field(default_factory=list)
    axis_title: str = ""
    horizontal: bool = False

    @property
    def empty(self) -> bool:
        return not self.bars


def nice_ticks(vmax: float, count: int = 4, integer: bool = True) -> list[float]:
    """Round tick values from 0 to at least ``vmax`` (1-2-5 steps)."""
    if vmax <= 0:
        return [0, 1]
    raw = vmax / count
    magnitude = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer or magnitude >= 1 else (1, 2, 2.5, 5, 10)
    step = next(m * magnitude for m in steps if m * magnitude >= raw)
    if integer:
        step = max(1, round(step))
    n = math.ceil(vmax / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def column_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]],
                 tick_labels: dict[int, str], *, axis_title: str, fmt: str = "{:,.0f}", integer: bool = True,
                 width: int = 1040, height: int = 260) -> Chart:
    """Stacked columns, one per category; ``series`` is (name, colour, values)."""
    chart = Chart(title, width, height, left=64, top=16, plot_w=width - 80, plot_h=height - 56,
                  axis_title=axis_title)
    totals = [sum(s[2][i] for s in series) for i in range(len(categories))]
    if not categories or max(totals, default=0) <= 0:
        return chart
    ticks = nice_ticks(max(totals), integer=integer)
    scale = chart.plot_h / ticks[-1]
    slot = chart.plot_w / len(categories)
    bar_w = min(max(slot * 0.78, 1.0) if slot >= 3 else slot, 48.0)
    for t in ticks:
        chart.yticks.append({"y": round(chart.top + chart.plot_h - t * scale, 2), "label": fmt.format(t)})
    for i, category in enumerate(categories):
        base = 0.0
        x = chart.left + i * slot + (slot - bar_w) / 2
        for name, colour, values in series:
            v = float(values[i])
            if v <= 0:
                continue
            h = v * scale
            chart.bars.append({"x": round(x, 2), "y": round(chart.top + chart.plot_h - (base + v) * scale, 2),
                               "w": round(bar_w, 2), "h": round(max(h, 0.5), 2), "fill": colour,
                               "tip": f"{category}: {fmt.format(v)} {name.lower()}"})
            base += v
    for i, label in tick_labels.items():
        chart.xticks.append({"x": round(chart.left + (i + 0.5) * slot, 2), "label": label})
    if len(series) > 1:
        chart.legend = [{"label": name, "color": colour} for name, colour, _ in series]
    return chart


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], *, colour: str = "#4f46e5",
              fmt: str = "{:,.0f}", width: int = 500, label_w: int = 170) -> Chart:
    """Horizontal bars with the category on the left and the value at the end of the bar."""
    row = 26
    chart = Chart(title, width, 16 + row * max(len(labels), 1), left=label_w, top=8,
                  plot_w=width - label_w - 56, plot_h=row * len(labels), horizontal=True)
    top = max(values, default=0)
    if top <= 0:
        return chart
    for i, (label, value) in enumerate(zip(labels, values)):
        y = chart.top + i * row
        w = chart.plot_w * float(value) / top
        short = label if len(label) <= 26 else label[:25] + "…"
        chart.bars.append({"x": chart.left, "y": y + 4, "w": round(max(w, 1), 2), "h": row - 8, "fill": colour,
                           "tip": f"{label}: {fmt.format(value)}"})
        chart.labels.append({"x": chart.left - 8, "y": y + row / 2, "text": short, "anchor": "end"})
        chart.labels.append({"x": chart.left + w + 6, "y": y + row / 2, "text": fmt.format(value), "anchor": "start"})
    return chart


def _time_ticks(periods: Sequence[pd.Timestamp], monthly: bool) -> dict[int, str]:
    """Label the first period of each quarter (or of each month for short spans), with the year once."""
    ticks: dict[int, str] = {}
    span = len(periods)
    quarterly = span > (14 if monthly else 30)
    last_month, last_year = None, None
    for i, p in enumerate(periods):
        if (p.year, p.month) == last_month:
            continue
        last_month = (p.year, p.month)
        if quarterly and p.month not in (1, 4, 7, 10) and i != 0:
            continue
        ticks[i] = f"{p:%b %Y}" if p.year != last_year else f"{p:%b}"
        last_year = p.year
    return ticks


def _day_ticks(days: Sequence[pd.Timestamp], target: int = 8) -> dict[int, str]:
    every = max(1, math.ceil(len(days) / target))
    return {i: f"{d:%b} {d.day}" for i, d in enumerate(days) if i % every == 0}


# -- aggregation ---------------------------------------------------------------------------------


def _utc(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True)


def episodes_per_week(ep: pd.DataFrame) -> pd.DataFrame:
    """Session episodes per ISO week (Monday, UTC) of their end, with empty weeks as 0."""
    if ep.empty:
        return pd.DataFrame({"week": [], "episodes": []})
    weeks = _utc(ep["ended_at"]).dt.tz_localize(None).dt.to_period("W-SUN").dt.start_time
    counts = weeks.value_counts().sort_index()
    full = pd.date_range(counts.index.min(), counts.index.max(), freq="7D")
    counts = counts.reindex(full, fill_value=0)
    return pd.DataFrame({"week": counts.index, "episodes": counts.to_numpy()})


def events_by_month(ep: pd.DataFrame) -> pd.DataFrame:
    """Key events per type and calendar month (UTC) of the session, with empty months as 0."""
    cols = [c for c, _, _ in EVENT_TYPES]
    if ep.empty:
        return pd.DataFrame(columns=["month", *cols])
    month = _utc(ep["ended_at"]).dt.tz_localize(None).dt.to_period("M")
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
    out = pd.DataFrame({
        "entity": grouped["entity"].agg(lambda s: s.value_counts().index[0]),
        "kind": grouped["kind"].agg(lambda s: s.value_counts().index[0]),
        "episodes": grouped["episode_id"].nunique(),
        "users": grouped.apply(lambda g: len(set(zip(g["tenant_id"], g["user_id"]))), include_groups=False),
    })
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


# -- the report ----------------------------------------------------------------------------------


@dataclass
class Report:
    tenant: str | None
    since: dt.date | None
    generated_at: dt.datetime
    data: dict[str, Any]
    charts: dict[str, Chart]
    tables: dict[str, list[dict[str, Any]]]

    @property
    def scope(self) -> str:
        return f"tenant {self.tenant}" if self.tenant else "all tenants"


def build_report(db: Database, *, tenant: str | None = None, since: dt.date | None = None,
                 now: dt.datetime | None = None) -> Report:
    """Read, aggregate and lay out everything the page shows."""
    f = load_frames(db, tenant, since)
    ep, dec, oq, cm, cost, fail = (f[k] for k in ("episodes", "decisions", "open_questions", "commitments",
                                                  "cost", "failures"))
    weekly, monthly, topics = episodes_per_week(ep), events_by_month(ep), top_topics(ep)
    entities, aging, daily = top_entities(f["entities"]), question_aging(oq), cost_per_day(cost)
    ended = _utc(ep["ended_at"]) if not ep.empty else None
    resolved_days = oq.loc[oq["status"] == "resolved", "days_open"] if not oq.empty else pd.Series([], dtype=int)
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
        "median_days_to_resolve": float(resolved_days.median()) if len(resolved_days) else None,
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
        "episodes_per_week": [{"week": f"{w:%Y-%m-%d}", "episodes": int(n)}
                              for w, n in zip(weekly["week"], weekly["episodes"])],
        "events_by_month": [{"month": str(r["month"]), **{c: int(r[c]) for c, _, _ in EVENT_TYPES}}
                            for r in monthly.to_dict("records")],
        "top_topics": [{"topic": r["topic"], "episodes": int(r["episodes"])} for r in topics.to_dict("records")],
        "top_entities": [{"entity": r["entity"], "kind": r["kind"], "episodes": int(r["episodes"]),
                          "users": int(r["users"])} for r in entities.to_dict("records")],
        "open_question_aging": [{"bucket": r["bucket"], "open": int(r["open"])} for r in aging.to_dict("records")],
        "cost_per_day": [{"day": f"{r['day']:%Y-%m-%d}", **{k: (round(float(v), 6) if "cost" in k else int(v))
                                                            for k, v in r.items() if k != "day"}}
                         for r in daily.to_dict("records")],
        "failures": {"dead_letter": summary["dead_letters"], "retrying": summary["retrying"],
                     "model_call": summary["failed_model_calls"]},
    }
    charts = _charts(weekly, monthly, topics, aging, daily)
    tables = _tables(dec, oq, cm, fail, entities, daily, tenant)
    return Report(tenant, since, now or dt.datetime.now(dt.UTC), data, charts, tables)


def _count(df: pd.DataFrame, column: str, value: str) -> int:
    return int((df[column] == value).sum()) if not df.empty else 0


def _total(df: pd.DataFrame, column: str) -> int:
    return int(df[column].sum()) if not df.empty else 0


def _charts(weekly: pd.DataFrame, monthly: pd.DataFrame, topics: pd.DataFrame, aging: pd.DataFrame,
            daily: pd.DataFrame) -> dict[str, Chart]:
    weeks = list(weekly["week"])
    months = [p.to_timestamp() for p in monthly["month"]]
    charts = {
        "weekly": column_chart("Episodes per week", [f"week of {w:%d %b %Y}" for w in weeks],
                               [("Episodes", "#4f46e5", list(weekly["episodes"]))], _time_ticks(weeks, False),
                               axis_title="episodes"),
        "events": column_chart("Key events per month", [f"{m:%B %Y}" for m in months],
                               [(label, colour, list(monthly[col])) for col, label, colour in EVENT_TYPES],
                               _time_ticks(months, True), axis_title="events"),
        "topics": bar_chart("Top topics", list(topics["topic"]), list(topics["episodes"])),
        "aging": bar_chart("Open questions by age", list(aging["bucket"]), list(aging["open"]), colour="#d97706",
                           label_w=120),
    }
    if not daily.empty:
        days = pd.date_range(daily["day"].min(), daily["day"].max(), freq="D")
        full = daily.set_index("day").reindex(days, fill_value=0)
        ticks = _day_ticks(list(days))
        labels = [f"{d:%d %b %Y}" for d in days]
        charts["tokens"] = column_chart(
            "Tokens per day", labels,
            [("Input", "#4f46e5", list(full["input_tokens"])), ("Output", "#0891b2", list(full["output_tokens"])),
             ("Cache read", "#a5b4fc", list(full["cache_read_tokens"]))], ticks, axis_title="tokens",
            width=510, height=240)
        charts["cost"] = column_chart(
            "Estimated cost per day", labels,
            [("Live", "#059669", list(full["live_cost_usd"])), ("Batch", "#6ee7b7", list(full["batch_cost_usd"]))],
            ticks, axis_title="USD", fmt=_usd_format(float(daily["cost_usd"].max())), integer=False, width=510,
            height=240)
    return charts


def _usd_format(top: float) -> str:
    """Enough decimals to tell the axis ticks apart: $0.10, $0.015, $0.0004."""
    decimals = 2 if top >= 0.1 else 3 if top >= 0.01 else 4
    return "${:,.%df}" % decimals


def _tables(dec: pd.DataFrame, oq: pd.DataFrame, cm: pd.DataFrame, fail: pd.DataFrame, entities: pd.DataFrame,
            daily: pd.DataFrame, tenant: str | None) -> dict[str, list[dict[str, Any]]]:
    def who(r: dict[str, Any]) -> str:
        return r["user_id"] if tenant else f"{r['tenant_id']} / {r['user_id']}"

    decisions = [{"date": r["decided_at"].date().isoformat(), "user": who(r), "what": r["what"],
                  "topics": ", ".join(r["topic_tags"] or []), "session": r["session_id"]}
                 for r in dec.head(DECISION_ROWS).to_dict("records")]
    still_open = oq[oq["status"] == "open"].sort_values("days_open", ascending=False) if not oq.empty else oq
    questions = [{"raised": r["raised_at"].date().isoformat(), "user": who(r), "question": r["question"],
                  "days": int(r["days_open"])} for r in still_open.head(10).to_dict("records")]
    overdue = cm[cm["status"] == "overdue"].sort_values("days_overdue", ascending=False) if not cm.empty else cm
    commitments = [{"due": r["due"].isoformat(), "user": who(r), "what": r["what"], "days": int(r["days_overdue"])}
                   for r in overdue.head(10).to_dict("records")]
    failures = [{"when": r["failed_at"].strftime("%Y-%m-%d %H:%M") if pd.notna(r["failed_at"]) else "",
                 "source": r["source"].replace("_", " "), "user": who(r), "session": _text(r["session_id"]),
                 "detail": _text(r["outcome"]) or _attempts(r["attempts"]),
                 "error": _text(r["error"])[:240]}
                for r in fail.head(FAILURE_ROWS).to_dict("records")]
    days = [{"day": f"{r['day']:%Y-%m-%d}", "calls": int(r["calls"]), "failed": int(r["failed_calls"]),
             "input": int(r["input_tokens"]), "output": int(r["output_tokens"]),
             "cached": int(r["cache_read_tokens"]), "cost": float(r["cost_usd"])}
            for r in daily.sort_values("day", ascending=False).head(DAY_ROWS).to_dict("records")]
    return {"decisions": decisions, "questions": questions, "overdue": commitments, "failures": failures,
            "entities": entities.to_dict("records"), "days": days}


def _attempts(value: object) -> str:
    if _text(value) == "":
        return ""
    n = int(float(str(value)))
    return f"{n} attempt{'s' if n != 1 else ''}"


def _text(value: object) -> str:
    """A cell as text: missing values (None, NaN, NaT) become empty."""
    return "" if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)) else str(value)


# -- rendering -----------------------------------------------------------------------------------


def _load_template(name: str) -> str:
    path = reports_dir() / name
    if not path.is_file():
        raise jinja2.TemplateNotFound(name)
    return path.read_text(encoding="utf-8")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FunctionLoader(_load_template), undefined=jinja2.StrictUndefined,
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda v: f"{int(v):,}"
    env.filters["usd"] = lambda v: f"${float(v):,.2f}" if float(v) >= 1 else f"${float(v):.4f}"
    env.filters["compact"] = _compact
    return env


def _compact(value: float) -> str:
    """1234 -> 1.2k, 3400000 -> 3.4M: for the key-number cards."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}".replace(".0", "")
    return f"{int(value):,}"


def render_html(report: Report) -> str:
    return environment().get_template(TEMPLATE).render(
        report=report, summary=report.data["summary"], data=report.data, charts=report.charts,
        tables=report.tables, decision_rows=DECISION_ROWS, day_rows=DAY_ROWS,
    )


def report_filename(tenant: str | None) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", tenant) if tenant else "all-tenants"
    return f"episodes-report-{safe}.html"


def write_report(db: Database, out_dir: Path, *, tenant: str | None = None, since: dt.date | None = None) -> Path:
    """Build the report and write it as one HTML file in ``out_dir``; return its path."""
    report = build_report(db, tenant=tenant, since=since)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / report_filename(tenant)
    path.write_text(render_html(report), encoding="utf-8")
    return path
