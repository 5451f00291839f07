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

Alembic projects run through their own env.py (`formats/alembic/runner`). The parts:
`session` (limits, the runner lock, a lost server), `progress` (queueguard_progress),
`outside` (a statement alone, outside a transaction), `in_flight` (a statement in its online
forms), `report` (what ran).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg

from queueguard.engine import topology
from queueguard.engine.apply import bookkeeping, half_applied, outside, progress
from queueguard.engine.apply.guards import Guards
from queueguard.engine.apply.in_flight import online_statement, with_flight
from queueguard.engine.apply.ladder import climb, gave_up
from queueguard.engine.apply.report import Step, UpgradeReport
from queueguard.engine.apply.session import APPLICATION_NAME, Limits, begin, online_name, stopped
from queueguard.engine.plan.apply import code_of, first_line, is_transaction_control
from queueguard.errors import MigrationError, TamperedMigration, UsageError
from queueguard.pg.connect import connect, connection_lost
from queueguard.sets import MigrationSet, Revision, sqldir, temporal

if TYPE_CHECKING:  # the online path (and pglast, its parser) is imported only when used
    from queueguard.engine.online.apply import OnlinePlan


def upgrade(
    mset: MigrationSet,
    dsn: str,
    *,
    to: str | None = None,
    limits: Limits | None = None,
    on_step: Callable[[Step], None] | None = None,
    online: OnlinePlan | None = None,
    stop: Callable[[], bool] | None = None,
    cancelled: threading.Event | None = None,
    guards: Guards | None = None,
) -> UpgradeReport:
    """Bring the database at `dsn` to `to` (default head) of the set; see the module doc.
    `online`: the statements that run in online forms instead (`upgrade --online`); the
    revision commits before each of them, so no statement waits on a long one after it.
    `stop`: asked before each revision of a SQL set after the first; True ends the upgrade
    there, at the revision before (`fleet`: a stopped run, a signal). `cancelled`: set, the
    statement running is cancelled (`fleet`: a lost lease; Django's runner is stopped, its
    migration rolled back). `guards`: what the set's owner refuses and adds around the
    revisions (`apply.guards`; queueguard's own set is upgraded with its own)."""
    limits = limits or Limits()
    if limits.retries < 0:
        raise UsageError(f"--retries takes a number of retries >= 0, got {limits.retries}")
    if limits.lock_timeout_ms < 1:  # PostgreSQL reads 0 as "no timeout": writers could wait
        raise UsageError(f"--lock-timeout must be at least 1ms, got {limits.lock_timeout_ms} ms")
    target = mset.resolve(to)
    if mset.format == "queueguard":  # revisions that take the runner lock themselves
        from queueguard.engine.formats.alembic import per_revision

        if guards is None:
            raise UsageError("queueguard's own set is upgraded with its guards")
        guards.check_files()
        return per_revision.upgrade(mset, dsn, target, limits, guards)
    if mset.format == "django":  # Django's own migrate, with queueguard's gates
        from queueguard.engine.formats.django import runner as django_upgrade

        if not any(r.statements is not None for r in mset.revisions):
            return django_upgrade.upgrade(mset, dsn, target, limits, on_step, cancelled)
        # `upgrade --online` runs some migrations as their captured SQL: those here, the
        # others through Django's migrate
        from queueguard.engine.formats.django import online as django_online

        return django_online.upgrade_in_parts(
            mset, dsn, target, limits, on_step,
            lambda view, end: _upgrade_sql(view, dsn, end, limits, on_step, online),
            stop, cancelled,
        )  # fmt: skip
    if mset.format == "alembic":  # imported here: Alembic and SQLAlchemy cost a second
        from queueguard.engine.formats.alembic import runner as alembic_runner

        if not any(r.statements is not None for r in mset.revisions):
            return alembic_runner.upgrade(mset, dsn, target, limits, on_step)
        # `upgrade --online` runs some revisions as their rendered SQL: those here, the
        # others through env.py
        return alembic_runner.upgrade_in_parts(
            mset, dsn, target, limits, on_step,
            lambda end: _upgrade_sql(mset, dsn, end, limits, on_step, online, stop),
        )  # fmt: skip
    return _upgrade_sql(mset, dsn, target, limits, on_step, online, stop)


