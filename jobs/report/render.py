"""Rendering a :class:`~jobs.report.build.Report` as one self-contained HTML file
(``reports/report.html.j2``, Jinja2 with autoescape and StrictUndefined)."""

from __future__ import annotations

import datetime as dt
import re
from functools import cache
from pathlib import Path

import jinja2

from jobs.db import Database
from jobs.report.build import DAY_ROWS, DECISION_ROWS, Report, build_report
from jobs.resources import reports_dir

TEMPLATE = "report.html.j2"


def _load_template(name: str) -> str:
    path = reports_dir() / name
    if not path.is_file():
        raise jinja2.TemplateNotFound(name)
    return path.read_text(encoding="utf-8")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
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
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            report=report,
            summary=report.data["summary"],
            data=report.data,
            charts=report.charts,
            tables=report.tables,
            decision_rows=DECISION_ROWS,
            day_rows=DAY_ROWS,
        )
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
