"""One online migrator's connection: short transactions under the rollout's bounds and lease.

Every batch and every DDL step of `upgrade --online` is one `Session.transaction`: SET LOCAL
lock_timeout and statement_timeout, then the migrator's lease (taken or renewed on the rollout
row, which also re-checks the phase), then the work, then COMMIT. Nothing outlives the
transaction, so it works through a transaction pooler; a killed migrator leaves a lease that
expires by itself. A lock timeout rolls the batch back and retries it with growing, jittered
waits (pgroll and reshape do the same); committed batches stay valid whatever happens next.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg.rows import TupleRow

from queueguard import revisions
from queueguard.engine import locks, topology
from queueguard.engine.apply.ladder import climb
from queueguard.errors import (
    ConnectionFailed,
    LockBudgetExceeded,
    LockTimeout,
    MigrationError,
    MigratorBusy,
    RolloutRefused,
    RunnerBusy,
    UsageError,
)
from queueguard.pg.connect import connect, connection_lost
from queueguard.pg.dsn import redact
from queueguard.pg.sqlfiles import parse_named
from queueguard.queue_schema.manifest import online_files
from queueguard.queue_schema.online.watch import Watch
from queueguard.revisions import SetFacts

T = TypeVar("T")
Cursor = psycopg.Cursor[TupleRow]
APPLICATION_NAME = "queueguard-online"
#: what a transaction of the rollout waits out and retries: a lock timeout, or the runner
#: lock another runner holds
LOCK_WAITS = (psycopg.errors.LockNotAvailable, RunnerBusy)


def _backoff(tries: int) -> float:
    """The pause before retry number `tries`: exponential, capped at 2 s, jittered."""
    return min(2.0, 0.05 * 2.0**tries) * random.uniform(0.5, 1.5)


@dataclass(frozen=True)
class Knobs:
    """How hard the online upgrade may push (docs/upgrade.md, "Knobs")."""

    batch_size: int = 1000  # rows (or queues) per batch transaction
    pause_s: float = 0.0  # sleep between batches
    lock_timeout_ms: int = 500  # per statement; a batch that hits it is retried
    retries: int = 10  # lock-timeout retries of one batch before migrate stops
    statement_timeout_ms: int = 60_000
    lease_s: float = 15.0  # how long a killed migrator can block a rerun
    wait_s: float = 30.0  # how long to wait for another migrator's lease
    max_lag_s: float | None = 10.0  # pause while a streaming standby is further behind

    def validate(self) -> Knobs:
        if self.batch_size < 1:
            raise UsageError(f"--batch-size takes a number of rows >= 1, got {self.batch_size}")
        if self.lock_timeout_ms < 1:
            raise UsageError("--lock-timeout must be at least 1ms (0 would mean no timeout)")
        if self.retries < 0 or self.pause_s < 0 or self.wait_s < 0:
            raise UsageError("--retries, --pause and --wait take values >= 0")
        if self.lease_s < 1:
            raise UsageError(f"--lease must be at least 1s, got {self.lease_s}")
        if self.max_lag_s is not None and self.max_lag_s <= 0:
            raise UsageError("--max-lag takes a positive duration")
        return self


def statements(migrations: SetFacts, target: str) -> dict[str, dict[str, str]]:
    """The online path's named statements, per file, from `sql/<target>/online/`: they belong
    to the revision, beside its offline steps."""
    files = online_files(target, Path(migrations.root))
    if not files:
        raise UsageError(f"revision {target} has no online path (no sql/{target}/online/)")
    return {p.stem: parse_named(p.read_text(encoding="utf-8")) for p in files}


class _LeaseBusy(Exception):
    pass


class PhaseMoved(RolloutRefused):
    """The rollout left the phases a step runs in (or ended): another migrator moved it on
    while this one waited for the lease. `run` asks the phase once more where it stands."""


class Session:
    """A migrator: one connection, a holder id, and the transaction discipline above."""

    def __init__(
        self,
        dsn: str,
        *,
        target: str,
        sql: dict[str, dict[str, str]],
        knobs: Knobs,
        ceiling: dict[str, str] | None = None,
        stop: threading.Event | None = None,
        watch: Watch | None = None,
    ) -> None:
        """`ceiling`: the revision's `online_locks` (None: no lock on any table); `watch`:
        an observer that holds the autocommit statements to it too (verify's)."""
        #: the standbys' lag through this migrator's batches (`--max-lag`)
        self.lag_watch = topology.LagWatch()
        self.dsn, self.target, self.sql, self.knobs = dsn, target, sql, knobs
        self.ceiling = ceiling or {}
        self.watch = watch
        self.stop = stop or threading.Event()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.conn = connect(dsn, application_name=APPLICATION_NAME)
        self.lock_waits = 0
        self.batches = 0

    def close(self) -> None:
        try:
            if not self.conn.closed and not self.conn.broken:
                self.conn.rollback()
        except psycopg.Error:
            pass
        self.conn.close()

    def q(self, name: str) -> str:
        """Statement `file.name` of the online path."""
        file, _, statement = name.partition(".")
        return self.sql[file][statement]

    def lost(self, exc: BaseException) -> ConnectionFailed:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return ConnectionFailed(
            f"lost the server ({redact(self.dsn)}: {first}); "
            "committed batches are valid: rerun `queueguard upgrade --online` to resume"
        )

    def read(self, work: Callable[[Cursor], T]) -> T:
        """A read in a transaction of its own, rolled back (no lease, no writes)."""
        try:
            with self._loss_reported(), self.conn.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {self.knobs.lock_timeout_ms}")
                cursor.execute(f"SET LOCAL statement_timeout = {self.knobs.statement_timeout_ms}")
                return work(cursor)
        finally:
            if not self.conn.broken:
                self._rollback()

    def transaction(
        self,
        work: Callable[[Cursor], T],
        *,
        phases: tuple[str, ...] | None,
        what: str,
    ) -> T:
        """`work` in one short transaction under the lease; `phases`: the rollout phases in
        which it may run (None: no lease, e.g. before the rollout record exists)."""
        busy_since: float | None = None

        def attempt(_timeout: int) -> T:
            nonlocal busy_since
            while True:
                try:
                    return self._once(work, phases, what)
                except _LeaseBusy:
                    self._rollback()
                    if busy_since is None:
                        busy_since = time.monotonic()
                    waited = time.monotonic() - busy_since
                    if waited >= self.knobs.wait_s:
                        raise MigratorBusy(self._holder(), waited) from None
                    time.sleep(min(0.5, self.knobs.lease_s / 4))

        def waited(_exc: Exception) -> None:
            self._rollback()
            self.lock_waits += 1

        def give_up(_timeout: int, _exc: Exception) -> Exception:
            return LockTimeout(
                f"{what}: no lock within {self.knobs.lock_timeout_ms} ms after "
                f"{self.knobs.retries + 1} attempts; committed batches are valid, rerun to resume"
            )

        return climb(
            attempt, self.knobs.lock_timeout_ms, self.knobs.retries,
            give_up=give_up, waited=waited, growth=1.0, pause=_backoff,
            # the runner lock another runner holds is waited for on the same schedule
            lock_wait=lambda exc: "" if isinstance(exc, LOCK_WAITS) else None,
        )  # fmt: skip

    def _once(self, work: Callable[[Cursor], T], phases: tuple[str, ...] | None, what: str) -> T:
        try:
            with self.conn.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {self.knobs.lock_timeout_ms}")
                cursor.execute(f"SET LOCAL statement_timeout = {self.knobs.statement_timeout_ms}")
                if phases is not None:
                    self._lease(cursor, phases, what)
                result = work(cursor)
                self._within_ceiling(cursor, what)
            self.conn.commit()
            self.batches += 1
            return result
        except (_LeaseBusy, *LOCK_WAITS):
            raise  # the caller rolls back and waits
        except psycopg.errors.QueryCanceled as exc:
            self._rollback()
            raise MigrationError(
                f"{what}: statement timeout ({exc}); committed batches are valid, rerun "
                "with a smaller --batch-size or a larger --statement-timeout"
            ) from None
        except psycopg.OperationalError as exc:
            if connection_lost(exc):
                raise self.lost(exc) from None
            self._rollback()
            raise
        except BaseException:
            if not self.conn.broken:
                self._rollback()
            raise

    def _within_ceiling(self, cursor: Cursor, what: str) -> None:
        """Before commit: the locks this transaction holds stay within the revision's online
        ceiling (`online_locks`), or it rolls back naming table, mode and ceiling. The rollout
        record is the online path's own bookkeeping, outside the ceiling."""
        held = locks.held_tables(cursor, locks.BOOKKEEPING | {revisions.ROLLOUT_TABLE})
        problems = locks.above_ceiling(self.ceiling, held)
        if problems:
            raise LockBudgetExceeded(self.target, [str(p) for p in problems], online=what)

    def autocommit(self, statement: str, what: str = "autocommit") -> None:
        """One statement outside a transaction block (CREATE/DROP INDEX CONCURRENTLY); a
        `watch` holds it to the ceiling from outside (`online.watch`)."""
        self.conn.autocommit = True
        try:
            watched = (
                self.watch.statement(self.conn.info.backend_pid, what)
                if self.watch is not None
                else contextlib.nullcontext()
            )
            with self._loss_reported(), watched:
                self.conn.execute(statement)
        finally:
            if not self.conn.broken:
                self.conn.autocommit = False

    def _rollback(self) -> None:
        """Roll back; a shutdown can land on the rollback itself: said as a lost server too
        (it escaped as a traceback once, the server stopped between a read and its
        rollback)."""
        with self._loss_reported():
            self.conn.rollback()

    @contextmanager
    def _loss_reported(self) -> Iterator[None]:
        """A lost server becomes ConnectionFailed (one line); other errors pass through."""
        try:
            yield
        except psycopg.OperationalError as exc:
            if connection_lost(exc):
                raise self.lost(exc) from None
            raise

    def _lease(self, cursor: Cursor, phases: tuple[str, ...], what: str) -> None:
        params = {"target": self.target, "holder": self.holder, "lease_s": self.knobs.lease_s}
        gone = f"{what}: no online rollout to {self.target} in progress"
        try:
            cursor.execute(self.q("rollout.take_lease"), params)
        except psycopg.errors.UndefinedTable:  # contract or abort dropped the record meanwhile
            raise PhaseMoved(gone) from None
        row = cursor.fetchone()
        if row is None:
            if not self._rollout_exists(cursor):
                raise PhaseMoved(gone)
            raise _LeaseBusy
        if row[0] not in phases:
            raise PhaseMoved(
                f"{what}: the rollout to {self.target} is in phase {row[0]}, not "
                + " or ".join(phases)
            )

    def _rollout_exists(self, cursor: Cursor) -> bool:
        cursor.execute(self.q("rollout.read"), {"target": self.target})
        return cursor.fetchone() is not None

    def _holder(self) -> str:
        def holder(cursor: Cursor) -> str:
            cursor.execute(self.q("rollout.read"), {"target": self.target})
            row: Any = cursor.fetchone()
            return str(row[3]) if row else "unknown"

        return self.read(holder)

    def release(self) -> None:
        """Give the lease back (a rerun or another migrator need not wait for it)."""
        try:
            with self.conn.cursor() as cursor:
                params = {"target": self.target, "holder": self.holder}
                cursor.execute(self.q("rollout.release_lease"), params)
            self.conn.commit()
        except psycopg.Error:
            if not self.conn.broken:
                self.conn.rollback()
