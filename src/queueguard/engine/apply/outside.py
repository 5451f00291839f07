"""A statement PostgreSQL refuses in a transaction block (SQLSTATE 25001: `CREATE INDEX
CONCURRENTLY`, `VACUUM`, …), run alone under the session-level runner lock with the
revision's timeouts (a concurrent build: its table's lock seen free under the lock
timeout, then only the statement timeout); a concurrent build that a crash interrupted is
built again."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from queueguard.engine.apply import runner_lock
from queueguard.engine.apply.session import Limits
from queueguard.pg.sqlfiles import queries

if TYPE_CHECKING:  # PostgreSQL's parser, imported when a statement runs outside a transaction
    from pglast import ast

Q = queries("queueguard.engine.apply", "session.sql")
NOT_IN_A_TRANSACTION = "25001"


def run_alone(
    conn: psycopg.Connection[Any], statement: str, limits: Limits, *, resumed: bool
) -> tuple[float, float]:
    """Run `statement` in autocommit under the session-level runner lock, with the
    revision's timeouts for the session (reset after); (perf_counter at its start, seconds
    it took). Database errors propagate."""
    conn.autocommit = True
    began = time.perf_counter()
    try:
        runner_lock.take_for_statement(conn, limits.runner_wait_s, restart=conn.rollback)
        conn.execute(f"SET lock_timeout = {limits.lock_timeout_ms}")
        conn.execute(f"SET statement_timeout = {limits.statement_timeout_ms}")
        build = concurrent_build(statement)
        index_name = build.idxname if build is not None else None
        if index_name is not None:
            rebuild_invalid(conn, index_name)
        if build is not None and build.relation is not None:
            # A concurrent build holds nobody up while it waits: its SHARE UPDATE EXCLUSIVE
            # conflicts with no reader's or writer's lock (none of them queues behind it),
            # and its waits for the transactions older than it block nothing. Under
            # lock_timeout a writer's slow transaction made the build give up and start its
            # scans over, once per rung of the ladder (seen at 1 M rows: 11 times, then
            # LockTimeout). So the build waits as PostgreSQL's own does, bounded by the
            # statement timeout — once its table's lock was seen free under lock_timeout:
            # whoever holds the table itself (an anti-wraparound autovacuum, DDL) still
            # makes it retry on the ladder, then stop.
            _lockable(conn, _table(build.relation), limits.lock_timeout_ms)
            conn.execute("SET lock_timeout = 0")
        began = time.perf_counter()
        try:
            conn.execute(statement)
        except psycopg.errors.DuplicateTable:
            if not (resumed and index_name is not None):
                raise
            # the build finished before the crash that kept its progress row from moving
        return began, time.perf_counter() - began
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("RESET lock_timeout")
            conn.execute("RESET statement_timeout")
            runner_lock.release_statement(conn)
        conn.autocommit = False


def concurrent_build(statement: str) -> ast.IndexStmt | None:
    """PostgreSQL's parse of a `CREATE [UNIQUE] INDEX CONCURRENTLY` (its `idxname` as the
    catalog spells it, None for a nameless one); None for any other statement."""
    import pglast
    from pglast import ast

    try:
        parsed = pglast.parse_sql(statement)
    except pglast.parser.ParseError:
        return None
    if len(parsed) != 1 or not isinstance(node := parsed[0].stmt, ast.IndexStmt):
        return None
    return node if node.concurrent else None


def _table(relation: ast.RangeVar) -> sql.Composable:
    return sql.Identifier(*[n for n in (relation.schemaname, relation.relname) if n])


def _lockable(conn: psycopg.Connection[Any], table: sql.Composable, timeout_ms: int) -> None:
    """The build's own lock on its table taken and let go at once, under lock_timeout
    (LockNotAvailable: someone holds the table)."""
    with conn.transaction():
        conn.execute(f"SET LOCAL lock_timeout = {timeout_ms}")
        conn.execute(sql.SQL("LOCK TABLE ONLY {} IN SHARE UPDATE EXCLUSIVE MODE").format(table))


def rebuild_invalid(conn: psycopg.Connection[Any], name: str) -> None:
    """An invalid index of that name is a failed concurrent build's remains: drop it, so the
    statement builds it again (never skip it as "already exists")."""
    row = conn.execute(Q["invalid_index"], {"name": name}).fetchone()
    if row is not None:
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {row[0]}")
