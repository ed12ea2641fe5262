"""jobs.recall.text_rank against the real server: rank() equals ts_rank(tsv, query, 1) bit for bit (float32).

Every check compares all documents of a temporary table with all queries, server side with
``ts_rank(tsv, tsq, 1)`` and in-process from the tsvector's *output text* (parse_tsvector ->
term_contributions -> rank), and demands equal float32 bit patterns.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence

import numpy as np
import psycopg
import pytest
from conftest import EXAMPLES, LOCOMO

from jobs.recall.text_rank import (
    parse_tsvector,
    query_order,
    rank,
    term_contributions,
    tsvector_terms,
)

# The OR tsquery recall ranks by, built as sql/recall.sql built it in SQL: the lexemes, quoted and OR-ed.
RECALL_TSQUERY = """(SELECT nullif(string_agg('''' || replace(replace(lex, '\\', '\\\\'), '''', '''''') || '''',
                                         ' | '), '')::tsquery
                     FROM unnest(tsvector_to_array(to_tsvector('english', %s::text))) AS lex)"""
ODD = ["it's", "'", "''", "\\", "a\\b", "back\\\\slash", "o'neil\\", "é", "e\u0301", "ß", "日本", "naïve", "ω",
       "🙂", "a b", "x:1", "a", "ab", "abc", "abd", "b", "B", "z", "zz", "über", "ü", "café", "q'\\'q"]
WORDS = ["budget", "invoice", "travel", "hotel", "python", "postgres", "garden", "piano", "marathon", "refund"]


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_url, autocommit=True) as connection:
        connection.execute("CREATE TEMP TABLE docs (i int PRIMARY KEY, tsv tsvector NOT NULL)")
        yield connection


def quote(lexeme: str) -> str:
    """A lexeme quoted for tsvector/tsquery input: ' doubled, \\ escaped."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_input(doc: dict[str, list[tuple[int, int]]]) -> str:
    return " ".join(quote(lex) + (":" + ",".join(f"{p}{'DCBA'[w]}" for p, w in pos) if pos else "")
                    for lex, pos in doc.items())


def add_docs(conn: psycopg.Connection, expressions: Sequence[tuple[str, Sequence[object]]]) -> None:
    """Insert documents, each an SQL tsvector expression with its parameters."""
    start = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    for n, (expr, params) in enumerate(expressions):
        conn.execute(f"INSERT INTO docs VALUES ({start + n}, {expr})", params)


def contribution_matrix(docs: Sequence[dict[str, float]], items: Sequence[str]) -> np.ndarray:
    """``docs × items`` float64 matrix of :func:`term_contributions` values, NaN where a doc lacks an item."""
    out = np.full((len(docs), len(items)), np.nan)
    for i, contrib in enumerate(docs):
        for k, item in enumerate(items):
            value = contrib.get(item)
            if value is not None:
                out[i, k] = value
    return out


def compare(conn: psycopg.Connection, queries: Sequence[Sequence[str]], tsqueries: Sequence[str]) -> tuple[int, int]:
    """rank() vs ts_rank for every document in docs × every query; returns (pairs compared, pairs matching).

    queries[k] are the lexemes of the tsquery whose text is tsqueries[k] (any order, duplicates allowed).
    """
    parsed = [term_contributions(parse_tsvector(text))
              for (text,) in conn.execute("SELECT tsv::text FROM docs ORDER BY i")]
    contribs, norms = [c for c, _ in parsed], np.array([n for _, n in parsed])
    rows = conn.execute(
        """SELECT q.k, array_agg(ts_rank(d.tsv, q.tsq::tsquery, 1)::float8 ORDER BY d.i),
                  array_agg(d.tsv @@ q.tsq::tsquery ORDER BY d.i)
           FROM docs d, unnest(%s::text[]) WITH ORDINALITY AS q(tsq, k) GROUP BY q.k ORDER BY q.k""",
        (list(tsqueries),)).fetchall()
    assert len(rows) == len(queries) and len(contribs) > 0
    mismatches, matching = [], 0
    for (k, expected, matches), lexemes in zip(rows, queries, strict=True):
        items = query_order(lexemes)
        got = rank(contribution_matrix(contribs, items), norms, len(items))
        want = np.array(expected, dtype=np.float64).astype(np.float32)
        assert got.dtype == np.float32
        for i in np.flatnonzero(got.view(np.uint32) != want.view(np.uint32)):
            mismatches.append((int(i), tsqueries[k - 1], float(want[i]), float(got[i])))
        assert list(got > 0) == list(matches), tsqueries[k - 1]
        matching += sum(matches)
    assert not mismatches, f"{len(mismatches)} mismatches (doc, query, ts_rank, rank): {mismatches[:5]}"
    return len(contribs) * len(queries), matching