def _upgrade_sql(
    mset: MigrationSet,
    dsn: str,
    target: str | None,
    limits: Limits,
    on_step: Callable[[Step], None] | None,
    online: OnlinePlan | None,
    stop: Callable[[], bool] | None = None,
) -> UpgradeReport:
    started = time.monotonic()
    name = APPLICATION_NAME if online is None else online_name()
    conn = connect(dsn, application_name=name)
    revision: str | None = None
    try:
        with conn.cursor() as cursor:
            topology.refuse_standby(cursor, "upgrade")
        conn.rollback()
        # Where the database is, read under the runner lock: another runner's revision is
        # either wholly there or not at all.
        begin(conn, limits, limits.lock_timeout_ms)
        before = bookkeeping.current(mset, conn)
        if mset.format == "sqldir":
            changed = sqldir.tampered(conn, mset)
            if changed:
                raise TamperedMigration("; ".join(changed))
        in_progress = progress.read(conn)
        online = with_flight(conn, online)
        report = UpgradeReport(mset.format, target, before)
        pending = mset.pending(before, target)
        if pending and pending[0].id not in in_progress:
            half_applied.refuse(conn, mset, pending[0])
        if mset.format == "temporal" and pending and temporal.current(conn) is None:
            temporal.setup(conn)  # what `setup-schema -v 0.0` writes, where nothing is
        previous = bookkeeping.current(mset, conn) or before
        conn.commit()
        for rev in pending:
            if stop is not None and rev is not pending[0] and stop():
                break
            revision = rev.id
            resume = in_progress.get(rev.id)
            done = _apply(conn, mset, rev, previous, limits, resume, report, on_step, online)
            if done:
                report.applied.append(rev.id)
                if rev.id in in_progress:
                    report.resumed.append(rev.id)
            else:
                report.skipped.append(rev.id)
            previous = rev.id
        revision = None
        report.after = bookkeeping.current(mset, conn)
        conn.rollback()
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    except psycopg.Error as exc:
        raise stopped(dsn, revision, exc) from exc
    finally:
        conn.close()


def _apply(
    conn: psycopg.Connection[Any],
    mset: MigrationSet,
    rev: Revision,
    previous: str | None,
    limits: Limits,
    resume: tuple[int, str] | None,
    report: UpgradeReport,
    on_step: Callable[[Step], None] | None,
    online: OnlinePlan | None = None,
) -> bool:
    """Apply one revision with the retry ladder; False if another runner applied it first."""
    if resume is not None and resume[1] != progress.checksum(rev):
        raise TamperedMigration(
            f"revision {rev.id} was left half applied (up to statement {resume[0]}) and its "
            "statements have changed since: restore the files it was started with"
        )

    def waited(_exc: Exception) -> None:
        nonlocal resume
        conn.rollback()
        report.lock_waits += 1
        resume = progress.read(conn).get(rev.id)
        conn.rollback()

    def give_up(timeout: int, _exc: Exception) -> Exception:
        kept = (
            f"statements 1–{resume[0]} stay applied, a rerun resumes there"
            if resume
            else "nothing was changed"
        )
        return gave_up(f"revision {rev.id}", limits.retries, timeout, kept)

    return climb(
        lambda timeout: _attempt(
            conn, mset, rev, previous, limits, timeout,
            resume[0] if resume is not None else 0, report, on_step, online,
        ),
        limits.lock_timeout_ms, limits.retries, waited=waited, give_up=give_up,
    )  # fmt: skip


