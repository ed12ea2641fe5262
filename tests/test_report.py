"""`episodes report`: the numbers on the page equal direct SQL, scoping holds, the page is
self-contained and renders in headless Chromium without console errors."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.analyst_examples import owner

from jobs.concepts import EVENT_TYPES
from jobs.db import Database
from jobs.report import build_report, render_html, write_report
from jobs.report.data import count_column

CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


def page_data(html: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.DOTALL)
    assert match, "the page embeds no #report-data"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def kpi(html: str, key: str) -> str:
    match = re.search(rf'data-key="{key}"[^>]*>([^<]*)<', html)
    assert match, key
    return match.group(1)


SESSION_EPISODES = "FROM episodes e WHERE e.status = 'current' AND e.kind = 'session' AND {scope}"
EVENTS = (
    "FROM episode_events ev JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id "
    "WHERE e.status = 'current' AND e.kind = 'session' AND {scope}"
)


def expected(db: Database, tenant: str | None = None, since: dt.date | None = None) -> dict[str, Any]:
    """The report's numbers computed straight from the base tables, as the owner."""
    start = dt.datetime.combine(since, dt.time(), tzinfo=dt.UTC) if since else dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    p = {"tenant": tenant, "start": start}
    scope = "(%(tenant)s::text IS NULL OR e.tenant_id = %(tenant)s) AND e.ended_at >= %(start)s"
    ev_scope = "(%(tenant)s::text IS NULL OR e.tenant_id = %(tenant)s) AND ev.occurred_at >= %(start)s"
    mc_scope = (
        "(%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) "
        "AND (created_at AT TIME ZONE 'UTC')::date >= (%(start)s::timestamptz AT TIME ZONE 'UTC')::date"
    )
    one = owner(
        db,
        f"""
        SELECT (SELECT count(*) {SESSION_EPISODES.format(scope=scope)}) AS episodes,
               (SELECT count(DISTINCT (e.tenant_id, e.user_id)) {SESSION_EPISODES.format(scope=scope)}) AS users,
               (SELECT count(*) {EVENTS.format(scope=ev_scope)} AND ev.type = 'decision') AS decisions,
               (SELECT count(*) {EVENTS.format(scope=ev_scope)} AND ev.type = 'open_question'
                  AND ev.status = 'open') AS open_questions,
               (SELECT count(*) {EVENTS.format(scope=ev_scope)} AND ev.type = 'commitment' AND ev.status = 'open'
                  AND ev.due < (now() AT TIME ZONE 'UTC')::date) AS commitments_overdue,
               (SELECT coalesce(sum(input_tokens), 0) FROM model_calls WHERE {mc_scope}) AS input_tokens,
               (SELECT coalesce(sum(output_tokens), 0) FROM model_calls WHERE {mc_scope}) AS output_tokens,
               (SELECT coalesce(sum(cost_usd), 0)::float FROM model_calls WHERE {mc_scope}) AS cost_usd,
               (SELECT count(*) FROM model_calls WHERE {mc_scope} AND outcome <> 'ok') AS failed_model_calls,
               (SELECT count(*) FROM transcripts WHERE status = 'dead'
                  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)) AS dead_letters""",
        p,
    )[0]
    weeks = owner(
        db,
        f"SELECT date_trunc('week', e.ended_at AT TIME ZONE 'UTC')::date AS week, count(*) AS n "
        f"{SESSION_EPISODES.format(scope=scope)} GROUP BY 1",
        p,
    )
    # Preferences and facts are not counted by analyst.episode_timeline, so not charted (tests/test_concepts.py
    # ties the chart to the view's count columns).
    months = owner(
        db,
        f"SELECT to_char(e.ended_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month, ev.type, count(*) AS n "
        f"{EVENTS.format(scope=scope)} AND ev.type NOT IN ('preference', 'fact') GROUP BY 1, 2",
        p,
    )
    tagged = SESSION_EPISODES.replace("FROM episodes e", "FROM episodes e, unnest(e.topic_tags) tag")
    topics = owner(
        db, f"SELECT tag, count(*) AS n {tagged.format(scope=scope)} GROUP BY tag ORDER BY n DESC, tag LIMIT 12", p
    )
    days = owner(
        db,
        f"SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS calls, "
        f"sum(input_tokens) AS input_tokens, sum(cost_usd)::float AS cost FROM model_calls "
        f"WHERE {mc_scope} GROUP BY 1",
        p,
    )
    one["weeks"] = {r["week"].isoformat(): r["n"] for r in weeks}
    one["months"] = {(r["month"], r["type"]): r["n"] for r in months}
    one["topics"] = [(r["tag"], r["n"]) for r in topics]
    one["days"] = {r["day"].isoformat(): (r["calls"], r["input_tokens"], round(r["cost"], 6)) for r in days}
    return one


