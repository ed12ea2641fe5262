"""What an erasure left behind: every column of the database holding a word, and a tenant's rows, table by table."""

from __future__ import annotations

import json
import re

from psycopg import sql

from jobs.db import Database


def scan(db: Database, needle: str, tenant: str = "acme") -> list[str]:
    """Every schema.table.column (from the catalog, any type, cast to text) holding ``needle`` as a
    whole word, in rows of ``tenant`` or of tables without a tenant column."""
    word = re.compile(rf"(?<![\w-]){re.escape(needle)}(?![\w-])", re.IGNORECASE)
    hits = []
    with db.admin() as conn:
        columns = conn.execute(
            """SELECT n.nspname AS schema, c.relname AS tbl, a.attname AS col,
                      EXISTS (SELECT 1 FROM pg_attribute t WHERE t.attrelid = c.oid AND t.attname = 'tenant_id'
                              AND NOT t.attisdropped) AS tenanted
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
               WHERE c.relkind IN ('r', 'p', 'm')
                 AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'"""
        ).fetchall()
        assert len(columns) > 80
        for c in columns:
            query = sql.SQL(
                "SELECT {col}::text AS v FROM {tbl} WHERE strpos(lower({col}::text), lower(%(n)s)) > 0"
            ).format(col=sql.Identifier(c["col"]), tbl=sql.Identifier(c["schema"], c["tbl"]))
            if c["tenanted"]:
                query = query + sql.SQL(" AND tenant_id = %(t)s")
            for row in conn.execute(query, {"n": needle, "t": tenant}):
                if word.search(row["v"]):
                    hits.append(f"{c['schema']}.{c['tbl']}.{c['col']}")
    return sorted(set(hits))


def snapshot(db: Database, where: str, params: tuple[object, ...]) -> dict[str, list[str]]:
    """Rows of every tenant table matching ``where`` (without columns a foreign key may null)."""
    out = {}
    with db.admin() as conn:
        for table in (
            "transcripts",
            "episodes",
            "episode_events",
            "episode_entities",
            "episode_lineage",
            "model_calls",
        ):
            rows = conn.execute(
                sql.SQL("SELECT * FROM {} WHERE ").format(sql.Identifier(table)) + sql.SQL(where), params
            ).fetchall()
            out[table] = sorted(
                json.dumps(
                    {k: v for k, v in r.items() if k not in ("compressed_into", "embedding")},
                    default=str,
                    sort_keys=True,
                )
                for r in rows
            )
    return out
