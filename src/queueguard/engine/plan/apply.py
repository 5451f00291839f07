"""Applying a revision's SQL statements one transaction per revision, the way `upgrade` does:
each statement is tried inside the transaction; one that PostgreSQL refuses there (SQLSTATE
25001, "cannot run inside a transaction block") commits what came before and runs alone,
outside, and the revision goes on in a new transaction.

`plan` applies on a scratch copy with an observer around every statement.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from queueguard.engine.plan import sample
from queueguard.engine.plan.observe import (
    Observation,
    WalMeter,
    diff,
    new_files,
    outside,
    state,
)
from queueguard.sets.split import code_of, is_transaction_control

__all__ = ["code_of", "is_transaction_control", "traced"]

NOT_IN_A_TRANSACTION = "25001"
#: a statement that rewrote a relation and took at least REPEAT_ABOVE_S on the sample, and
#: less than REPEAT_BELOW_S, is timed `REPEATS` times and its median taken (`_median_of_runs`).
#: A short run swings with a scheduler tick or a checkpoint; a run of seconds spans them, and
#: repeating it multiplied the longest step of `plan` (and of `upgrade --online`'s sample):
#: Temporal's visibility rewrite, 26 s on a 100 k-row sample, ran 78 s there
REPEAT_ABOVE_S = 0.05
REPEAT_BELOW_S = 5.0
REPEATS = 3
FOREIGN_KEY_VIOLATION = "23503"
_MISSING_PARENT = re.compile(
    r'Key \((?P<cols>[^)]*)\)=\(.*\) is not present in table "(?P<parent>[^"]+)"'
)
_REFERENCES = re.compile(r"REFERENCES\s+(?P<table>[\w.\"]+)\s*(\((?P<cols>[^)]*)\))?", re.I)


class StatementFailed(Exception):
    """A statement of the revision failed: which one, and PostgreSQL's error."""

    def __init__(self, index: int, statement: str, error: psycopg.Error) -> None:
        self.index = index
        self.statement = statement
        self.error = error
        super().__init__(f"statement {index + 1} failed: {first_line(error)}")


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def traced(conn: psycopg.Connection[Any], dsn: str, statements: Sequence[str]) -> list[Observation]:
    """Apply `statements` on `conn` (the scratch copy at `dsn`) and watch each; what each did,
    in order (transaction control left out).

    Each statement runs in a transaction of its own here, so that its locks are its own:
    inside one transaction a lock an earlier statement took hides the same lock taken again.
    The bill then holds every lock to the revision's commit, as `upgrade` will (`bill.held`).
    """
    conn.autocommit = False
    seen: list[Observation] = []
    meter = WalMeter(conn)
    for index, statement in enumerate(statements):
        if is_transaction_control(statement):
            continue
        wal_before = meter.mark(conn)
        error: psycopg.Error | None = None
        for _attempt in range(10):
            before = state(conn)
            started = time.perf_counter()
            try:
                conn.execute(statement)
                error = None
            except psycopg.Error as exc:
                conn.rollback()
                error = exc
                if exc.sqlstate == FOREIGN_KEY_VIOLATION and drop_orphans(conn, exc, statement):
                    continue  # a sample artifact: the parent row was not sampled
            break
        if error is not None:
            if error.sqlstate != NOT_IN_A_TRANSACTION:
                raise StatementFailed(index, statement, error) from error
            conn.autocommit = True
            try:
                observed = outside(conn, dsn, statement)
                observed.disk_bytes = new_files(conn, [*observed.rewrites, *observed.created])
            except psycopg.Error as inner:
                raise StatementFailed(index, statement, inner) from inner
            finally:
                conn.autocommit = False
            _metered(observed, meter, conn, wal_before, 1)
            seen.append(observed)
            continue
        seconds = time.perf_counter() - started
        observed = diff(statement, before, state(conn), seconds)
        runs = 1
        if observed.rewrites and REPEAT_ABOVE_S <= seconds < REPEAT_BELOW_S:
            observed.seconds, runs = _median_of_runs(conn, statement, seconds), REPEATS
        observed.disk_bytes = new_files(conn, [*observed.rewrites, *observed.created])
        conn.commit()
        _metered(observed, meter, conn, wal_before, runs)
        seen.append(observed)
    return seen


def _metered(
    observed: Observation, meter: WalMeter, conn: psycopg.Connection[Any], before: int, runs: int
) -> None:
    """The statement's WAL: from the mark before it to one after its commit, shared by the
    runs of it a median took (a run rolled back writes what a committed one does)."""
    observed.wal_bytes = max(0, meter.mark(conn) - before) // runs
    observed.wal_own = meter.own


def _median_of_runs(conn: psycopg.Connection[Any], statement: str, first: float) -> float:
    """The median time of `REPEATS` runs of a statement that rewrote a relation: the one
    that ran, rolled back and run again, the last run kept (committed by the caller). One
    run's time swings with what else the machine does, and a rewrite's time is the one a
    bill scales most."""
    times = [first]
    for _ in range(REPEATS - 1):
        conn.rollback()
        started = time.perf_counter()
        conn.execute(statement)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def drop_orphans(conn: psycopg.Connection[Any], exc: psycopg.Error, statement: str) -> bool:
    """A new foreign key failed on the sample: the child row's parent was simply not among
    the rows sampled (the target's rows are the judge, not the sample's). Delete the sample's
    child rows without a parent; True if any went (the statement is then run again)."""
    detail = _MISSING_PARENT.search(exc.diag.message_detail or "")
    refs = _REFERENCES.search(statement)
    child = exc.diag.table_name
    if detail is None or refs is None or not child:
        return False
    child_cols = [c.strip() for c in detail["cols"].split(",")]
    parent = refs["table"]
    if refs["cols"]:
        parent_cols = [c.strip() for c in refs["cols"].split(",")]
    else:  # REFERENCES parent: its primary key
        rows = conn.execute(
            "SELECT quote_ident(a.attname) FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s::regclass AND i.indisprimary "
            "ORDER BY array_position(i.indkey, a.attnum)",
            (parent,),
        ).fetchall()
        parent_cols = [r[0] for r in rows]
    if len(parent_cols) != len(child_cols):
        return False
    schema = exc.diag.schema_name or "public"
    table = f'"{schema}"."{child}"'  # names from the server's message and the statement
    deleted = sample.delete_orphans(conn, table, child_cols, parent, parent_cols)
    conn.commit()
    return deleted > 0
