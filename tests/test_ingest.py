"""Ingestion: good records load, bad ones are reported as file:line: reason, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LOCOMO, NO_LOCOMO

from jobs.db import Database, one
from jobs.ingest import ingest

# Python logic through the database: runs on one PostgreSQL only; the tests marked citus below are SQL shape.


def transcript(session: str = "s1", **overrides: object) -> dict[str, Any]:
    record: dict[str, Any] = {
        "tenant_id": "acme",
        "user_id": "u1",
        "session_id": session,
        "purpose": "support",
        "started_at": "2025-03-04T09:00:00Z",
        "ended_at": "2025-03-04T09:20:00Z",
        "messages": [
            {"role": "user", "content": "We'll go with the Team plan.", "ts": "2025-03-04T09:00:00Z"},
            {"role": "assistant", "content": "Great, switching you now.", "ts": "2025-03-04T09:01:00Z"},
        ],
    }
    record.update(overrides)
    return record


def write_jsonl(path: Path, lines: list[object]) -> Path:
    with path.open("wb") as handle:
        for line in lines:
            handle.write(line if isinstance(line, bytes) else json.dumps(line).encode())
            handle.write(b"\n")
    return path


def count(db: Database, where: str = "TRUE") -> int:
    with db.admin() as conn:
        return int(one(conn.execute(f"SELECT count(*) AS n FROM transcripts WHERE {where}"))["n"])


@pytest.mark.citus  # the insert's ON CONFLICT on the distributed table
def test_good_records_load_and_rerun_is_noop(db: Database, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [transcript("s1"), transcript("s2"), transcript("s3", ended_at=None)])
    first = ingest(db, [path])
    assert (first.inserted, first.updated, first.unchanged, first.rejected) == (3, 0, 0, [])
    second = ingest(db, [path])
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 3)
    assert count(db) == 3
    assert count(db, "ended_at IS NULL") == 1


@pytest.mark.citus  # the upsert that requeues
def test_changed_content_requeues_the_transcript(db: Database, tmp_path: Path) -> None:
    ingest(db, [write_jsonl(tmp_path / "a.jsonl", [transcript("s1")])])
    with db.admin() as conn:
        conn.execute("UPDATE transcripts SET status = 'done', attempts = 2")
    changed = transcript("s1")
    changed["messages"].append({"role": "user", "content": "Actually, make it Business."})
    report = ingest(db, [write_jsonl(tmp_path / "b.jsonl", [changed])])
    assert (report.inserted, report.updated) == (0, 1)
    with db.admin() as conn:
        row = conn.execute("SELECT status, attempts, message_count FROM transcripts").fetchone()
    assert row == {"status": "pending", "attempts": 0, "message_count": 3}


BAD_CASES = [
    ("missing field", {k: v for k, v in transcript("m").items() if k != "user_id"}, "missing field user_id"),
    ("unparseable time", transcript("t1", started_at="yesterday-ish"), "started_at"),
    ("ended before started", transcript("t2", ended_at="2025-03-04T08:00:00Z"), "is before started_at"),
    ("future time", transcript("t3", ended_at="2999-01-01T00:00:00Z"), "in the future"),
    ("no messages", transcript("t4", messages=[]), "messages"),
    ("empty messages", transcript("t5", messages=[{"role": "user", "content": "   "}]), "no message has any content"),
    ("bad role", transcript("t6", messages=[{"role": "robot", "content": "x"}]), "role"),
    ("not an object", [1, 2, 3], "not a JSON object"),
]


@pytest.mark.parametrize("label,record,reason", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_record_is_rejected_with_location_and_good_ones_load(
    db: Database, tmp_path: Path, label: str, record: object, reason: str
) -> None:
    path = write_jsonl(tmp_path / "mixed.jsonl", [transcript("good-1"), record, transcript("good-2")])
    report = ingest(db, [path])
    assert report.inserted == 2
    assert len(report.rejected) == 1
    assert str(report.rejected[0]).startswith(f"{path}:2: ")
    assert reason in report.rejected[0].reason
    assert count(db) == 2


def test_invalid_json_and_invalid_utf8_lines(db: Database, tmp_path: Path) -> None:
    good = json.dumps(transcript("ok")).encode()
    bad_utf8 = json.dumps(transcript("bytes")).encode().replace(b"Team plan", b"Team \xff\xfe plan")
    path = write_jsonl(tmp_path / "x.jsonl", [b'{"tenant_id": "acme", ', bad_utf8, good])
    report = ingest(db, [path])
    reasons = {r.location: r.reason for r in report.rejected}
    assert reasons[f"{path}:1"].startswith("not valid JSON")
    assert reasons[f"{path}:2"].startswith("invalid UTF-8")
    assert report.inserted == 1


def test_invalid_utf8_inside_a_json_array_rejects_only_that_record(db: Database, tmp_path: Path) -> None:
    records = [transcript("a"), transcript("b"), transcript("c")]
    text = json.dumps(records, indent=2).encode().replace(b"We'll go with the Team plan.", b"caf\xe9", 1)
    path = tmp_path / "arr.json"
    path.write_bytes(text)
    report = ingest(db, [path])
    assert report.inserted == 2
    assert len(report.rejected) == 1
    assert report.rejected[0].location == f"{path}:2"
    assert "invalid UTF-8" in report.rejected[0].reason


def test_oversized_record_is_rejected(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = transcript("big", messages=[{"role": "user", "content": "x" * 5000}])
    path = write_jsonl(tmp_path / "big.jsonl", [transcript("small"), big])
    db_small = Database(db.settings.with_(max_transcript_bytes=2048), url=db.url)
    try:
        report = ingest(db_small, [path])
    finally:
        db_small.close()
    assert report.inserted == 1
    assert "over the limit" in report.rejected[0].reason
    assert report.rejected[0].location == f"{path}:2"


@pytest.mark.citus  # the unique key on the distributed table
def test_duplicate_session_ids_in_one_file(db: Database, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "dup.jsonl", [transcript("same"), transcript("same", user_id="u2")])
    report = ingest(db, [path])
    assert report.inserted == 1
    assert report.rejected[0].location == f"{path}:2"
    assert f"first at {path}:1" in report.rejected[0].reason
    with db.admin() as conn:
        assert one(conn.execute("SELECT user_id FROM transcripts"))["user_id"] == "u1"


def test_json_array_and_object_forms(db: Database, tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text(json.dumps(transcript("single")))
    (tmp_path / "many.json").write_text(json.dumps({"transcripts": [transcript("m1"), transcript("m2")]}))
    report = ingest(db, [tmp_path])
    assert (report.inserted, report.rejected) == (3, [])


def _column_80_error() -> bytes:
    """A record whose one fault is at column 80 of its line: no comma before "messages"."""
    record = transcript("col80")
    rest = json.dumps(
        {"messages": record.pop("messages"), "started_at": record.pop("started_at"), "ended_at": record.pop("ended_at")}
    )[1:]
    head = json.dumps({"tenant_id": "acme", "user_id": "u1", "session_id": "col80"})[:-1] + ', "note": "'
    line = f'{head}{"x" * (78 - len(head))}"{rest}'.encode()  # the note's closing quote at column 79
    assert line[79:80] == b'"' and json.loads(line[:79] + b"," + line[79:])  # nothing else wrong with it
    return line


def test_a_syntax_error_names_its_line_and_column(db: Database, tmp_path: Path) -> None:
    """In a JSONL file, in a JSON array and in a .json file that holds one record per line (JSONL under
    another name: every record is read, not only the first), a fault at column 80 of line 2 is told as
    line 2, column 80, and the records around it load."""
    bad = _column_80_error()
    good = [json.dumps(transcript(s)).encode() for s in ("a", "b")]
    jsonl = write_jsonl(tmp_path / "x.jsonl", [good[0], bad, good[1]])
    as_json = write_jsonl(tmp_path / "lines.json", [good[0], bad, good[1]])
    array = tmp_path / "arr.json"
    array.write_bytes(b"[" + good[0] + b",\n" + bad + b",\n" + good[1] + b"]\n")
    for path, loaded in ((jsonl, 2), (as_json, 2), (array, 1)):  # an array cannot go on past a fault
        report = ingest(db, [path])
        assert [(r.location, r.reason) for r in report.rejected] == [
            (f"{path}:2", "not valid JSON at column 80: Expecting ',' delimiter")
        ], path
        assert report.inserted + report.unchanged == loaded, path


def test_a_byte_order_mark_is_not_an_error(db: Database, tmp_path: Path) -> None:
    """Files saved by editors that write a UTF-8 byte order mark load (it used to be "not valid JSON at column 1")."""
    bom = b"\xef\xbb\xbf"
    jsonl = write_jsonl(tmp_path / "bom.jsonl", [bom + json.dumps(transcript("bom1")).encode()])
    single = tmp_path / "bom.json"
    single.write_bytes(bom + json.dumps(transcript("bom2")).encode())
    report = ingest(db, [jsonl, single])
    assert (report.inserted, report.rejected) == (2, [])


@pytest.mark.skipif(not any(LOCOMO.glob("*.json")), reason=NO_LOCOMO)
def test_locomo_loads_5_users_and_128_sessions_and_rerun_changes_nothing(db: Database) -> None:
    files = sorted(LOCOMO.glob("*.json"))
    first = ingest(db, files, fmt="locomo")
    assert (first.inserted, first.rejected) == (128, [])
    with db.admin() as conn:
        users = one(conn.execute("SELECT count(DISTINCT user_id) AS n FROM transcripts"))["n"]
        sample = one(
            conn.execute(
                "SELECT started_at, messages->0->>'name' AS speaker FROM transcripts WHERE session_id = '26-s1'"
            )
        )
    assert users == 5
    assert sample["started_at"].isoformat() == "2023-05-08T13:56:00+00:00"
    assert sample["speaker"] == "Caroline"
    second = ingest(db, files, fmt="locomo")
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 128)
