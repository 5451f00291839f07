"""The upgrade runner: Alembic plus what production needs around it.

- one runner at a time: a transaction-scoped advisory lock inside every revision's
  transaction, with the version row re-read under it, so exclusivity holds through a
  transaction pooler and a killed runner leaves no lock behind; a second runner waits a
  bounded time, then finds the revision applied ("already at head") or fails cleanly;
- refuses a hot standby before touching anything; a server lost mid-revision ends with one
  line (its outcome unknown, a rerun is safe) and exit 2;
- refuses while hosts of an older protocol are connected (unless forced);
- runs one revision per transaction, retrying a revision that hit its lock timeout with
  growing timeouts and jitter (GitLab's with_lock_retries), then fails cleanly;
- returns a report; the CLI renders it.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import sqlalchemy as sa
from alembic import command

from queueguard import revisions
from queueguard.engine import topology
from queueguard.engine.apply import runner_lock
from queueguard.engine.apply.ladder import RUNNER_WAIT_S, climb
from queueguard.engine.apply.report import UpgradeReport
from queueguard.engine.apply.session import lost
from queueguard.errors import (
    AlreadyApplied,
    ConnectionFailed,
    LockTimeout,
    MigrationError,
    OlderHostsConnected,
    RolloutInProgress,
    RunnerBusy,
    UnknownSchema,
    UsageError,
)
from queueguard.pg.connect import connection_lost
from queueguard.pg.connect import reason as driver_reason
from queueguard.pg.dsn import redact
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import audit, manifest
from queueguard.queue_schema.alembic_config import config, engine_for
from queueguard.revisions import VERSION_TABLE, SetFacts
from queueguard.stores import schema

Q = queries("queueguard.queue_schema", "upgrade.sql")
T = TypeVar("T")
#: Alembic keeps its running migration context in module globals (`alembic.context`,
#: `alembic.op`): two threads of one process must not run it at once (hosts may install the
#: head schema from several threads). Across processes the runner lock serialises them.
ALEMBIC = threading.Lock()


def render_sql(
    to: str = "head", start: str | None = None, migrations: SetFacts | None = None
) -> str:
    """The SQL an upgrade would run, without connecting (for DBA review)."""
    migrations = migrations or revisions.packaged()
    target = migrations.resolve(to)
    cfg = config(migrations, progress=False)
    buffer = io.StringIO()
    cfg.output_buffer = buffer
    spec = f"{start}:{target}" if start else target
    with ALEMBIC:
        command.upgrade(cfg, spec, sql=True)
    return buffer.getvalue()


def _read(conn: sa.Connection, read: Callable[[Any, Any], T]) -> T:
    """Run `read(dbapi_connection, cursor)` in a transaction of its own, ended here: SQLAlchemy
    does not see statements on the raw connection, and an open transaction would pin a
    server connection of a transaction pooler (and hold its locks) until the next commit."""
    conn.commit()  # whatever SQLAlchemy had begun
    raw: Any = conn.connection.dbapi_connection
    try:
        with raw.cursor() as cursor:
            return read(raw, cursor)
    finally:
        raw.rollback()


def _state(conn: sa.Connection) -> schema.SchemaState:
    """Which revision the database is at (the one reader, on the runner's connection)."""
    return _read(conn, lambda _raw, cursor: schema.read_state(cursor))


def _is_lock_timeout(exc: BaseException) -> bool:
    # Step files run on the raw psycopg cursor (steps.apply), so the error may be psycopg's
    # own; statements run through SQLAlchemy arrive wrapped, with the original in `.orig`.
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, psycopg.errors.LockNotAvailable)


