"""Whole rows: every column of every row of every table, as verify compares them.

The snapshot document (`state.export_database`) holds what the runtime reads — keys, ids,
counters, payloads. A migration that resets *another* column of the rows it moves (a task's
`created_at`, a queue's component columns) would leave that document unchanged. `export`
reads every table of the current schema, every column, from the catalog (no hand list), each
row keyed by column name, in primary-key order. Timestamps the input fixed are compared as
they are; a timestamp at or after `since` (the server's clock just before the upgrade ran) is
written as `NOW`, so a value the upgrade writes as "now" is visible as such and never
confused with a value it should have kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import manifest
from queueguard.revisions import SetFacts

Q = queries("queueguard.queue_schema", "rows.sql")
Conn = psycopg.Connection[TupleRow]
Doc = dict[str, list[dict[str, Any]]]
#: a timestamp written by the upgrade itself (at or after `since`)
NOW = "<now>"


def clock(conn: Conn) -> datetime:
    """The server's clock: pass it as `since` to `export` after the upgrade."""
    row = conn.execute(Q["clock"]).fetchone()
    assert row is not None
    value: datetime = row[0]
    conn.rollback()
    return value


def export(conn: Conn, since: datetime | None = None) -> Doc:
    """Every row of every table of the current schema, every column (read-only)."""
    doc: Doc = {}
    for table, columns, stamps, key in conn.execute(Q["tables"]).fetchall():
        stamped = set(stamps or ())
        fields = sql.SQL(", ").join(
            sql.SQL("{}, {}").format(sql.Literal(col), _value(col, col in stamped, since))
            for col in columns
        )
        order = sql.SQL(", ").join(sql.Identifier(c) for c in (key or columns))
        query = sql.SQL("SELECT jsonb_build_object({}) FROM {} ORDER BY {}").format(
            fields, sql.Identifier(table), order
        )
        doc[table] = [row[0] for row in conn.execute(query)]
    conn.rollback()
    return doc


def _value(column: str, stamp: bool, since: datetime | None) -> sql.Composable:
    ident = sql.Identifier(column)
    if not stamp:
        return sql.SQL("to_jsonb({})").format(ident)
    text = sql.SQL(
        "to_jsonb(to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))"
    ).format(sql.SQL("{}::timestamptz").format(ident))
    if since is None:
        return text
    return sql.SQL("CASE WHEN {}::timestamptz >= {} THEN to_jsonb({}::text) ELSE {} END").format(
        ident, sql.Literal(since), sql.Literal(NOW), text
    )


#: the ledger's hash of a revision, when it is the migration set's own (a mutated copy has
#: other hashes than the golden run's: tamper detection is checked elsewhere)
MANIFEST = "<manifest>"


def export_upgraded(conn: Conn, since: datetime, migrations: SetFacts) -> Doc:
    """`export` of a database upgraded with `migrations` after `since`: the ledger's hashes
    that equal the migration set's own are written as MANIFEST."""
    own = {manifest.revision_sha256(r, migrations.root): MANIFEST for r in migrations.ids}
    return substitute(export(conn, since), "queueguard_migrations", "sha256", own)


# pure: comparing two documents ------------------------------------------------------------
def substitute(doc: Doc, table: str, column: str, values: Mapping[Any, Any]) -> Doc:
    """A copy of `doc` with `column` of `table` replaced where `values` names its value (e.g.
    the ledger's hashes by what they must equal: the migration set's own)."""
    rows = [
        {**row, column: values.get(row.get(column), row.get(column))} for row in doc.get(table, [])
    ]
    return {**doc, table: rows} if table in doc else dict(doc)


def project(
    doc: Doc,
    *,
    without: Mapping[str, set[str]] | None = None,
    keep: Callable[[str, dict[str, Any]], bool] | None = None,
) -> Doc:
    """`doc` without the columns `without` names per table, and only the rows `keep` keeps."""
    drop = without or {}
    return {
        table: [
            {c: v for c, v in row.items() if c not in drop.get(table, set())}
            for row in rows
            if keep is None or keep(table, row)
        ]
        for table, rows in doc.items()
    }


def differences(expected: Doc, actual: Doc, limit: int = 20) -> list[str]:
    """Row by row, column by column: what differs (tables, rows by position, columns)."""
    found: list[str] = []
    for table in sorted(expected.keys() | actual.keys()):
        if table not in actual or table not in expected:
            found.append(f"{table}: only in {'expected' if table in expected else 'actual'}")
            continue
        a, b = expected[table], actual[table]
        if len(a) != len(b):
            found.append(f"{table}: {len(a)} rows expected, {len(b)} found")
        for n, (ra, rb) in enumerate(zip(a, b, strict=False)):
            for column in sorted(ra.keys() | rb.keys()):
                if ra.get(column, "<absent>") != rb.get(column, "<absent>"):
                    found.append(
                        f"{table} row {n + 1} ({_key(ra)}): {column} expected "
                        f"{_short(ra.get(column))}, found {_short(rb.get(column))}"
                    )
        if len(found) >= limit:
            break
    return found[:limit]


def _key(row: dict[str, Any]) -> str:
    parts = [row[c] for c in ("physical_queue", "task_id", "run_id", "revision") if c in row]
    return ", ".join(str(p) for p in parts) or "-"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