# ------------------------------------------------------------------------------------------------
# (a) real texts, queries built as recall builds them
# ------------------------------------------------------------------------------------------------


def recall_queries(conn: psycopg.Connection, texts: Sequence[str]) -> tuple[list[list[str]], list[str]]:
    """Each text's lexemes and its tsquery as sql/recall.sql makes it (an empty query when it has none)."""
    lexemes, tsqueries = [], []
    for text in texts:
        lex, tsq = conn.execute(f"SELECT tsvector_to_array(to_tsvector('english', %s::text)), "
                                f"coalesce({RECALL_TSQUERY}, ''::tsquery)::text", (text, text)).fetchone()
        lexemes.append(lex)
        tsqueries.append(tsq)
    return lexemes, tsqueries


def test_locomo_sessions(conn: psycopg.Connection) -> None:
    files = sorted(LOCOMO.glob("*.json"))
    if not files:
        pytest.skip(f"LoCoMo data not found in {LOCOMO}")
    docs: list[tuple[str, Sequence[object]]] = []
    questions: list[str] = []
    for path in files:
        conv = json.loads(path.read_text())
        questions += [qa["question"] for qa in conv["qa"]]
        for key in sorted(k for k in conv if k.endswith("_summary")):
            n = key.removeprefix("session_").removesuffix("_summary")
            summary = conv[key]
            events = " ".join(e for who, items in conv.get(f"events_session_{n}", {}).items() if who != "date"
                              for e in items)
            facts = " ".join(f[0] for items in conv.get(f"session_{n}_observation", {}).values() for f in items)
            turns = " ".join(t["text"] for t in conv.get(f"session_{n}", []))
            docs.append(("to_tsvector('english', %s)", [summary]))  # as search_tsv is written today
            docs.append(("setweight(to_tsvector('english', %s), 'A') || setweight(to_tsvector('english', %s), 'B')"
                         " || setweight(to_tsvector('english', %s), 'C') || to_tsvector('english', %s)",
                         [summary, facts, events, turns]))
    add_docs(conn, docs)
    lexemes, tsqueries = recall_queries(conn, questions)
    pairs, matching = compare(conn, lexemes, tsqueries)
    assert pairs >= 200_000 and matching >= 100_000


def test_example_sessions(conn: psycopg.Connection) -> None:
    sessions = [json.loads(line) for path in sorted(EXAMPLES.glob("*.jsonl")) for line in path.read_text().splitlines()
                if line.strip()]
    assert sessions, f"no example sessions in {EXAMPLES}"
    docs: list[tuple[str, Sequence[object]]] = []
    openings: list[str] = []
    for session in sessions:
        said = {role: " ".join(m["content"] for m in session["messages"] if m["role"] == role)
                for role in ("user", "assistant")}
        docs.append(("to_tsvector('english', %s)", [said["user"] + " " + said["assistant"]]))
        docs.append(("setweight(to_tsvector('english', %s), 'A') || setweight(to_tsvector('english', %s), 'D')",
                     [said["user"], said["assistant"]]))
        openings += [m["content"] for m in session["messages"] if m["role"] == "user"]
    add_docs(conn, docs)
    lexemes, tsqueries = recall_queries(conn, openings)
    pairs, matching = compare(conn, lexemes, tsqueries)
    assert pairs >= 10_000 and matching >= 5_000


# ------------------------------------------------------------------------------------------------
# (b) random tsvectors, (c) single-item and empty queries
# ------------------------------------------------------------------------------------------------


