"""`upgrade` for migration sets of other formats: what our own runner gives our set, given to
Temporal's schema, plain SQL directories and Alembic projects.

SQL formats (temporal, sqldir), per revision:
- one transaction holding the revision's statements and its bookkeeping (Temporal's
  schema_version upsert and schema_update_history row, our sqldir ledger row), so a failure
  leaves the database wholly at the previous revision;
- `lock_timeout` and `statement_timeout` on every statement (SET LOCAL), and on a lock
  timeout the whole revision is retried with a growing timeout (the runner's ladder), then
  given up with nothing changed;
- the runner lock (a transaction-scoped advisory lock, as for our own set) with the version
  re-read under it: a second runner finds the revision applied and skips it;
- a statement PostgreSQL refuses in a transaction block (SQLSTATE 25001: CREATE INDEX
  CONCURRENTLY, VACUUM, …) commits what came before together with a progress row in
  `queueguard_progress`, runs alone (under the session-level runner lock), and the revision
  goes on in a new transaction; the bookkeeping transaction drops the progress table, so a
  completed upgrade leaves nothing of ours behind. A rerun after a crash resumes at the
  recorded statement; an invalid index a failed concurrent build left is dropped and built
  again.

Alembic projects run through their own env.py, one `command.upgrade` per revision, with
lock_timeout and statement_timeout in the connection's options and the same retry ladder;
the runner lock is then held by a session of its own for the whole upgrade.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queueguard.errors import (
    ConnectionFailed,
    LockTimeout,
    MigrationError,
    RunnerBusy,
    TamperedMigration,
    UsageError,
)
from queueguard.pg.connect import connect, connection_lost
from queueguard.pg.dsn import redact
from queueguard.pg.sqlfiles import queries
from queueguard.sets import MigrationSet, Revision, sqldir, temporal
from queueguard.sets import alembic as alembic_format
from queueguard.upgrade import topology
from queueguard.upgrade.foreign import half_applied
from queueguard.upgrade.plan.apply import code_of, first_line, is_transaction_control
from queueguard.upgrade.runner import RETRY_GROWTH, RETRY_SLEEP_S, RUNNER_WAIT_S

Q = queries("queueguard.upgrade", "foreign.sql")
APPLICATION_NAME = "queueguard-upgrade"
NOT_IN_A_TRANSACTION = "25001"
_CONCURRENT_INDEX = re.compile(
    r"^CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(IF\s+NOT\s+EXISTS\s+)?"
    r"(?P<name>\"[^\"]+\"|[\w$]+)",
    re.IGNORECASE,
)


@dataclass
class Step:
    """One statement as it ran: for rehearse's report."""

    revision: str
    index: int
    sql: str
    transactional: bool
    seconds: float
    #: seconds from the statement's start to the end of its transaction (its locks' hold)
    held_s: float = 0.0
    started: float = field(default=0.0, repr=False)  # perf_counter at its start


@dataclass
class SetLintReport:
    format: str
    target: str | None
    before: str | None
    after: str | None = None
    applied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    lock_waits: int = 0
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_ms: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "target": self.target,
            "before": self.before,
            "after": self.after,
            "applied": self.applied,
            "skipped": self.skipped,
            "resumed": self.resumed,
            "lockWaits": self.lock_waits,
            "notes": self.notes,
            "elapsed_ms": self.elapsed_ms,
        }


@dataclass(frozen=True)
class Limits:
    lock_timeout_ms: int = 5000
    statement_timeout_ms: int = 3_600_000
    retries: int = 3
    runner_wait_s: float = RUNNER_WAIT_S


def checksum(revision: Revision) -> str:
    """What a progress row pins: the revision's statements (a resumed revision whose files
    changed meanwhile is refused)."""
    text = "\x00".join(revision.statements or ())
    return hashlib.sha256(text.encode()).hexdigest()


