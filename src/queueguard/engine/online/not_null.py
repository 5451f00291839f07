"""`ALTER COLUMN … SET NOT NULL` → `ADD CONSTRAINT <t>_<c>_qg_not_null CHECK (c IS NOT NULL)
NOT VALID`, `VALIDATE` it, then `SET NOT NULL` (PostgreSQL 12+ skips its scan when a valid
CHECK proves the column has no NULL) and the check dropped, in one transaction.

Catalog: the plain statement's (`attnotnull`, and on PostgreSQL 18 its `<t>_<c>_not_null`
constraint row, named by the server in both cases); the temporary check is gone. Locks:
three brief ACCESS EXCLUSIVE acquisitions and a validation under SHARE UPDATE EXCLUSIVE."""

from __future__ import annotations

from typing import Any

import psycopg
from pglast import ast

from queueguard.engine.online import not_valid
from queueguard.engine.online.choose import Form, parse_one
from queueguard.engine.online.context import Context
from queueguard.engine.online.names import bounded, quote, unqualified


def check_name(table: str, column: str) -> str:
    return bounded(f"{unqualified(table)}_{column}_qg_not_null")


def column_of(form: Form) -> str:
    node = parse_one(form.sql)
    assert isinstance(node, ast.AlterTableStmt) and node.cmds
    return str(node.cmds[0].name)


def prove(ctx: Context, table: str, column: str) -> str:
    """The column proved free of NULL by a validated CHECK; its name."""
    check = check_name(table, column)
    state = ctx.transaction(lambda conn: not_valid.validated(conn, table, check))
    if state is None:
        ctx.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {quote(check)} "
            f"CHECK ({quote(column)} IS NOT NULL) NOT VALID"
        )
    if not state:
        ctx.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {quote(check)}")
    return check


def run(ctx: Context, form: Form) -> None:
    column = column_of(form)
    check = prove(ctx, form.table, column)

    def settle(conn: psycopg.Connection[Any]) -> None:
        conn.execute(form.sql)
        conn.execute(f"ALTER TABLE {form.table} DROP CONSTRAINT {quote(check)}")

    ctx.transaction(settle, last=True)


def undo_checks(conn: psycopg.Connection[Any], table: str, columns: list[str]) -> list[str]:
    """The temporary checks of `columns` gone; a column that has one and is already NOT
    NULL was set so by the form (the check is dropped only with the statement's end), so it
    accepts NULL again."""
    undone: list[str] = []
    for column in columns:
        check = check_name(table, column)
        if not_valid.validated(conn, table, check) is None:
            continue
        row = conn.execute(
            "SELECT attnotnull FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
            (table, column),
        ).fetchone()
        if row and row[0]:
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN {quote(column)} DROP NOT NULL")
            undone.append(f"column {column} accepts NULL again")
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {quote(check)}")
        undone.append(f"dropped constraint {check}")
    return undone


def abort(conn: psycopg.Connection[Any], form: Form) -> list[str]:
    return undo_checks(conn, form.table, [column_of(form)])
