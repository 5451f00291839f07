"""Holding the online path's autocommit statements to its lock ceiling, by observation.

Every transaction of `upgrade --online` checks its own locks before it commits
(`Session._within_ceiling`). A statement that must run outside a transaction block — the
marker index's `CREATE INDEX CONCURRENTLY` and `DROP INDEX CONCURRENTLY` — cannot look at
its own locks, and on a small table it finishes before anyone can sample them. So an
observer makes any lock above the ceiling *wait*, where it can be seen: for each table of the
schema, a second session holds the weakest mode that conflicts with every mode above the
table's ceiling and with none up to it (`locks.guard_above`: ROW EXCLUSIVE against a
SHARE UPDATE EXCLUSIVE ceiling, EXCLUSIVE against ACCESS SHARE, ACCESS EXCLUSIVE on a table
outside the ceiling). A third session reads `pg_locks` for the statement's backend until it
waits for something (a lock above the ceiling waits on the holder; a CONCURRENTLY build waits
for the holder's transaction to end), then judges what it holds and waits for, and lets go:
the statement then runs to its end. A plain `CREATE INDEX` waits for SHARE on tasks and is
reported; the CONCURRENTLY build holds SHARE UPDATE EXCLUSIVE, which writers never wait for.

verify's online check and its probe watch every autocommit statement this way
(`Session(watch=…)`); a production run has no observer (its transactions are checked as
always).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queueguard import revisions
from queueguard.engine import locks
from queueguard.errors import LockBudgetExceeded, MigrationError
from queueguard.pg.connect import connect
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine", "locks.sql")
APPLICATION_NAME = "queueguard-verify-watch"
#: outside the ceiling, as for the online path's transactions
OUTSIDE = locks.BOOKKEEPING | {revisions.ROLLOUT_TABLE}
#: how long the observer waits to take its own locks. On verify's scratch copies nothing but
#: autovacuum (cancelled after deadlock_timeout) can hold them, so this only bounds a wait
#: that ends at once on an idle machine: generous, since running out fails the online check
#: of a correct migration set, and waiting costs nothing when the lock is free
HOLD_TIMEOUT_MS = 30_000
POLL_S = 0.002


def plan(tables: list[str], ceiling: Mapping[str, str]) -> dict[str, str]:
    """{table: the mode to hold} for the current schema's `tables` (pure): every table but
    the bookkeeping, unless nothing is above its ceiling (or no mode separates it)."""
    held = {}
    for table in tables:
        if table in OUTSIDE:
            continue
        try:
            mode = locks.guard_above(ceiling.get(table))
        except ValueError:
            continue  # no mode separates this ceiling: seen only when sampled
        if mode is not None:
            held[table] = mode
    return held


class Watch:
    """The observer of one database's online run; `target` names the revision in errors."""

    def __init__(self, dsn: str, target: str, ceiling: Mapping[str, str] | None) -> None:
        self.dsn, self.target, self.ceiling = dsn, target, dict(ceiling or {})
        self.statements = 0  # how many autocommit statements were watched

    @contextmanager
    def statement(self, pid: int, what: str) -> Iterator[None]:
        """Around one autocommit statement of backend `pid`; raises LockBudgetExceeded
        afterwards if it held or waited for a lock above the ceiling."""
        holder = connect(self.dsn, application_name=APPLICATION_NAME)
        observer = connect(self.dsn, application_name=APPLICATION_NAME, autocommit=True)
        seen: dict[str, list[str]] = {}
        done = threading.Event()
        try:
            self._hold(holder)
            poller = threading.Thread(
                target=self._poll, args=(observer, holder, pid, done, seen), daemon=True
            )
            poller.start()
            try:
                yield
            finally:
                done.set()
                poller.join()
        finally:
            with contextlib.suppress(psycopg.Error):
                holder.rollback()
            holder.close()
            observer.close()
        self.statements += 1
        held = {table: locks.strongest(modes) for table, modes in seen.items()}
        problems = locks.above_ceiling(self.ceiling, held)
        if problems:
            raise LockBudgetExceeded(
                self.target, [str(p) for p in problems], online=what, observed=True
            )

    def _hold(self, holder: psycopg.Connection[TupleRow]) -> None:
        holder.execute(f"SET LOCAL lock_timeout = {HOLD_TIMEOUT_MS}")
        tables = [str(r[0]) for r in holder.execute(Q["tables"])]
        for table, mode in plan(tables, self.ceiling).items():
            try:
                holder.execute(
                    sql.SQL("LOCK TABLE {} IN {} MODE").format(sql.Identifier(table), sql.SQL(mode))
                )
            except psycopg.errors.LockNotAvailable:
                raise MigrationError(
                    f"the lock ceiling's observer could not hold {mode} on {table} within "
                    f"{HOLD_TIMEOUT_MS} ms (another session holds a conflicting lock)"
                ) from None

    def _poll(
        self,
        observer: psycopg.Connection[TupleRow],
        holder: psycopg.Connection[TupleRow],
        pid: int,
        done: threading.Event,
        seen: dict[str, list[str]],
    ) -> None:
        """Record the backend's table locks until it waits for anything, then let go (also
        if the observer itself fails: the statement must never wait for it forever)."""
        try:
            while not done.is_set():
                found = observer.execute(Q["backend_locks"], {"pid": pid}).fetchall()
                for table, mode, _granted in found:
                    if table is not None:
                        seen.setdefault(str(table), []).append(locks.mode_of(str(mode)))
                if any(not granted for _table, _mode, granted in found):
                    return  # judged: the statement may go on
                time.sleep(POLL_S)
        finally:
            with contextlib.suppress(psycopg.Error):
                holder.rollback()
