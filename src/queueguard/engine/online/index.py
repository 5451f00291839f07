"""`CREATE [UNIQUE] INDEX` → `CREATE [UNIQUE] INDEX CONCURRENTLY`.

Catalog: the same index (name, definition, flags) once valid. A nameless index gets the
name `plan` saw PostgreSQL choose for the plain statement on the scratch copy, so a rerun
after a failed build finds its invalid leftover by name and builds it again (a nameless
retry would pick `<name>1`). Locks: SHARE UPDATE EXCLUSIVE on the table (blocks no reader
or writer) while it waits for every older snapshot and scans twice."""

from __future__ import annotations

from typing import Any

import psycopg
from pglast import ast

from queueguard.engine.online.choose import Form, parse_one, render
from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote, unqualified
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.online", "forms.sql")


def concurrent(form: Form) -> str:
    """The statement built concurrently, under the name the plain statement gives it."""
    node = parse_one(form.sql)
    assert isinstance(node, ast.IndexStmt)
    node.concurrent = True
    if node.idxname is None:
        if not form.created:
            raise ValueError(f"no name for the nameless index of: {form.sql}")
        node.idxname = unqualified(form.created[0])
    return render(node)


def run(ctx: Context, form: Form) -> None:
    ctx.alone(concurrent(form))
    ctx.transaction(lambda conn: None, last=True)


def abort(conn: psycopg.Connection[Any], form: Form) -> list[str]:
    """The index the form was building, gone (valid or not: the statement did not finish)."""
    node = parse_one(concurrent(form))
    assert isinstance(node, ast.IndexStmt) and node.idxname
    row = conn.execute(Q["index_valid"], {"table": form.table, "name": node.idxname}).fetchone()
    if row is None:
        return []
    conn.execute(
        f"DROP INDEX CONCURRENTLY IF EXISTS {schema_of(conn, form.table)}.{quote(node.idxname)}"
    )
    return [f"dropped index {node.idxname}"]


def schema_of(conn: psycopg.Connection[Any], table: str) -> str:
    """The table's schema, quoted (a concurrent drop names the index schema-qualified)."""
    row = conn.execute(Q["schema_of"], {"table": table}).fetchone()
    assert row is not None
    return str(row[0])
