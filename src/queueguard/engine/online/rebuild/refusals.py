"""What a rebuild cannot carry across exactly, each object named (read only): an object
bound to the table's OID or row type that cannot be recreated in one short transaction
(a rule, a materialized view, a function with a SQL-standard body, another table's column of
its row type), an inheritance tree or partitions, a FOR ALL TABLES publication (it would
publish the shadow and the log), a table without a key to replay changes by, and a
statement whose subcommands the shadow cannot take as the table would."""

from __future__ import annotations

from typing import Any

import psycopg

from queueguard.engine.online.choose import Form
from queueguard.engine.online.names import quote
from queueguard.engine.online.rebuild.catalog import (
    CAPTURE_TRIGGERS,
    OLD_SCHEMA,
    SHADOW_SCHEMA,
    Q,
    Table,
    find,
)
from queueguard.engine.online.rebuild.statement import parse
from queueguard.engine.online.rebuild.statement import refusals as statement_refusals


def refusals(conn: psycopg.Connection[Any], form: Form) -> list[str]:
    table = find(conn, form.table)
    if table is None:
        return [f"no table {form.table}"]
    found = _shape(table)
    params = {"oid": table.oid}
    found += [f"{what} of {table.qualified}" for what, _ in _inheritance(conn, table)]
    found += [str(r[0]) for r in conn.execute(Q["uncarried_dependents"], params).fetchall()]
    users = conn.execute(
        Q["row_type_users"],
        {"oid": table.oid, "rowtype": table.row_type, "arraytype": table.array_type},
    ).fetchall()
    found += [f"{r[0]} (of the table's row type)" for r in users]
    found += [
        f"table {table.qualified} belongs to extension {quote(r[0])}"
        for r in conn.execute(Q["extension_of"], params).fetchall()
    ]
    found += [
        f"publication {quote(r[0])} (FOR ALL TABLES: it would publish the shadow and its log)"
        for r in conn.execute(Q["all_tables_publications"]).fetchall()
    ]
    triggers = {r[0] for r in conn.execute(Q["trigger_names"], params).fetchall()}
    found += [
        f"trigger {quote(name)} on {table.qualified} (the name of the rebuild's capture trigger)"
        for name in sorted(triggers & set(CAPTURE_TRIGGERS))
    ]
    if not table.key:
        found.append(
            f"table {table.qualified} has no primary key or unique index on NOT NULL columns "
            "(the replay finds a changed row by its key)"
        )
        return found
    try:
        statement = parse(form.sql)
    except ValueError as exc:
        return [*found, str(exc)]
    kinds = dict(conn.execute(Q["constraint_kinds"], params).fetchall())
    return found + statement_refusals(statement, table.key, kinds)


def _shape(table: Table) -> list[str]:
    name = table.qualified
    found: list[str] = []
    if table.kind == "p":
        found.append(f"table {name} is partitioned")
    elif table.kind != "r":
        found.append(f"{name} is not an ordinary table (relkind {table.kind})")
    if table.partition:
        found.append(f"table {name} is a partition")
    if table.persistence == "t":
        found.append(f"table {name} is temporary")
    if table.typed:
        found.append(f"table {name} is a typed table (OF a composite type)")
    # the rebuild's own relations in the shadow schema (log, its index and sequence, ledger)
    # are named queueguard_…: none of the relations moving there may be
    if table.schema in (SHADOW_SCHEMA, OLD_SCHEMA) or any(
        n.startswith("queueguard_") for n in {table.name, *table.moving}
    ):
        found.append(f"table {name}: it or an index of it has a name the rebuild uses itself")
    return found


def _inheritance(conn: psycopg.Connection[Any], table: Table) -> list[tuple[str, str]]:
    rows = conn.execute(Q["inheritance"], {"oid": table.oid}).fetchall()
    return [(f"inheritance {role} {other}", role) for other, role in rows]
