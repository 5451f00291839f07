"""Per-table content checksums: proof that a refusal or a no-op changed nothing."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql


def table_checksums(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """md5 over every row's text form, ordered, for each table of the current schema."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        )
    ]
    result = {}
    for table in tables:
        row = conn.execute(
            sql.SQL(
                "SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, E'\\n' "
                "ORDER BY t::text COLLATE \"C\")), '') FROM {} t"
            ).format(sql.Identifier(table))
        ).fetchone()
        result[table] = str(row[0]) if row else ""
    return result