def upgrade(
    dsn: str,
    *,
    to: str = "head",
    lock_timeout_ms: int = 5000,
    statement_timeout_ms: int = 3_600_000,
    retries: int = 3,
    force: bool = False,
    progress: bool = True,
    runner_wait_s: float = RUNNER_WAIT_S,
    migrations: SetFacts | None = None,
    pooled: bool = False,
) -> UpgradeReport:
    """Upgrade the database at `dsn` to `to`; see the module docstring."""
    migrations = migrations or revisions.packaged()
    target = migrations.resolve(to)
    if retries < 0:
        raise UsageError(f"--retries takes a number of retries >= 0, got {retries}")
    if lock_timeout_ms < 1:  # PostgreSQL reads 0 as "no timeout": writers could queue forever
        raise UsageError(f"--lock-timeout must be at least 1ms, got {lock_timeout_ms} ms")
    manifest.require_intact(migrations.root)
    started = time.monotonic()
    engine = engine_for(dsn)
    try:
        conn = engine.connect()
    except sa.exc.OperationalError as exc:
        raise ConnectionFailed(
            f"cannot connect to {redact(dsn)}: {driver_reason(exc.orig or exc)}"
        ) from None
    current: str | None = None  # the revision being applied, for a lost-server message
    gone = False  # the server was lost
    try:
        _refuse_standby(conn)
        state = _state(conn)
        before = state.revision
        if revisions.ROLLOUT_TABLE in state.tables:
            _refuse_rollout(conn)
        _refuse_unknown(state, migrations)
        report = UpgradeReport("queueguard", target, before, after=before)
        if before is not None and migrations.at_or_after(before, target):
            report.elapsed_ms = int((time.monotonic() - started) * 1000)
            return report
        pending = migrations.pending(before, target)
        fencing = [r for r in pending if r.fences_older_hosts]
        _guard_the_fence(conn, fencing, target, force, pooled, report)
        if state.versions is None:
            _create_version_table(conn, runner_wait_s)
        for revision in pending:
            current = revision.id
            try:
                waits, relocated = _apply_with_retries(
                    conn,
                    migrations,
                    revision.id,
                    lock_timeout_ms,
                    statement_timeout_ms,
                    retries,
                    progress,
                    runner_wait_s,
                )
            except AlreadyApplied:
                report.skipped.append(revision.id)
                continue
            report.lock_waits += waits
            report.relocated.update(relocated)
            report.applied.append(revision.id)
        current = None
        report.after = _state(conn).revision
        if any(r.id in report.applied for r in fencing):  # fenced by this runner
            report.queues_fenced = int(conn.exec_driver_sql(Q["queue_count"]).scalar() or 0)
            conn.commit()
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    except (sa.exc.DBAPIError, psycopg.Error) as exc:
        if not connection_lost(exc):
            raise
        gone = True
        raise ConnectionFailed(lost(dsn, current, getattr(exc, "orig", None) or exc)) from None
    finally:
        _close(conn, engine, gone)


def _close(conn: sa.Connection, engine: sa.Engine, lost: bool) -> None:
    """End the session. A lost server already rolled back: the connection is discarded
    without a word to it (a rollback on a dead socket would only add a traceback)."""
    try:
        if lost:
            conn.invalidate()
        else:
            conn.rollback()
            conn.close()
    except (sa.exc.DBAPIError, psycopg.Error):
        conn.invalidate()
    finally:
        engine.dispose()


def _refuse_standby(conn: sa.Connection) -> None:
    """A hot standby cannot take the migration's locks: say so before touching anything."""
    _read(conn, lambda _raw, cursor: topology.refuse_standby(cursor, "upgrade"))


def _create_version_table(conn: sa.Connection, wait_s: float) -> None:
    """Create the version table under the runner lock (two runners, one empty database)."""
    conn.commit()  # whatever SQLAlchemy had begun: the lock comes first in the transaction
    raw: Any = conn.connection.dbapi_connection
    runner_lock.take(raw, wait_s, restart=raw.rollback)
    try:
        conn.exec_driver_sql(Q["version_table"])
    except sa.exc.ProgrammingError as exc:  # e.g. a role without CREATE on the schema
        conn.rollback()
        raise MigrationError(
            f"cannot create {VERSION_TABLE}, nothing was changed: {exc.orig}"
        ) from None
    conn.commit()


def _refuse_rollout(conn: sa.Connection) -> None:
    """An online rollout holds the database between two revisions: the offline path waits
    until it is finished or aborted (steps.apply re-checks under the runner lock)."""
    found = _read(conn, lambda _raw, cursor: rollout(cursor))
    if found is not None:
        raise RolloutInProgress(found[0], found[1], "upgrade offline")


def rollout(cursor: Any) -> tuple[str, str] | None:
    """(target, phase) of the online rollout in progress, or None (no writes)."""
    cursor.execute(Q["rollout_exists"])
    if not cursor.fetchone()[0]:
        return None
    cursor.execute(Q["rollout"])
    row = cursor.fetchone()
    return (str(row[0]), str(row[1])) if row else None


