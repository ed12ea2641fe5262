"""Amended decisions end to end with the offline extractor (issue 36): our own set of amendment sessions
(tests/data/amendments/cases.json), one per common way a coding chat amends an earlier rule in a later session
("From now on ...", "Change of plan: ...", "X is deprecated; use Y", "The limit is now N (was M)", an
assistant's proposal the user confirms, a change of a number only, ...).

Each case is a user with three unrelated sessions, session 1 stating a rule (often beside an unrelated decision), and
session 2 a month later amending the rule; both summarised by the real summarize job with the offline
extractor, then recalled with a question about the rule. For each case:

- *extracted*: session 2 has a decision event holding the amended rule's specific (``new``);
- *linked*: that event supersedes session 1's rule (the event holding ``old``), and nothing else;
- *holds*: the block shows session 2's episode and the amended specific, and session 1's episode is absent or
  marked replaced (the same test as ``episodes eval coding``'s "latest rule holds").

Controls decide something unrelated in session 2 (with a change cue, or with the same numbers): nothing is
superseded. The set was written for these rules, not taken from sde-bench; it is the tuning data of the
amendment rules in jobs/extract/replacements.py.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.prompts import inert
from jobs.recall import Recaller
from jobs.summarize import run_summarize

HERE = Path(__file__).parent / "data" / "amendments"
DATA = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = DATA["cases"]
# Written after the rules were chosen on CASES and run once to check them; never tuned on.
CHECK: list[dict[str, Any]] = json.loads((HERE / "check.json").read_text(encoding="utf-8"))["cases"]
T0 = dt.datetime(2026, 2, 2, 10, 0, tzinfo=dt.UTC)
TENANT = "acme"


def _add(db: Database, user: str, session: str, said: list[list[str]], start: dt.datetime) -> None:
    messages = [
        {"role": role, "content": text, "ts": (start + dt.timedelta(minutes=k)).isoformat()}
        for k, (role, text) in enumerate(said)
    ]
    with db.tenant(TENANT) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, content_hash) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (
                TENANT,
                user,
                session,
                start,
                start + dt.timedelta(minutes=len(said)),
                Jsonb(messages),
                f"h-{user}-{session}",
            ),
        )


def outcome(db: Database, embedder: Embedder, case: dict[str, Any]) -> dict[str, bool]:
    """The three checks of the module docstring for one case (a control's ``linked`` means nothing linked)."""
    user = case["id"]
    extractor = OfflineExtractor(embedder)
    for k, decoy in enumerate(DATA["decoys"]):
        _add(db, user, f"decoy-{k}", decoy, T0 - dt.timedelta(days=10 - k))
    _add(db, user, "rule", case["s1"], T0)
    run_summarize(db, extractor=extractor, embedder=embedder, tenant=TENANT)
    _add(db, user, "amendment", case["s2"], T0 + dt.timedelta(days=30))
    run_summarize(db, extractor=extractor, embedder=embedder, tenant=TENANT)
    with db.tenant(TENANT) as conn:
        events = conn.execute(
            "SELECT ev.id, ep.session_id, ev.what, ev.superseded_by FROM episode_events ev "
            "JOIN episodes ep ON ep.tenant_id = ev.tenant_id AND ep.id = ev.episode_id "
            "WHERE ev.user_id = %s AND ev.type = 'decision' AND ep.status = 'current'",
            (user,),
        ).fetchall()
    new = [e for e in events if e["session_id"] == "amendment" and case["new"] in e["what"]]
    superseded = [e for e in events if e["superseded_by"] is not None]
    if case.get("control"):
        linked = not superseded
    else:
        linked = bool(new) and [(e["session_id"], e["superseded_by"]) for e in superseded] == [("rule", new[0]["id"])]
        linked = linked and case["old"] in superseded[0]["what"]
    result = Recaller(db, embedder).recall(TENANT, user, case["question"], now=T0 + dt.timedelta(days=31))
    shown = {ep.session_id: ep for ep in result.episodes if ep.session_id}
    old = shown.get("rule")
    holds = (
        "amendment" in shown and inert(case["new"]) in result.render() and (old is None or old.replaced_on is not None)
    )
    return {"extracted": bool(new), "linked": linked, "holds": holds or bool(case.get("control"))}


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    """One parameter per case; a case the rules are known to miss (its ``miss`` says why) is a strict xfail."""
    return [
        pytest.param(c, id=c["id"], marks=[pytest.mark.xfail(strict=True, reason=c["miss"])] if "miss" in c else [])
        for c in cases
    ]


@pytest.mark.parametrize("case", _params(CASES))
def test_an_amendment_in_a_later_session_holds(db: Database, embedder: Embedder, case: dict[str, Any]) -> None:
    result = outcome(db, embedder, case)
    assert result == {"extracted": True, "linked": True, "holds": True}, result


@pytest.mark.parametrize("case", _params(CHECK))
def test_an_amendment_of_the_check_set_holds(db: Database, embedder: Embedder, case: dict[str, Any]) -> None:
    result = outcome(db, embedder, case)
    assert result == {"extracted": True, "linked": True, "holds": True}, result


def test_the_sets_cover_the_common_phrasings_and_have_controls() -> None:
    ids = {c["id"] for c in CASES + CHECK}
    assert len(ids) == len(CASES) + len(CHECK) and len(CASES) >= 16
    assert sum(bool(c.get("control")) for c in CASES) >= 2 and any(c.get("control") for c in CHECK)
    for c in CASES + CHECK:
        said = " ".join(text for _, text in c["s2"])
        assert c["new"] in said and c["old"] in " ".join(text for _, text in c["s1"]), c["id"]


def test_an_amendment_after_many_later_decisions_still_replaces_the_rule(db: Database, embedder: Embedder) -> None:
    """The decisions offered to a session are the newest and the older ones closest to it: a rule stated before
    the user's last MAX_CURRENT_DECISIONS decisions is still offered, so its amendment months later links to it."""
    from jobs.models import MAX_CURRENT_DECISIONS

    user = "long-history"
    extractor = OfflineExtractor(embedder)
    _add(db, user, "rule", [["user", "Let's cap the webhook retries at 4 attempts with exponential backoff."]], T0)
    tools = ["Redis", "Kafka", "Grafana", "Terraform", "Sentry", "Vault", "Celery", "Nginx", "Prometheus", "Airflow"]
    parts = ["session store", "audit trail", "billing dashboard", "search page"]
    later = [(tool, part) for part in parts for tool in tools][: MAX_CURRENT_DECISIONS + 5]
    for k, (tool, part) in enumerate(later):
        _add(db, user, f"later-{k}", [["user", f"Let's use {tool} for the {part}."]], T0 + dt.timedelta(days=1 + k))
    run_summarize(db, extractor=extractor, embedder=embedder, tenant=TENANT)
    amend = "Change of plan: cap the webhook retries at 6 attempts."
    _add(db, user, "amendment", [["user", amend]], T0 + dt.timedelta(days=60))
    run_summarize(db, extractor=extractor, embedder=embedder, tenant=TENANT)
    with db.tenant(TENANT) as conn:
        rows = conn.execute(
            "SELECT ep.session_id, ev.what, nx.what AS by FROM episode_events ev "
            "JOIN episodes ep ON ep.tenant_id = ev.tenant_id AND ep.id = ev.episode_id "
            "LEFT JOIN episode_events nx ON nx.tenant_id = ev.tenant_id AND nx.id = ev.superseded_by "
            "WHERE ev.user_id = %s AND ev.type = 'decision' AND ev.superseded_by IS NOT NULL",
            (user,),
        ).fetchall()
    assert [(r["session_id"], "4 attempts" in r["what"], "6 attempts" in r["by"]) for r in rows] == [
        ("rule", True, True)
    ]
