"""The shadow: the table's dump replayed under the table's own name in the shadow schema,
its dropped columns stood in for (so every attnum is the table's), and the statement applied
to it while it is empty — the rewrite then costs nothing.

Which of the table's indexes, constraints, triggers and policies the statement keeps (a
dropped column takes its indexes along) is learned first on a probe: the complete empty
shadow, every object on it, the statement applied, the survivors read, all rolled back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from queueguard.engine.online.names import quote
from queueguard.engine.online.rebuild.catalog import SHADOW_SCHEMA, Q, Table
from queueguard.engine.online.rebuild.copy import CopyPlan, plan
from queueguard.engine.online.rebuild.ddl import (
    INDEXES,
    SWAP,
    TABLE,
    Ddl,
    Step,
)
from queueguard.engine.online.rebuild.placeholders import trailing_placeholders
from queueguard.engine.online.rebuild.statement import Statement
from queueguard.errors import MigrationError


@dataclass(frozen=True)
class Build:
    """Everything the later phases need, learned while the shadow was made."""

    table: Table
    ddl: Ddl
    statement: Statement
    #: (kind, name) of what the statement keeps of the table's objects
    survivors: frozenset[tuple[str, str]]
    #: the shadow's columns after the statement
    columns: frozenset[str]
    copy: CopyPlan
    #: the shadow's storage parameters after the statement (table's, its TOAST table's):
    #: the swap gives them back once autovacuum, off while it is a shadow, is on again
    reloptions: tuple[tuple[str, ...], tuple[str, ...]]
    #: the table's definition when it was dumped (`rebuild_catalog.fingerprint`)
    fingerprint: str

    def steps(self, phase: str) -> list[Step]:
        return self.ddl.phase(phase, set(self.survivors))


def execute(conn: psycopg.Connection[Any], step: Step, text: str) -> None:
    for setting in step.settings:
        conn.execute(setting)
    conn.execute(text)


def _table_phase(conn: psycopg.Connection[Any], table: Table, ddl: Ddl) -> None:
    conn.execute(f"CREATE SCHEMA {SHADOW_SCHEMA}")
    grantor = ""
    for step in ddl.phase(TABLE):
        if step.authorization:  # a grant made by another role: it must reach the shadow
            grantor = quote(step.authorization)
            conn.execute(f"GRANT USAGE ON SCHEMA {SHADOW_SCHEMA} TO {grantor}")
        execute(conn, step, step.shadow)
        if step.authorization == "" and grantor:
            conn.execute(f"REVOKE USAGE ON SCHEMA {SHADOW_SCHEMA} FROM {grantor}")
            grantor = ""
    for text in trailing_placeholders(table):
        conn.execute(text)


def _apply(conn: psycopg.Connection[Any], table: Table, statement: Statement) -> None:
    try:
        with conn.transaction():
            conn.execute(statement.at(table.shadow))
    except psycopg.Error as exc:
        raise MigrationError(
            f"rebuild: the statement fails on an empty copy of {table.qualified}: "
            f"{str(exc).strip().splitlines()[0]}"
        ) from None


def _columns(conn: psycopg.Connection[Any], table: Table) -> frozenset[str]:
    rows = conn.execute(Q["shadow_columns"], {"shadow": table.shadow}).fetchall()
    return frozenset(r[1] for r in rows if not r[2])


def probe(
    conn: psycopg.Connection[Any], table: Table, ddl: Ddl, statement: Statement
) -> frozenset[tuple[str, str]]:
    """Run in a transaction that is rolled back: what the statement keeps."""
    _table_phase(conn, table, ddl)
    foreign_keys = {s.needs for s in ddl.phase(SWAP) if s.fk_columns is not None}
    for step in ddl.phase(INDEXES) + ddl.phase(SWAP):
        if step.needs not in foreign_keys:
            execute(conn, step, step.shadow)
    _apply(conn, table, statement)
    found = {(r[0], r[1]) for r in conn.execute(Q["survivors"], {"shadow": table.shadow})}
    columns = _columns(conn, table)
    for step in ddl.phase(SWAP):
        if step.fk_columns is not None and step.needs and set(step.fk_columns) <= columns:
            found.add(step.needs)
    return frozenset(found)


def create(
    conn: psycopg.Connection[Any],
    table: Table,
    ddl: Ddl,
    statement: Statement,
    survivors: frozenset[tuple[str, str]],
    fingerprint: str,
) -> Build:
    """The shadow with its columns, the statement applied, autovacuum off (an
    anti-wraparound one still comes, and the swap checks for it)."""
    _table_phase(conn, table, ddl)
    _apply(conn, table, statement)
    row = conn.execute(Q["reloptions"], {"table": table.shadow}).fetchone()
    assert row is not None
    reloptions = (tuple(row[0]), tuple(row[1]))
    toast = ", toast.autovacuum_enabled = false" if row[2] else ""
    conn.execute(f"ALTER TABLE {table.shadow} SET (autovacuum_enabled = false{toast})")
    copy = plan(conn, table, statement)
    columns = _columns(conn, table)
    return Build(table, ddl, statement, survivors, columns, copy, reloptions, fingerprint)
