"""`ADD CONSTRAINT … FOREIGN KEY | CHECK` → `… NOT VALID`, then `VALIDATE CONSTRAINT` in a
transaction of its own.

Catalog: the same constraint (name, definition, `convalidated`) once validated. A nameless
constraint is added under the name PostgreSQL chooses for it, asked in a rolled-back probe
(the NOT VALID add is brief), so a rerun finds it. Locks: the add takes the plain
statement's lock briefly (ACCESS EXCLUSIVE for a CHECK, SHARE ROW EXCLUSIVE on both tables
for a foreign key); the validation scans under SHARE UPDATE EXCLUSIVE (ROW SHARE on the
referenced table), which blocks no writer."""

from __future__ import annotations

from typing import Any

import psycopg
from pglast import ast

from queueguard.engine.online.choose import Form, parse_one, render
from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.online", "forms.sql")


def _constraint(node: ast.Node) -> ast.Constraint:
    assert isinstance(node, ast.AlterTableStmt) and node.cmds
    con = node.cmds[0].def_
    assert isinstance(con, ast.Constraint)
    return con


def names(conn: psycopg.Connection[Any], table: str) -> set[str]:
    return {r[0] for r in conn.execute(Q["constraint_names"], {"table": table}).fetchall()}


def validated(conn: psycopg.Connection[Any], table: str, name: str) -> bool | None:
    row = conn.execute(Q["constraint_validated"], {"table": table, "name": name}).fetchone()
    return None if row is None else bool(row[0])


def not_valid(form: Form, name: str | None = None) -> str:
    node = parse_one(form.sql)
    con = _constraint(node)
    con.skip_validation = True
    con.initially_valid = False
    if name is not None:
        con.conname = name
    return render(node)


def chosen_name(ctx: Context, form: Form) -> str:
    """The constraint's name: as written, or as PostgreSQL chooses it for the statement now
    (asked in a rolled-back transaction)."""
    if form.name:
        return form.name

    def ask(conn: psycopg.Connection[Any]) -> str:
        before = names(conn, form.table)
        conn.execute(not_valid(form))
        new = sorted(names(conn, form.table) - before)
        if len(new) != 1:
            raise ValueError(f"expected one new constraint from: {form.sql}")
        return new[0]

    return ctx.probe(ask)


def run(ctx: Context, form: Form) -> None:
    name = chosen_name(ctx, form)  # `apply.resolve` has recorded it
    state = ctx.transaction(lambda conn: validated(conn, form.table, name))
    if state is None:
        ctx.execute(not_valid(form, name))
    ctx.execute(f"ALTER TABLE {form.table} VALIDATE CONSTRAINT {quote(name)}", last=True)


def abort(conn: psycopg.Connection[Any], form: Form) -> list[str]:
    """The constraint the form added NOT VALID (or validated), gone. A nameless one got its
    name recorded before it was added (`apply.resolve`): without a name nothing was added."""
    if form.name is None or validated(conn, form.table, form.name) is None:
        return []
    conn.execute(f"ALTER TABLE {form.table} DROP CONSTRAINT {quote(form.name)}")
    return [f"dropped constraint {form.name}"]