def current(mset: MigrationSet, conn: psycopg.Connection[Any]) -> str | None:
    """The revision the database is at, by the format's own bookkeeping (read only)."""
    if mset.format == "temporal":
        return temporal.current(conn)
    if mset.format == "sqldir":
        return sqldir.current(conn)
    raise UsageError(f"format {mset.format} is not read through this connection")


def upgrade(
    mset: MigrationSet,
    dsn: str,
    *,
    to: str | None = None,
    limits: Limits | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> SetLintReport:
    """Bring the database at `dsn` to `to` (default head) of the set; see the module doc."""
    limits = limits or Limits()
    if limits.lock_timeout_ms < 1:
        raise UsageError(f"--lock-timeout must be at least 1ms, got {limits.lock_timeout_ms} ms")
    if limits.retries < 0:
        raise UsageError(f"--retries takes a number of retries >= 0, got {limits.retries}")
    target = mset.resolve(to)
    if mset.format in ("alembic",):
        return _upgrade_alembic(mset, dsn, target, limits)
    started = time.monotonic()
    conn = connect(dsn, application_name=APPLICATION_NAME)
    revision: str | None = None
    try:
        with conn.cursor() as cursor:
            topology.refuse_standby(cursor, "upgrade")
        conn.rollback()
        # Where the database is, read under the runner lock: another runner's revision is
        # either wholly there or not at all.
        _begin(conn, limits, limits.lock_timeout_ms)
        before = current(mset, conn)
        if mset.format == "sqldir":
            changed = sqldir.tampered(conn, mset)
            if changed:
                raise TamperedMigration("; ".join(changed))
        progress = _progress(conn)
        report = SetLintReport(mset.format, target, before)
        pending = mset.pending(before, target)
        if pending and pending[0].id not in progress:
            half_applied.refuse(conn, mset, pending[0])
        if mset.format == "temporal" and pending and temporal.current(conn) is None:
            temporal.setup(conn)  # what `setup-schema -v 0.0` writes, where nothing is
        previous = current(mset, conn) or before
        conn.commit()
        for rev in pending:
            revision = rev.id
            done = _apply(conn, mset, rev, previous, limits, progress.get(rev.id), report, on_step)
            if done:
                report.applied.append(rev.id)
                if rev.id in progress:
                    report.resumed.append(rev.id)
            else:
                report.skipped.append(rev.id)
            previous = rev.id
        revision = None
        report.after = current(mset, conn)
        conn.rollback()
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    except psycopg.Error as exc:
        raise _stopped(dsn, revision, exc) from exc
    finally:
        conn.close()


def _stopped(dsn: str, revision: str | None, exc: psycopg.Error) -> Exception:
    """A database error no step handled, as one line: a lost server (exit 2) or the
    revision it stopped (exit 1)."""
    if connection_lost(exc):
        return ConnectionFailed(_lost(dsn, revision, exc))
    where = f"revision {revision}" if revision else "the upgrade"
    return MigrationError(f"{where} stopped: {first_line(exc)}")


def _lost(dsn: str, revision: str | None, exc: BaseException) -> str:
    where = f"during revision {revision}" if revision else "between revisions"
    return (
        f"lost the server {where} ({redact(dsn)}: {first_line(exc)}); a revision commits "
        "whole or, past a statement that runs outside a transaction, resumes where it "
        "stopped: rerun queueguard upgrade against the primary, it is safe"
    )


def _progress(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, str]]:
    row = conn.execute(Q["progress_exists"]).fetchone()
    if not row or not row[0]:
        return {}
    return {r[0]: (int(r[1]), str(r[2])) for r in conn.execute(Q["progress_read"]).fetchall()}


def _begin(conn: psycopg.Connection[Any], limits: Limits, lock_timeout_ms: int) -> None:
    """A revision transaction: the runner lock, then the revision's own timeouts."""
    _runner_lock(conn, "runner_lock_try", limits)
    conn.execute(f"SET LOCAL lock_timeout = {lock_timeout_ms}")
    conn.execute(f"SET LOCAL statement_timeout = {limits.statement_timeout_ms}")


