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


def fingerprint(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """`table_checksums` plus the current schema's relations and constraints: a refusal
    must leave both untouched (nothing created, dropped or altered)."""
    result = table_checksums(conn)
    row = conn.execute(
        "SELECT (SELECT string_agg(relname || ':' || relkind::text, ',' ORDER BY relname) "
        "FROM pg_class WHERE relnamespace = current_schema()::regnamespace), "
        "(SELECT string_agg(conname || ':' || pg_get_constraintdef(oid), ',' ORDER BY conname) "
        "FROM pg_constraint WHERE connamespace = current_schema()::regnamespace)"
    ).fetchone()
    result["<relations>"] = str(row[0] if row else "")
    result["<constraints>"] = str(row[1] if row else "")
    conn.rollback()
    return result