def _refuse_unknown(state: schema.SchemaState, migrations: SetFacts) -> None:
    """An unversioned database or a revision this migration set does not know: refuse."""
    if state.versions is not None and not state.empty and not migrations.knows(state.revision):
        found = state.revision or ", ".join(state.versions) or "no row"
        raise UnknownSchema(
            f"{VERSION_TABLE} holds revision {found!r}, which this release does not know "
            f"({migrations.span}): refusing to upgrade (preflight reports "
            "schema.revision_unknown)"
        )
    if state.unversioned:
        found = ", ".join(sorted(state.tables & revisions.OUR_TABLES))
        raise UnknownSchema(
            f"the database has queueguard tables ({found}) but no {VERSION_TABLE} "
            "table, so its revision is unknown: refusing to upgrade (restore the "
            "version table or load the database into an empty one)"
        )


def _guard_the_fence(
    conn: sa.Connection,
    fencing: list[revisions.RevisionFacts],
    target: str,
    force: bool,
    pooled: bool,
    report: UpgradeReport,
) -> None:
    """Before revisions that fence older hosts: refuse while such hosts are connected (unless
    forced), and warn when a pooler in between hides them from the check."""
    if fencing and not force:
        _refuse_older_hosts(conn, target, max(r.protocol or 0 for r in fencing))
    if fencing:
        why = _read(conn, lambda raw, cursor: topology.pooler(raw, cursor, pooled))
        if why is not None:
            report.warnings.append(f"through a pooler ({why}): {topology.POOLER_BLIND}")


def _refuse_older_hosts(conn: sa.Connection, target: str, protocol: int) -> None:
    """Refuse while hosts below `protocol` are connected (preflight's runtime.older_hosts)."""
    hosts = _read(
        conn, lambda _raw, cursor: audit.older_hosts(cursor, target=target, protocol=protocol)
    )
    if hosts:
        raise OlderHostsConnected(hosts)


def _apply_with_retries(
    conn: sa.Connection,
    migrations: SetFacts,
    revision: str,
    lock_timeout_ms: int,
    statement_timeout_ms: int,
    retries: int,
    progress: bool,
    runner_wait_s: float = RUNNER_WAIT_S,
) -> tuple[int, dict[str, int]]:
    """Apply one revision; returns how many lock timeouts it hit before succeeding, and the
    rows it relocated per source queue (counted by the revision under its own locks: the
    runner reads no table outside a revision, where it could take locks out of the
    documented order and deadlock with another runner's revision)."""
    waits = 0

    def attempt(timeout: int) -> tuple[int, dict[str, int]]:
        cfg = config(
            migrations,
            connection=conn,
            lock_timeout_ms=timeout,
            statement_timeout_ms=statement_timeout_ms,
            runner_wait_ms=int(runner_wait_s * 1000),
            progress=progress,
        )
        try:
            with ALEMBIC:
                command.upgrade(cfg, revision)
            if revision not in cfg.attributes.get("applied", []):
                raise AlreadyApplied(revision, _state(conn).revision)
            return waits, dict(cfg.attributes.get("relocated", {}))
        except (sa.exc.OperationalError, psycopg.OperationalError) as exc:
            if connection_lost(exc):
                raise
            conn.rollback()
            if not _is_lock_timeout(exc):
                reason = getattr(exc, "orig", exc)
                raise MigrationError(f"revision {revision} failed: {reason}") from None
            raise
        except (sa.exc.DBAPIError, psycopg.Error) as exc:
            # Any other database error in a step: the revision's transaction rolls back whole;
            # report it as a refusal (exit 1), not as a driver traceback.
            conn.rollback()
            reason = getattr(exc, "orig", exc)
            raise MigrationError(
                f"revision {revision} failed, nothing was changed: {reason}"
            ) from None
        except RunnerBusy as exc:
            conn.rollback()
            raise LockTimeout(str(exc)) from None
        except BaseException:
            conn.rollback()
            raise

    def waited(_exc: Exception) -> None:
        nonlocal waits
        waits += 1

    def give_up(timeout: int, _exc: Exception) -> Exception:
        return LockTimeout(
            f"revision {revision}: could not get its locks after {retries + 1} "
            f"attempts (last lock_timeout {timeout} ms); nothing was changed"
        )

    return climb(
        attempt, lock_timeout_ms, retries, give_up=give_up, waited=waited,
        lock_wait=lambda exc: "" if _is_lock_timeout(exc) else None,
    )  # fmt: skip