def _attempt(
    conn: psycopg.Connection[Any],
    mset: MigrationSet,
    rev: Revision,
    previous: str | None,
    limits: Limits,
    timeout: int,
    start: int,
    report: UpgradeReport,
    on_step: Callable[[Step], None] | None,
    online: OnlinePlan | None = None,
) -> bool:
    statements = list(rev.statements or ())
    last = max((i for i, s in enumerate(statements) if not is_transaction_control(s)), default=-1)
    begin(conn, limits, timeout)
    at = bookkeeping.current(mset, conn)
    if not _unmoved(mset, rev, at, previous):
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
        found = online.at(rev.id, index) if online is not None else None
        if found is not None:
            from queueguard.engine.online import apply as online_apply

            assert online is not None
            progress.write(conn, rev, index, online_apply.encode(found[0]))
            _commit(conn, running, on_step)
            running = []
            for step in online_statement(
                conn, mset, rev, previous, limits, index, index == last, found, online
            ):
                _emit(step, on_step)
            if index == last:
                return True  # the bookkeeping was in the statement's last transaction
            begin(conn, limits, timeout)
            if not _still_mine(conn, mset, rev, previous, index + 1):
                conn.rollback()
                return False
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
            if exc.sqlstate != outside.NOT_IN_A_TRANSACTION:
                conn.rollback()
                raise _failed(rev, index, exc, committed=progress.committed(conn, rev)) from None
            conn.execute("ROLLBACK TO SAVEPOINT queueguard_statement")
            progress.write(conn, rev, index)
            _commit(conn, running, on_step)
            step = _outside(conn, rev, index, statement, limits, resumed=index == start)
            running = []
            _emit(step, on_step)
            begin(conn, limits, timeout)
            if not _still_mine(conn, mset, rev, previous, index):
                conn.rollback()
                return False  # another runner took the revision over meanwhile
            progress.write(conn, rev, index + 1)  # done: a rerun starts after it
            conn.commit()
            begin(conn, limits, timeout)
            continue
        conn.execute("RELEASE SAVEPOINT queueguard_statement")
        running.append(
            Step(rev.id, index, statement, True, time.perf_counter() - began, started=began)
        )
    bookkeeping.record(conn, mset, rev, previous)
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
    at = bookkeeping.current(mset, conn)
    unmoved = _unmoved(mset, rev, at, previous)
    return unmoved and progress.read(conn).get(rev.id, (None, ""))[0] == index


def _unmoved(mset: MigrationSet, rev: Revision, at: str | None, previous: str | None) -> bool:
    """The version is where this runner read it, under the runner lock (else another runner
    applied the revision meanwhile). A Django database's state is its applied set, in which
    other apps' rows may come and go: there, the migration (and what it replaces) is still
    unrecorded."""
    if mset.format == "django":
        from queueguard.sets.django import REPLACES
        from queueguard.sets.model import heads_of

        applied = set(heads_of(at))
        return not ({rev.id, *rev.native.get(REPLACES, ())} & applied)
    return at == previous or (previous is None and at in (None, temporal.INITIAL_VERSION))


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


def _failed(rev: Revision, index: int, exc: psycopg.Error, committed: int) -> MigrationError:
    kept = (
        f"statements 1–{committed} stay applied (they ran outside a transaction's reach); "
        "fix the cause and rerun: it resumes there"
        if committed
        else "nothing was changed"
    )
    error = MigrationError(
        f"revision {rev.id} failed at statement {index + 1} ({first_line(exc)}); {kept}\n"
        f"  {' '.join(rev.statements[index].split())[:200] if rev.statements else ''}"
    )
    error.sqlstate = exc.sqlstate
    return error


def _outside(
    conn: psycopg.Connection[Any],
    rev: Revision,
    index: int,
    statement: str,
    limits: Limits,
    *,
    resumed: bool,
) -> Step:
    """Run one statement alone, outside a transaction (see `outside`)."""
    try:
        began, took = outside.run_alone(conn, statement, limits, resumed=resumed)
    except psycopg.errors.LockNotAvailable:
        raise
    except psycopg.Error as exc:
        if connection_lost(exc):
            raise
        raise _failed(rev, index, exc, committed=index) from None
    return Step(rev.id, index, statement, False, took, took, started=began)