def random_doc(rng: random.Random, pool: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
    doc = {}
    for lex in rng.sample(pool, rng.randint(1, min(len(pool), 40))):
        if rng.random() < 0.15:
            doc[lex] = []
            continue
        n = rng.choice([1, 1, 1, 2, 3, 5, 12, 40, 256])
        weights = rng.choice([[0], [3], [0, 1, 2, 3], [2, 0]])
        doc[lex] = [(p, rng.choice(weights)) for p in sorted(rng.sample(range(1, 16384), n))]
    return doc


def random_queries(rng: random.Random, pool: Sequence[str], n: int) -> list[list[str]]:
    absent = ["absent", "nowhere", "é\u0301"]
    return [[rng.choice(pool + absent) for _ in range(rng.randint(2, 14))] for _ in range(n)]


def test_random_vectors(conn: psycopg.Connection) -> None:
    rng = random.Random(20240611)
    pool = ODD + WORDS
    docs: list[tuple[str, Sequence[object]]] = [("%s::tsvector", [tsvector_input(random_doc(rng, pool))])
                                                for _ in range(250)]
    docs += [("strip(%s::tsvector)", [tsvector_input(random_doc(rng, pool))]) for _ in range(30)]
    for _ in range(40):  # many repeated positions of few lexemes, mixed weights, clamped at 16383
        parts = [" ".join(rng.choices(WORDS[:rng.randint(1, 10)], k=rng.randint(1, 7000))) for _ in range(3)]
        docs.append(("setweight(to_tsvector('simple', %s), 'B') || to_tsvector('simple', %s)"
                     " || setweight(to_tsvector('simple', %s), %s::\"char\")", [*parts, rng.choice("ABCD")]))
    docs += [("''::tsvector", []), ("strip(''::tsvector)", [])]
    add_docs(conn, docs)
    queries = random_queries(rng, pool, 150)
    queries += [[lex] for lex in [*pool, "absent"]]  # (c) single items
    queries += [[]]  # (c) the empty query
    tsqueries = [" | ".join(map(quote, q)) for q in queries]
    pairs, matching = compare(conn, queries, tsqueries)
    assert pairs >= 50_000 and matching >= 20_000


def test_empty_queries(conn: psycopg.Connection) -> None:
    """A query of stopwords only is the empty tsquery: everything ranks 0, as in PostgreSQL."""
    add_docs(conn, [("to_tsvector('english', %s)", ["The hotel refund arrived before the marathon."]),
                    ("''::tsvector", []), ("'a:1A b'::tsvector", [])])
    assert conn.execute("SELECT to_tsquery('english', 'the & a')::text").fetchone()[0] == ""
    assert compare(conn, [[], ["hotel"], ["a"]], ["", "hotel", "a"]) == (9, 2)


# ------------------------------------------------------------------------------------------------
# parse_tsvector and query_order
# ------------------------------------------------------------------------------------------------


def test_parse_round_trip(conn: psycopg.Connection) -> None:
    rng = random.Random(7)
    for _ in range(200):
        doc = random_doc(rng, ODD)
        text = conn.execute("SELECT %s::tsvector::text", (tsvector_input(doc),)).fetchone()[0]
        assert parse_tsvector(text) == doc, text
        assert conn.execute("SELECT %s::tsvector::text", (tsvector_input(parse_tsvector(text)),)).fetchone()[0] == text
    text = conn.execute("SELECT $$'it''s':3A 'back\\\\slash' 'lex':1A,5,9B 'a b':2C$$::tsvector::text").fetchone()[0]
    assert text == "'a b':2C 'back\\\\slash' 'it''s':3A 'lex':1A,5,9B"
    assert parse_tsvector(text) == {"a b": [(2, 1)], "back\\slash": [], "it's": [(3, 3)],
                                    "lex": [(1, 3), (5, 0), (9, 2)]}
    assert parse_tsvector("") == {}
    for bad in ["lex", "'lex':", "'a':1X", "'a''", "'a' x"]:
        with pytest.raises(ValueError):
            parse_tsvector(bad)


def test_query_order_is_servers(conn: psycopg.Connection) -> None:
    """The server sorts a tsvector's lexemes as SortAndUniqItems sorts a query's: the same comparison."""
    text = conn.execute("SELECT %s::tsvector::text", (tsvector_input({lex: [] for lex in ODD}),)).fetchone()[0]
    assert list(parse_tsvector(text)) == query_order(ODD + ODD[:5])
    assert query_order(["b", "ab", "a", "abc", "a"]) == ["a", "ab", "abc", "b"]


def test_the_fast_reader_gives_the_same_terms(conn: psycopg.Connection) -> None:
    """tsvector_terms (what recall's full reads use) equals term_contributions(parse_tsvector(...)) exactly."""
    rng = random.Random(7)
    docs: list[tuple[str, Sequence[object]]] = [("%s::tsvector", [tsvector_input(random_doc(rng, ODD + WORDS))])
                                                for _ in range(200)]
    docs += [("strip(%s::tsvector)", [tsvector_input(random_doc(rng, WORDS))]) for _ in range(20)]
    docs += [("''::tsvector", [])]
    add_docs(conn, docs)
    texts = [text for (text,) in conn.execute("SELECT tsv::text FROM docs ORDER BY i")]
    assert len(texts) == 221
    for text in texts:
        terms, divisor = term_contributions(parse_tsvector(text))
        lexemes, values, fast_divisor = tsvector_terms(text)
        assert dict(zip(lexemes, values, strict=True)) == terms and len(lexemes) == len(terms)
        assert fast_divisor == divisor