def check(data: dict[str, Any], want: dict[str, Any]) -> None:
    s = data["summary"]
    for key in (
        "episodes",
        "users",
        "decisions",
        "open_questions",
        "commitments_overdue",
        "input_tokens",
        "output_tokens",
        "failed_model_calls",
        "dead_letters",
    ):
        assert s[key] == want[key], key
    assert s["cost_usd"] == pytest.approx(want["cost_usd"], abs=1e-6)
    weeks = data["episodes_per_week"]
    assert {w["week"]: w["episodes"] for w in weeks if w["episodes"]} == want["weeks"]
    starts = [dt.date.fromisoformat(w["week"]) for w in weeks]
    gaps = {(b - a).days for a, b in itertools.pairwise(starts)}
    assert gaps <= {7}, "weeks must be contiguous, empty weeks included"
    columns = {t: count_column(t) for t in EVENT_TYPES}
    got = {(m["month"], t): m[col] for m in data["events_by_month"] for t, col in columns.items() if m.get(col)}
    assert got == want["months"]
    assert [(t["topic"], t["episodes"]) for t in data["top_topics"]] == want["topics"]
    assert {d["day"]: (d["calls"], d["input_tokens"], d["cost_usd"]) for d in data["cost_per_day"]} == want["days"]
    assert sum(b["open"] for b in data["open_question_aging"]) == want["open_questions"]


def test_report_numbers_match_sql_across_tenants(ro_db: Database, tmp_path: Path) -> None:
    path = write_report(ro_db, tmp_path)
    html = path.read_text(encoding="utf-8")
    data = page_data(html)
    want = expected(ro_db)
    check(data, want)
    assert want["episodes"] == 34 and want["dead_letters"] == 1 and want["days"] and want["decisions"] > 0
    assert kpi(html, "episodes") == str(want["episodes"]) and kpi(html, "dead_letters") == "1"
    assert kpi(html, "decisions") == f"{want['decisions']:,}"
    assert html.count('<tr class="decision">') == min(want["decisions"], 200)
    assert (
        html.count('<tr class="failure">')
        == data["summary"]["dead_letters"] + data["summary"]["retrying"] + data["summary"]["failed_model_calls"]
    )
    assert "acme / u-maria" in html and "globex / u-sam" in html


def test_report_for_one_tenant_since_a_date(ro_db: Database, tmp_path: Path) -> None:
    since = dt.date(2025, 1, 1)
    path = write_report(ro_db, tmp_path, tenant="acme", since=since)
    assert path.name == "episodes-report-acme.html"
    html = path.read_text(encoding="utf-8")
    data = page_data(html)
    assert data["scope"] == {"tenant": "acme", "since": "2025-01-01"}
    want = expected(ro_db, "acme", since)
    check(data, want)
    assert 0 < want["episodes"] < 22
    assert all(w["week"] >= "2024-12-30" for w in data["episodes_per_week"])
    assert "globex" not in html and "u-sam" not in html and "u-priya" not in html and "u-lena" not in html


def test_empty_database_renders_an_empty_report(db: Database) -> None:
    html = render_html(build_report(db, now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)))
    data = page_data(html)
    assert data["summary"]["episodes"] == 0 and data["episodes_per_week"] == [] and data["cost_per_day"] == []
    assert "No decisions recorded." in html and "No sessions" in html


def test_page_is_self_contained_and_escapes_what_it_shows(edb: Database) -> None:
    with edb.tenant("acme") as conn:
        conn.execute(
            "UPDATE episode_events SET what = 'Chose <script>alert(1)</script> & </script> plan' "
            "WHERE tenant_id = 'acme' AND id = (SELECT min(id) FROM episode_events "
            "WHERE tenant_id = 'acme' AND type = 'decision')"
        )
        conn.execute("UPDATE episodes SET topic_tags = ARRAY['</script><b>x'] WHERE tenant_id = 'acme'")
    html = render_html(build_report(edb))
    assert "<script>alert" not in html and "Chose &lt;script&gt;alert(1)&lt;/script&gt; &amp;" in html
    assert html.count("<script") == 1 and html.count("</script>") == 1  # only the JSON block
    assert "</script><b>x" in [t["topic"] for t in page_data(html)["top_topics"]]
    assert not re.search(r"https?://|\b(?:src|href)\s*=|url\(|@import|<link|<img|<iframe", html, re.IGNORECASE)
    assert "default-src 'none'" in html


def test_cli_report_writes_one_file(edb: Database, tmp_path: Path) -> None:
    from jobs.cli import Context
    from jobs.cli.report import report_command

    ctx = Context(verbose=False)
    try:
        result = CliRunner().invoke(
            report_command, ["--tenant", "globex", "--since", "2024-01-01", "--out", str(tmp_path / "out")], obj=ctx
        )
    finally:
        ctx.close()
    assert result.exit_code == 0, result.output
    files = list((tmp_path / "out").iterdir())
    assert [f.name for f in files] == ["episodes-report-globex.html"]
    assert result.stdout.strip() == f"wrote {files[0]}"
    assert page_data(files[0].read_text(encoding="utf-8"))["scope"]["tenant"] == "globex"
    bad = CliRunner().invoke(report_command, ["--since", "last week", "--out", str(tmp_path)], obj=ctx)
    assert bad.exit_code == 2 and "last week" in bad.output


@pytest.mark.slow  # headless Chromium
@pytest.mark.skipif(
    not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None,
    reason=f"{CHROMIUM} is not installed (apt-get install chromium); the browser check needs it",
)
def test_page_renders_in_headless_chromium_without_console_errors(ro_db: Database, tmp_path: Path) -> None:
    page = write_report(ro_db, tmp_path / "out")
    shot = tmp_path / "report.png"
    base = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    shown = subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1280, 2000)
    assert len(png) > 50_000  # a blank page compresses to a few kB
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0
    assert dom.stdout.count("<svg") >= 5 and 'id="report-data"' in dom.stdout and "Episodes per week" in dom.stdout
