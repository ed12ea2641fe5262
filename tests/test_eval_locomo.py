"""`episodes eval locomo`: evidence parsing, the figures on a synthetic pair, an oracle run on LoCoMo."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from conftest import LOCOMO, NO_LOCOMO

from jobs import config
from jobs.cli import cli
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.eval.answers import content_words, covers
from jobs.eval.locomo import build_oracle, evaluate, evaluate_budgets, load_conversation, oracle_extraction
from jobs.eval.locomo_report import format_report
from jobs.models import search_text
from jobs.recall import RecallConfig

KEYS = {
    "all_evidence_recall",
    "any_evidence_recall",
    "mean_block_tokens",
    "p95_block_tokens",
    "per_category",
    "baselines",
    "all_evidence_recall_full_text",
    "all_evidence_recall_strict",
    "answer_coverage",
    "foreign_questions",
    "foreign_relevant_share",
    "foreign_mean_relevant_tokens",
    "baseline_answer_coverage",
    "answer_coverage_ratio",
    "per_conversation",
}


def test_malformed_evidence_is_skipped_and_counted(tmp_path: Path) -> None:
    turns = [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]
    data = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1": turns,
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1_summary": "A said hi.",
        "session_2": turns,
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2_summary": "B said hi.",
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


def _conversation(path: Path, speaker: str, summaries: list[str], qa: list[dict[str, object]]) -> Path:
    """A LoCoMo-shaped file: one session a day from 1 May 2023, each with a reference summary."""
    data: dict[str, object] = {"speaker_a": speaker, "speaker_b": "Agent", "qa": qa}
    for n, summary in enumerate(summaries, 1):
        data[f"session_{n}"] = [{"speaker": speaker, "dia_id": f"D{n}:1", "text": summary}]
        data[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
        data[f"session_{n}_summary"] = summary
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def pair(tmp_path: Path) -> list[Path]:
    """Two users with nothing in common: a cook and a cyclist."""
    cook = _conversation(
        tmp_path / "cook.json",
        "Ana",
        [
            "Ana baked a vegetarian lasagna with spinach and ricotta for her sister's birthday dinner.",
            "Ana tried a sourdough starter and fed it rye flour every morning.",
            "Ana planned a Sicilian menu with caponata and cannoli for a dinner party.",
        ],
        [
            {
                "question": "What lasagna did Ana bake for her sister?",
                "answer": "a vegetarian lasagna with spinach",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "What flour does Ana feed her sourdough starter?",
                "answer": "rye flour",
                "evidence": ["D2:1"],
                "category": 4,
            },
        ],
    )
    cyclist = _conversation(
        tmp_path / "cyclist.json",
        "Bo",
        [
            "Bo replaced the chain and cassette of his gravel bike before the Alpine tour.",
            "Bo rode the Stelvio pass and logged 2,700 metres of climbing.",
        ],
        [
            {
                "question": "Which pass did Bo ride on his bike?",
                "answer": "the Stelvio pass",
                "evidence": ["D2:1"],
                "category": 4,
            },
        ],
    )
    return [cook, cyclist]


def test_answer_coverage_words() -> None:
    assert content_words("By dancing, of course!") == {"dancing", "course"}
    assert covers("<b>Ana danced, of course.</b>", content_words("by dancing")) is False
    assert covers("they went dancing (of course)", content_words("By dancing, of course!")) is True
    assert covers("anything", content_words("to the")) is False  # no content word: never covered


def test_foreign_questions_and_strict_recall(db: Database, embedder: Embedder, pair: list[Path]) -> None:
    conversations = [load_conversation(p) for p in pair]
    assert build_oracle(db, conversations, embedder) == 5
    report = evaluate(db, conversations, embedder, budget_tokens=1500)
    assert report["questions"] == 3 and report["foreign_questions"] == 3  # 2 asked of Bo, 1 of Ana
    # A tiny history fits: every evidence session is in the block and every answer's words are there. The oracle's
    # episodes keep their sessions' lines (issue 47), so they are shown by a header above their quotes; only the
    # best one leads with its summary in full (full_headers): 2 of the 3 questions' evidence is not "strictly" shown.
    assert report["all_evidence_recall"] == 1.0
    assert report["all_evidence_recall_strict"] == 0.6667
    assert report["all_evidence_recall_strict"] == report["all_evidence_recall_full_text"]
    assert report["answer_coverage"] == 1.0
    # A budget too small for full summaries: the evidence is there as compact lines only, not strictly.
    tight = evaluate(db, conversations, embedder, budget_tokens=150)  # 200 holds all three in full since 8728bed
    assert tight["all_evidence_recall"] > tight["all_evidence_recall_strict"]
    # Nothing may be labelled relevant (top_k=0): every foreign block is silent and spends nothing on it.
    silent = evaluate(db, conversations, embedder, config=RecallConfig(top_k=0))
    assert silent["foreign_relevant_share"] == 0.0 and silent["foreign_mean_relevant_tokens"] == 0.0
    assert silent["foreign_mean_block_tokens"] > 0  # recent lines are still shown
    # No floor, for episodes nor for their lines (an episode whose lines are all far from the message is only
    # possibly related: the oracle's episodes keep lines since issue 47).
    noisy = evaluate(
        db, conversations, embedder, config=RecallConfig(relevant_similarity=-1.0, relevant_line_similarity=-1.0)
    )
    assert noisy["foreign_relevant_share"] == 1.0 and noisy["foreign_mean_relevant_tokens"] > 0
    table = format_report({**report, "extractor": "oracle", "episodes": 5, "sessions": 5, "seconds": 0.0})
    assert "strict" in table and "foreign questions 3" in table


def test_raw_baseline_beside_the_block(db: Database, embedder: Embedder, pair: list[Path]) -> None:
    """The raw-message baseline reads the ingested sessions; the table shows it, the ratio, per conversation."""
    from jobs.eval.locomo import RAW_TENANT, ingest_raw

    conversations = [load_conversation(p) for p in pair]
    build_oracle(db, conversations, embedder)
    without = evaluate(db, conversations, embedder, raw_tenant=RAW_TENANT)
    assert without["baseline_answer_coverage"] == 0.0 and without["answer_coverage_ratio"] is None
    ingest_raw(db, pair)
    report = evaluate(db, conversations, embedder, raw_tenant=RAW_TENANT)
    assert report["answer_coverage"] == report["baseline_answer_coverage"] == 1.0  # the turns hold the answers
    assert report["answer_coverage_ratio"] == 1.0
    assert set(report["per_conversation"]) == {"cook", "cyclist"}
    assert report["per_conversation"]["cyclist"]["questions"] == 1
    assert report["per_category"]["4"]["baseline_answer_coverage"] == 1.0
    # A budget of one short line: the block's frame leaves no room for the answer, the baseline's line fits.
    tight = evaluate(db, conversations, embedder, raw_tenant=RAW_TENANT, budget_tokens=30)
    assert tight["baseline_answer_coverage"] > tight["answer_coverage"]
    full = {**report, "extractor": "oracle", "episodes": 5, "sessions": 5, "seconds": 0.0}
    table = format_report(full, per_conversation=True).splitlines()
    header = next(line for line in table if line.split()[:2] == ["n", "all-ev"]).split()
    assert header[4:8] == ["answer", "raw", "dated", "ratio"]
    overall = next(line for line in table if line.startswith("recall (defaults)")).split()
    assert overall[-7:-3] == ["1.000", "1.000", "1.000", "1.00"]  # answer, raw, dated, ratio
    assert any(line.startswith("  conversation cyclist") for line in table)
    assert "conversation cyclist" not in format_report(full)


def test_dated_baseline_and_several_budgets(db: Database, embedder: Embedder, pair: list[Path]) -> None:
    """Both raw-message baselines at each budget, side by side; the ratio is to the better of the two."""
    from jobs.eval.locomo import RAW_TENANT, ingest_raw

    conversations = [load_conversation(p) for p in pair]
    build_oracle(db, conversations, embedder)
    ingest_raw(db, pair)
    report = evaluate_budgets(db, conversations, embedder, [1500, 22], raw_tenant=RAW_TENANT)
    assert report["budgets"] == [1500, 22] and set(report["by_budget"]) == {"1500", "22"}
    assert (
        report["budget_tokens"] == 1500 and report["answer_coverage"] == report["by_budget"]["1500"]["answer_coverage"]
    )
    wide, tight = report["by_budget"]["1500"], report["by_budget"]["22"]
    assert wide["dated_baseline_answer_coverage"] == 1.0
    # 22 tokens (88 characters) hold one or two short lines; with the 13 characters of a date, other lines fit.
    assert tight["baseline_answer_coverage"] == pytest.approx(1 / 3, abs=1e-3)
    assert tight["dated_baseline_answer_coverage"] == pytest.approx(2 / 3, abs=1e-3)
    assert tight["better_baseline"] == "dated" and tight["answer_coverage"] == 0.0
    assert tight["answer_coverage_ratio"] == 0.0 and tight["undated_ratio"] == 0.0
    table = format_report(
        {**report, "extractor": "oracle", "episodes": 5, "sessions": 5, "seconds": 0.0}, per_conversation=True
    )
    assert "budget 1500 tokens" in table and "budget 22 tokens" in table
    side = table[table.index("answer coverage by budget") :].splitlines()
    assert "1500 tokens" in side[1] and "22 tokens" in side[1]
    overall = next(line for line in side if line.startswith("recall (defaults)")).split()
    # answer raw dated ratio all-ev, at 1500 then at 22
    assert overall[2:8] == ["|", "1.000", "1.000", "1.000", "1.00", "1.000"]
    assert overall[8:13] == ["|", "0.000", "0.333", "0.667", "0.00"]


def test_the_ratio_is_to_the_better_baseline() -> None:
    from jobs.eval.tally import Coverage

    words = content_words("rye flour")
    cov = Coverage()
    for block, undated, dated in [
        ("rye flour", "rye flour", "rye flour"),
        ("rye flour", "", "rye flour"),
        ("", "", "rye flour"),
        ("", "rye", "- [2 May 2023] rye"),
    ]:
        cov.add(words, block, undated, dated)
    cov.add(frozenset(), "x", "x", "x")  # no content word: left out of every share
    summary = cov.summary()
    assert summary["answer_coverage"] == 0.5 and summary["baseline_answer_coverage"] == 0.25
    assert summary["dated_baseline_answer_coverage"] == 0.75 and summary["better_baseline"] == "dated"
    assert summary["answer_coverage_ratio"] == 0.667 and summary["undated_ratio"] == 2.0
    assert Coverage().summary()["answer_coverage_ratio"] is None


@pytest.mark.skipif(not (LOCOMO / "30.json").is_file(), reason=NO_LOCOMO)
def test_eval_locomo_oracle_json(settings: config.Settings, admin_url: str, embedder: Embedder) -> None:
    result = CliRunner().invoke(cli, ["eval", "locomo", str(LOCOMO / "30.json"), "--json", "--budgets", "1500,750"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # logs go to stderr
    assert KEYS <= set(report) and set(report["by_budget"]) == {"1500", "750"}
    conv = load_conversation(LOCOMO / "30.json")
    # Two yardsticks computed here from the file: the 8 latest sessions, and the 8 whose reference episode's text
    # is closest to the question (one oracle episode per session). Recall, within its budget, finds the evidence
    # of more questions than either, at both budgets.
    latest = set(sorted(conv.sessions, key=lambda n: conv.sessions[n].when)[-8:])
    order = sorted(conv.sessions)
    texts = [search_text(oracle_extraction(conv.sessions[n])) for n in order]
    episode_vectors = np.asarray(embedder.embed(texts))
    question_vectors = np.asarray(embedder.embed([q.text for q in conv.questions]))
    top8 = [{order[i] for i in np.argsort(-(episode_vectors @ v), kind="stable")[:8]} for v in question_vectors]
    n = len(conv.questions)
    last_8 = sum(q.sessions <= latest for q in conv.questions) / n
    vector_8 = sum(q.sessions <= top for q, top in zip(conv.questions, top8)) / n
    assert report["questions"] == n and 0 < last_8 < vector_8
    for r in report["by_budget"].values():
        assert r["all_evidence_recall"] > vector_8
        assert r["all_evidence_recall"] <= r["any_evidence_recall"]
        assert 0 < r["mean_block_tokens"] <= r["p95_block_tokens"] <= r["budget_tokens"]
    assert set(report["per_category"]) <= {"1", "2", "3", "4"}
    assert report["extractor"] == "oracle" and report["episodes"] == 19
    assert report["baseline_answer_coverage"] > 0.3  # the oracle path ingests the turns for it
    assert set(report["per_conversation"]) == {"30"}
    assert "tuning data" in report["data_status"]
    with psycopg.connect(admin_url) as conn:  # the scratch database is gone
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'episodes_eval_%'").fetchone()
    assert left == (0,)


def test_compression_beside_the_uncompressed_figures(db: Database, embedder: Embedder, tmp_path: Path) -> None:
    """Months ended more than 30 days before the last session become super-summaries (the real compress job, offline);
    the report sets answer coverage compressed beside uncompressed, and a super stands for its sessions."""
    from jobs.eval.compression import compare, compress_histories, compressed_sources

    sessions = [
        ("1 May, 2023", "Ana baked a vegetarian lasagna with spinach and ricotta for her sister's birthday dinner."),
        ("9 May, 2023", "Ana tried a sourdough starter and fed it rye flour every morning."),
        ("2 June, 2023", "Ana planned a Sicilian menu with caponata and cannoli for a dinner party."),
        ("20 June, 2023", "Ana bought a cast iron skillet and seasoned it with flaxseed oil."),
        ("3 July, 2023", "Ana started a herb garden with basil, thyme and rosemary on her balcony."),
        ("10 September, 2023", "Ana signed up for a knife skills class at the community kitchen."),
    ]
    data: dict[str, object] = {"speaker_a": "Ana", "speaker_b": "Agent"}
    for n, (day, text) in enumerate(sessions, 1):
        data[f"session_{n}"] = [{"speaker": "Ana", "dia_id": f"D{n}:1", "text": text}]
        data[f"session_{n}_date_time"] = f"1:00 pm on {day}"
        data[f"session_{n}_summary"] = text
    data["qa"] = [
        {
            "question": "What flour does Ana feed her sourdough starter?",
            "answer": "rye flour",
            "evidence": ["D2:1"],
            "category": 4,
        },
        {
            "question": "What oil did Ana season her skillet with?",
            "answer": "flaxseed oil",
            "evidence": ["D4:1"],
            "category": 4,
        },
        {"question": "Which class did Ana sign up for?", "answer": "knife skills", "evidence": ["D6:1"], "category": 4},
    ]
    path = tmp_path / "ana.json"
    path.write_text(json.dumps(data))
    conversations = [load_conversation(path)]
    build_oracle(db, conversations, embedder)
    plain = evaluate_budgets(db, conversations, embedder, [1500])
    counts = compress_histories(db, "locomo", conversations, embedder)
    # The cut-off is 11 August: May, June and July have ended before it; July holds one session, which stays.
    assert counts == {
        "sessions": 6,
        "sessions_older_than_30_days": 5,
        "sessions_compressed": 4,
        "supers": 2,
        "failed": 0,
    }
    sources = compressed_sources(db, "locomo")
    assert sorted(sorted(v) for v in sources.values()) == [["ana-s1", "ana-s2"], ["ana-s3", "ana-s4"]]
    packed = evaluate_budgets(db, conversations, embedder, [1500], sources=sources)
    side = compare(plain, packed)["1500"]
    assert side["uncompressed"] == 1.0 and side["all_evidence_uncompressed"] == 1.0
    # The offline compressor's supers keep the sessions' summaries: the facts and the evidence are still there.
    assert side["compressed"] == 1.0 and side["ratio"] == 1.0 and side["all_evidence_compressed"] == 1.0
    # Without the super -> sessions map, a super counts as no evidence session.
    blind = evaluate_budgets(db, conversations, embedder, [1500])
    assert blind["all_evidence_recall"] == pytest.approx(1 / 3, abs=1e-3)
    table = format_report(
        {
            **plain,
            "extractor": "oracle",
            "episodes": 6,
            "sessions": 6,
            "seconds": 0.0,
            "compression": {**counts, "by_budget": compare(plain, packed)},
        }
    )
    assert "4 of 5 such sessions (of 6) compressed into 2 super-summaries" in table
