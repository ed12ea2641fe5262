"""`episodes eval locomo`: evidence parsing, and an oracle run on one LoCoMo conversation."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from conftest import LOCOMO

from jobs import config
from jobs.cli import cli
from jobs.eval.locomo import load_conversation

KEYS = {"all_evidence_recall", "any_evidence_recall", "mean_block_tokens", "p95_block_tokens", "per_category",
        "baselines"}


def test_malformed_evidence_is_skipped_and_counted(tmp_path: Path) -> None:
    turns = [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]
    data = {
        "speaker_a": "A", "speaker_b": "B",
        "session_1": turns, "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1_summary": "A said hi.",
        "session_2": turns, "session_2_date_time": "2:00 pm on 9 May, 2023", "session_2_summary": "B said hi.",
        "session_3_date_time": "3:00 pm on 10 May, 2023",  # a date without a session: ignored
        "qa": [
            {"question": "q1", "answer": "a", "evidence": ["D1:1", "D2:3"], "category": 1},
            {"question": "q2", "answer": "a", "evidence": ["D:11:26", "D10:", "D"], "category": 2},
            {"question": "q3", "answer": "a", "evidence": ["D1:2; D2:1"], "category": 4},
            {"question": "q4", "answer": "a", "evidence": ["D9:1"], "category": 3},
            {"question": "q5", "evidence": ["D1:1"], "category": 5},
        ],
    }
    path = tmp_path / "7.json"
    path.write_text(json.dumps(data))
    conv = load_conversation(path)
    assert sorted(conv.sessions) == [1, 2] and conv.user_id == "locomo-7"
    assert [(q.text, sorted(q.sessions)) for q in conv.questions] == [("q1", [1, 2]), ("q3", [1, 2])]
    assert conv.malformed_evidence == 4  # three malformed, one naming a session that does not exist
    assert conv.unusable_questions == 2


@pytest.mark.skipif(not LOCOMO.is_dir(), reason="LoCoMo data not present in ../shared/data/locomo")
def test_eval_locomo_oracle_json(settings: config.Settings, admin_url: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "locomo", str(LOCOMO / "30.json"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # logs go to stderr
    assert KEYS <= set(report)
    for key in ("all_evidence_recall", "any_evidence_recall"):
        assert 0.0 <= report[key] <= 1.0
    assert report["all_evidence_recall"] <= report["any_evidence_recall"]
    assert 0 < report["mean_block_tokens"] <= report["p95_block_tokens"] <= 1500
    assert set(report["per_category"]) <= {"1", "2", "3", "4"}
    for name in ("last_8", "vector_top_8", "vector_within_budget"):
        assert 0.0 <= report["baselines"][name]["all_evidence_recall"] <= 1.0
    assert report["extractor"] == "oracle" and report["episodes"] == 19
    with psycopg.connect(admin_url) as conn:  # the scratch database is gone
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'episodes_eval_%'").fetchone()
    assert left == (0,)
