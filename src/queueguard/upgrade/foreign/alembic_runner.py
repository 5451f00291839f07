"""`upgrade` of an Alembic project: through its own env.py, one `command.upgrade` per
revision, with lock_timeout and statement_timeout in the connection's options and the
runner's retry ladder; the runner lock is held by a session of its own for the whole
upgrade."""

from __future__ import annotations

import random
import time

import psycopg

from queueguard.errors import LockTimeout, MigrationError
from queueguard.pg.connect import connect
from queueguard.sets import MigrationSet, Revision
from queueguard.sets import alembic as alembic_format
from queueguard.upgrade import topology
from queueguard.upgrade.foreign.report import SetUpgradeReport
from queueguard.upgrade.foreign.session import APPLICATION_NAME, Limits, runner_lock, stopped
from queueguard.upgrade.runner import RETRY_GROWTH, RETRY_SLEEP_S


def upgrade(mset: MigrationSet, dsn: str, target: str | None, limits: Limits) -> SetUpgradeReport:
    started = time.monotonic()
    table = mset.version_table or alembic_format.DEFAULT_VERSION_TABLE
    lock = connect(dsn, application_name=APPLICATION_NAME, autocommit=True)
    revision: str | None = None
    try:
        with lock.cursor() as cursor:
            topology.refuse_standby(cursor, "upgrade")
        runner_lock(lock, "runner_session_lock_try", limits)
        before = alembic_format.current(dsn, table)
        report = SetUpgradeReport(mset.format, target, before)
        for rev in mset.pending(before, target):
            revision = rev.id
            _alembic_revision(mset, dsn, rev, limits, report)
            report.applied.append(rev.id)
        revision = None
        report.after = alembic_format.current(dsn, table)
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    except psycopg.Error as exc:
        raise stopped(dsn, revision, exc) from exc
    finally:
        lock.close()


def _alembic_revision(
    mset: MigrationSet, dsn: str, rev: Revision, limits: Limits, report: SetUpgradeReport
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