def _runner_lock(conn: psycopg.Connection[Any], query: str, limits: Limits) -> None:
    """Take the runner lock (`query`: transaction- or session-level) by polling, never by
    waiting inside a statement: a waiting statement holds a snapshot, and another runner's
    `CREATE INDEX CONCURRENTLY` waits for every older snapshot to end while that runner
    holds the lock — a deadlock. Between tries the transaction, if any, is rolled back."""
    deadline = time.monotonic() + limits.runner_wait_s
    pause = 0.02
    while True:
        row = conn.execute(Q[query]).fetchone()
        if row and row[0]:
            return
        conn.rollback()
        if time.monotonic() >= deadline:
            raise RunnerBusy(int(limits.runner_wait_s * 1000))
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _apply(
    conn: psycopg.Connection[Any],
    mset: MigrationSet,
    rev: Revision,
    previous: str | None,
    limits: Limits,
    resume: tuple[int, str] | None,
    report: SetLintReport,
    on_step: Callable[[Step], None] | None,
) -> bool:
    """Apply one revision with the retry ladder; False if another runner applied it first."""
    timeout = limits.lock_timeout_ms
    if resume is not None and resume[1] != checksum(rev):
        raise TamperedMigration(
            f"revision {rev.id} was left half applied (up to statement {resume[0]}) and its "
            "statements have changed since: restore the files it was started with"
        )
    for attempt in range(limits.retries + 1):
        start = resume[0] if resume is not None else 0
        try:
            return _attempt(conn, mset, rev, previous, limits, timeout, start, report, on_step)
        except psycopg.errors.LockNotAvailable:
            conn.rollback()
            report.lock_waits += 1
            resume = _progress(conn).get(rev.id)
            conn.rollback()
            if attempt == limits.retries:
                kept = (
                    f"statements 1–{resume[0]} stay applied, a rerun resumes there"
                    if resume
                    else "nothing was changed"
                )
                raise LockTimeout(
                    f"revision {rev.id}: could not get its locks after {limits.retries + 1} "
                    f"attempts (last lock_timeout {timeout} ms); {kept}"
                ) from None
            time.sleep(random.uniform(*RETRY_SLEEP_S) * (attempt + 1))
            timeout = int(timeout * RETRY_GROWTH)
    raise AssertionError("unreachable")


def _attempt(
    conn: psycopg.Connection[Any],
    mset: MigrationSet,
    rev: Revision,
    previous: str | None,
    limits: Limits,
    timeout: int,
    start: int,
    report: SetLintReport,
    on_step: Callable[[Step], None] | None,
) -> bool:
    statements = list(rev.statements or ())
    _begin(conn, limits, timeout)
    at = current(mset, conn)
    if at != previous and not (previous is None and at in (None, temporal.INITIAL_VERSION)):
        conn.rollback()
        return False  # another runner moved the version under the runner lock
    running: list[Step] = []  # this transaction's statements: held until its commit
    for index in range(start, len(statements)):
        statement = statements[index]
        if is_transaction_control(statement):
            report.notes.append(
                f"{rev.id} statement {index + 1}: {code_of(statement)[:40]} left out"
            )
            continue
        conn.execute("SAVEPOINT queueguard_statement")
        began = time.perf_counter()
        try:
            conn.execute(statement)
        except psycopg.errors.LockNotAvailable:
            raise
        except psycopg.Error as exc:
            if connection_lost(exc):
                raise
            if exc.sqlstate != NOT_IN_A_TRANSACTION:
                conn.rollback()
                raise _failed(rev, index, exc, committed=_committed(conn, rev)) from None
            conn.execute("ROLLBACK TO SAVEPOINT queueguard_statement")
            _write_progress(conn, rev, index)
            _commit(conn, running, on_step)
            step = _outside(conn, rev, index, statement, limits, resumed=index == start)
            running = []
            _emit(step, on_step)
            _begin(conn, limits, timeout)
            if not _still_mine(conn, mset, rev, previous, index):
                conn.rollback()
                return False  # another runner took the revision over meanwhile
            _write_progress(conn, rev, index + 1)  # done: a rerun starts after it
            conn.commit()
            _begin(conn, limits, timeout)
            continue
        conn.execute("RELEASE SAVEPOINT queueguard_statement")
        running.append(
            Step(rev.id, index, statement, True, time.perf_counter() - began, started=began)
        )
    _bookkeeping(conn, mset, rev, previous)
    _commit(conn, running, on_step)
    return True


