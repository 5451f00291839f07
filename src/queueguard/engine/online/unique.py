"""`ADD [CONSTRAINT c] PRIMARY KEY | UNIQUE (…)` → a unique index built concurrently under
the constraint's name, then `ADD CONSTRAINT c … USING INDEX` (which takes the index as it
is and keeps its name). For a primary key, each nullable key column goes through the SET NOT
NULL form first: `USING INDEX` would otherwise scan for NULLs under ACCESS EXCLUSIVE.

Catalog: the plain statement's — the constraint and its index under the same name (`<t>_pkey`
or `<t>_<cols>_key` when nameless: the name `plan` saw the plain statement give its index),
with INCLUDE, NULLS NOT DISTINCT, storage parameters, tablespace and deferrability carried."""

from __future__ import annotations

from typing import Any

import psycopg
from pglast import ast, enums

from queueguard.engine.online import index, not_null, not_valid
from queueguard.engine.online.choose import Form, parse_one, render
from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote, unqualified
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.online", "forms.sql")


def _parts(form: Form) -> tuple[ast.AlterTableStmt, ast.Constraint]:
    node = parse_one(form.sql)
    assert isinstance(node, ast.AlterTableStmt) and node.cmds
    con = node.cmds[0].def_
    assert isinstance(con, ast.Constraint)
    return node, con


def index_name(form: Form) -> str:
    _, con = _parts(form)
    if con.conname:
        return str(con.conname)
    if not form.created:
        raise ValueError(f"no name for the nameless constraint of: {form.sql}")
    return unqualified(form.created[0])


def _columns(items: Any) -> list[str]:
    return [str(item.sval) for item in items or ()]


def _elem(column: str) -> ast.IndexElem:
    return ast.IndexElem(
        name=column,
        ordering=enums.SortByDir.SORTBY_DEFAULT,
        nulls_ordering=enums.SortByNulls.SORTBY_NULLS_DEFAULT,
    )


def build(form: Form) -> str:
    """The constraint's index, as CREATE UNIQUE INDEX CONCURRENTLY."""
    node, con = _parts(form)
    index = ast.IndexStmt(
        idxname=index_name(form),
        relation=node.relation,
        accessMethod="btree",
        indexParams=tuple(_elem(c) for c in _columns(con.keys)),
        indexIncludingParams=tuple(_elem(c) for c in _columns(con.including)) or None,
        options=con.options,
        tableSpace=con.indexspace,
        unique=True,
        nulls_not_distinct=bool(con.nulls_not_distinct),
        concurrent=True,
    )
    return render(index)


def attach(form: Form) -> str:
    """`ADD CONSTRAINT … USING INDEX` of the built index."""
    _, con = _parts(form)
    name = index_name(form)
    kind = "PRIMARY KEY" if con.contype == enums.ConstrType.CONSTR_PRIMARY else "UNIQUE"
    deferral = ""
    if con.deferrable:
        deferral = " DEFERRABLE INITIALLY DEFERRED" if con.initdeferred else " DEFERRABLE"
    return (
        f"ALTER TABLE {form.table} ADD CONSTRAINT {quote(name)} {kind} "
        f"USING INDEX {quote(name)}{deferral}"
    )


def _nullable(conn: psycopg.Connection[Any], table: str, columns: list[str]) -> list[str]:
    rows = conn.execute(Q["nullable_columns"], {"table": table, "columns": columns}).fetchall()
    return [r[0] for r in rows]


def run(ctx: Context, form: Form) -> None:
    _, con = _parts(form)
    keys = _columns(con.keys) if con.contype == enums.ConstrType.CONSTR_PRIMARY else []
    for column in ctx.transaction(lambda conn: _nullable(conn, form.table, keys)):
        not_null.prove(ctx, form.table, column)
        ctx.execute(f"ALTER TABLE {form.table} ALTER COLUMN {quote(column)} SET NOT NULL")
    ctx.alone(build(form))

    def settle(conn: psycopg.Connection[Any]) -> None:
        conn.execute(attach(form))
        # the checks of this run and of a killed one before it (a column it already set
        # NOT NULL is no longer nullable, but its check is still there)
        for column in keys:
            check = not_null.check_name(form.table, column)
            if not_valid.validated(conn, form.table, check) is not None:
                conn.execute(f"ALTER TABLE {form.table} DROP CONSTRAINT {quote(check)}")

    ctx.transaction(settle, last=True)


def abort(conn: psycopg.Connection[Any], form: Form) -> list[str]:
    """The index the form built and the NOT NULL it set on the key columns, undone."""
    _, con = _parts(form)
    undone: list[str] = []
    name = index_name(form)
    if conn.execute(Q["index_valid"], {"table": form.table, "name": name}).fetchone():
        conn.execute(
            f"DROP INDEX CONCURRENTLY IF EXISTS {index.schema_of(conn, form.table)}.{quote(name)}"
        )
        undone.append(f"dropped index {name}")
    if con.contype == enums.ConstrType.CONSTR_PRIMARY:
        undone += not_null.undo_checks(conn, form.table, _columns(con.keys))
    return undone
