"""Copy one user's summarised history to other users of the same tenant, inside a scratch database.

sde-bench gives every task its own user holding the same 140 decoy chats. Summarising those chats
once and copying the result (transcripts, episodes, their events, entities and episode_lines) with
one ``INSERT ... SELECT`` per table keeps a run to minutes instead of summarising 33 x 140 chats.
The copy is what the summarize job would have written for that user: the same rows, with

- ``user_id`` the target user, and ``session_id`` prefixed with the target's prefix (session ids are
  unique within a tenant);
- every id shifted by a per-table offset (``id + k * stride``, ``stride`` = the table's largest id + 1,
  ``k`` = 1, 2, ... for the successive copies), and every column that points at an id of the copied
  tables (``transcript_id``, ``episode_id``, ``superseded_by``, ``resolved_by``, ...) shifted the
  same way, so links between the copied rows stay links between the copies;
- the sequences set past the last copy afterwards, so later inserts never collide.

The column lists are read from the catalogue at run time (so a column added by a later migration is
copied too; only identifiers are composed here), generated columns are left to the database, and
the rows' triggers run as for any insert (version stamps, the search term frequencies). For the
evaluation's scratch database only: it writes as the owner and copies raw transcripts.
"""

from __future__ import annotations

from psycopg import sql

from jobs.db import Conn, Database, one

# Per table, the columns holding an id of a copied table, and which table's id (its offset) they hold.
_IDS: dict[str, dict[str, str]] = {
    "transcripts": {"id": "transcripts"},
    "episodes": {
        "id": "episodes",
        "transcript_id": "transcripts",
        "superseded_by": "episodes",
        "compressed_into": "episodes",
    },
    "episode_events": {
        "id": "episode_events",
        "episode_id": "episodes",
        "resolved_by": "episodes",
        "source_event_id": "episode_events",
        "superseded_by": "episode_events",
    },
    "episode_entities": {"id": "episode_entities", "episode_id": "episodes"},
    "episode_lines": {"episode_id": "episodes"},
}
_SEQUENCED = ("transcripts", "episodes", "episode_events", "episode_entities")


def clone_user(db: Database, tenant_id: str, source_user: str, targets: list[tuple[str, str]]) -> None:
    """Copy ``source_user``'s rows to each ``(user_id, session_prefix)`` of ``targets`` (module docstring)."""
    if not targets:
        return
    with db.connect() as conn, conn.transaction():  # the owner: it sets the sequences too
        stride = {
            t: int(
                one(conn.execute(sql.SQL("SELECT coalesce(max(id), 0) + 1 AS n FROM {}").format(sql.Identifier(t))))[
                    "n"
                ]
            )
            for t in _SEQUENCED
        }
        statements = {t: _copy_statement(conn, t) for t in _IDS}
        for k, (user_id, prefix) in enumerate(targets, 1):
            params: dict[str, object] = {
                "tenant_id": tenant_id,
                "source": source_user,
                "user_id": user_id,
                "prefix": prefix,
                **{f"off_{t}": k * stride[t] for t in _SEQUENCED},
            }
            for table in _IDS:  # in dependency order: transcripts, then episodes, then what hangs on them
                conn.execute(statements[table], params)
        for t in _SEQUENCED:
            conn.execute(
                sql.SQL("SELECT setval(pg_get_serial_sequence({}, 'id'), {})").format(
                    sql.Literal(t), sql.Literal(stride[t] * (len(targets) + 1))
                )
            )


def _copy_statement(conn: Conn, table: str) -> sql.Composed:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
        "AND is_generated = 'NEVER' ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    columns = [r["column_name"] for r in rows]
    values: list[sql.Composable] = []
    for col in columns:
        if col in _IDS[table]:
            values.append(sql.SQL("{} + {}").format(sql.Identifier(col), sql.Placeholder(f"off_{_IDS[table][col]}")))
        elif col == "user_id":
            values.append(sql.Placeholder("user_id"))
        elif col == "session_id":
            values.append(sql.SQL("{} || {}").format(sql.Placeholder("prefix"), sql.Identifier(col)))
        else:
            values.append(sql.Identifier(col))
    return sql.SQL(
        "INSERT INTO {t} ({cols}) SELECT {vals} FROM {t} WHERE tenant_id = %(tenant_id)s AND user_id = %(source)s"
    ).format(
        t=sql.Identifier(table), cols=sql.SQL(", ").join(map(sql.Identifier, columns)), vals=sql.SQL(", ").join(values)
    )