def _still_mine(
    conn: psycopg.Connection[Any],
    mset: MigrationSet,
    rev: Revision,
    previous: str | None,
    index: int,
) -> bool:
    """Between a statement run outside a transaction (under the session-level lock) and the
    next revision transaction the runner lock was free: the version and the progress row
    must be as this runner left them, or another runner has resumed the revision."""
    at = current(mset, conn)
    unmoved = at == previous or (previous is None and at in (None, temporal.INITIAL_VERSION))
    return unmoved and _progress(conn).get(rev.id, (None, ""))[0] == index


def _commit(
    conn: psycopg.Connection[Any], running: list[Step], on_step: Callable[[Step], None] | None
) -> None:
    conn.commit()
    ended = time.perf_counter()
    for step in running:
        step.held_s = ended - step.started  # its locks are held until the commit
        _emit(step, on_step)


def _emit(step: Step, on_step: Callable[[Step], None] | None) -> None:
    if on_step is not None:
        on_step(step)


def _write_progress(conn: psycopg.Connection[Any], rev: Revision, index: int) -> None:
    conn.execute(Q["progress_create"])
    conn.execute(
        Q["progress_write"], {"revision": rev.id, "statement": index, "sha256": checksum(rev)}
    )


def _committed(conn: psycopg.Connection[Any], rev: Revision) -> int:
    found = _progress(conn).get(rev.id)
    conn.rollback()
    return found[0] if found else 0


def _failed(rev: Revision, index: int, exc: psycopg.Error, committed: int) -> MigrationError:
    kept = (
        f"statements 1–{committed} stay applied (they ran outside a transaction's reach); "
        "fix the cause and rerun: it resumes there"
        if committed
        else "nothing was changed"
    )
    return MigrationError(
        f"revision {rev.id} failed at statement {index + 1} ({first_line(exc)}); {kept}\n"
        f"  {' '.join(rev.statements[index].split())[:200] if rev.statements else ''}"
    )


def _outside(
    conn: psycopg.Connection[Any],
    rev: Revision,
    index: int,
    statement: str,
    limits: Limits,
    *,
    resumed: bool,
) -> Step:
    """Run one statement alone, outside a transaction, under the session-level runner lock,
    with the revision's timeouts for the session (reset after)."""
    conn.autocommit = True
    began = time.perf_counter()
    try:
        _runner_lock(conn, "runner_session_lock_try", limits)
        conn.execute(f"SET lock_timeout = {limits.lock_timeout_ms}")
        conn.execute(f"SET statement_timeout = {limits.statement_timeout_ms}")
        index_name = _concurrent_index(statement)
        if index_name is not None:
            _rebuild_invalid(conn, index_name)
        began = time.perf_counter()
        try:
            conn.execute(statement)
        except psycopg.errors.DuplicateTable:
            if not (resumed and index_name is not None):
                raise
            # the build finished before the crash that kept its progress row from moving
        took = time.perf_counter() - began
        return Step(rev.id, index, statement, False, took, took, started=began)
    except psycopg.errors.LockNotAvailable:
        raise
    except psycopg.Error as exc:
        if connection_lost(exc):
            raise
        raise _failed(rev, index, exc, committed=index) from None
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("RESET lock_timeout")
            conn.execute("RESET statement_timeout")
            conn.execute(Q["runner_session_unlock"])
        conn.autocommit = False


def _concurrent_index(statement: str) -> str | None:
    """The name of the index a `CREATE INDEX CONCURRENTLY` builds, as the catalog spells it
    (unquoted names fold to lower case); None for a nameless one (PostgreSQL picks it)."""
    found = _CONCURRENT_INDEX.match(code_of(statement))
    if found is None or found["name"].upper() == "ON":
        return None
    name = found["name"]
    return name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


def _rebuild_invalid(conn: psycopg.Connection[Any], name: str) -> None:
    """An invalid index of that name is a failed concurrent build's remains: drop it, so the
    statement builds it again (never skip it as "already exists")."""
    row = conn.execute(Q["invalid_index"], {"name": name}).fetchone()
    if row is not None:
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {row[0]}")


def _bookkeeping(
    conn: psycopg.Connection[Any], mset: MigrationSet, rev: Revision, previous: str | None
) -> None:
    """The format's own record of the revision, and our progress table gone, in the
    revision's (last) transaction."""
    if mset.format == "temporal":
        temporal.record(conn, rev, previous or temporal.INITIAL_VERSION)
    elif mset.format == "sqldir":
        sqldir.ensure_ledger(conn)
        sqldir.record(conn, rev)
    row = conn.execute(Q["progress_exists"]).fetchone()
    if row and row[0]:
        conn.execute("DELETE FROM queueguard_progress WHERE revision = %s", (rev.id,))
        left = conn.execute("SELECT count(*) FROM queueguard_progress").fetchone()
        if left and not left[0]:
            conn.execute(Q["progress_drop"])


# Alembic ----------------------------------------------------------------------------------
def _upgrade_alembic(
    mset: MigrationSet, dsn: str, target: str | None, limits: Limits
) -> SetLintReport:
    started = time.monotonic()
    table = mset.version_table or alembic_format.DEFAULT_VERSION_TABLE
    lock = connect(dsn, application_name=APPLICATION_NAME, autocommit=True)
    revision: str | None = None
    try:
        with lock.cursor() as cursor:
            topology.refuse_standby(cursor, "upgrade")
        _runner_lock(lock, "runner_session_lock_try", limits)
        before = alembic_format.current(dsn, table)
        report = SetLintReport(mset.format, target, before)
        for rev in mset.pending(before, target):
            revision = rev.id
            _alembic_revision(mset, dsn, rev, limits, report)
            report.applied.append(rev.id)
        revision = None
        report.after = alembic_format.current(dsn, table)
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    except psycopg.Error as exc:
        raise _stopped(dsn, revision, exc) from exc
    finally:
        lock.close()


def _alembic_revision(
    mset: MigrationSet, dsn: str, rev: Revision, limits: Limits, report: SetLintReport
) -> None:
    timeout = limits.lock_timeout_ms
    for attempt in range(limits.retries + 1):
        options = f"-c lock_timeout={timeout} -c statement_timeout={limits.statement_timeout_ms}"
        try:
            alembic_format.run(mset.root, dsn, rev.id, options=options)
            return
        except MigrationError as exc:
            if not isinstance(_root_cause(exc), psycopg.errors.LockNotAvailable):
                raise
            report.lock_waits += 1
            if attempt == limits.retries:
                raise LockTimeout(
                    f"revision {rev.id}: could not get its locks after {limits.retries + 1} "
                    f"attempts (last lock_timeout {timeout} ms); its transaction rolled back"
                ) from None
            time.sleep(random.uniform(*RETRY_SLEEP_S) * (attempt + 1))
            timeout = int(timeout * RETRY_GROWTH)


def _root_cause(exc: BaseException) -> BaseException:
    seen = exc
    while seen.__cause__ is not None:
        seen = seen.__cause__
    return getattr(seen, "orig", None) or seen
