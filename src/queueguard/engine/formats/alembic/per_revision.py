"""`upgrade` of an Alembic set whose revisions take the runner lock themselves, inside their
own transaction (queueguard's own set: `queue_schema/steps.py`): one `alembic upgrade REV`
per revision on the runner's one connection, each on the ladder, with the set's guards
around them (`apply.guards`). The lock stays transaction-scoped, so it holds through a
transaction pooler and a killed runner leaves none behind; a revision another runner
applied first is skipped (AlreadyApplied, raised by the revision under the lock, or Alembic
finding it recorded).

What the revisions are handed travels as Alembic config attributes: `lock_timeout_ms`,
`statement_timeout_ms`, `runner_wait_ms` and the guards' own (`attributes`); what they tell
comes back the same way: `applied` (they ran here) and `relocated` (rows moved per source
queue, counted by the revision under its own locks: the runner reads no table outside a
revision, where it could take locks out of the documented order)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from psycopg import sql
from sqlalchemy.pool import NullPool

from queueguard.engine import topology
from queueguard.engine.apply import runner_lock
from queueguard.engine.apply.guards import Guards
from queueguard.engine.apply.ladder import climb, gave_up
from queueguard.engine.apply.report import UpgradeReport
from queueguard.engine.apply.session import APPLICATION_NAME, Limits, lost
from queueguard.errors import (
    AlreadyApplied,
    ConnectionFailed,
    LockTimeout,
    MigrationError,
    RunnerBusy,
)
from queueguard.pg.connect import CONNECT_TIMEOUT_S, connection_lost, reason
from queueguard.pg.dsn import redact, validate
from queueguard.pg.sqlfiles import queries
from queueguard.sets import MigrationSet, alembic_version_table
from queueguard.sets.alembic_hooks import own_engine

Q = queries("queueguard.engine.formats.alembic", "per_revision.sql")
T = TypeVar("T")
#: Alembic keeps its running migration context in module globals (`alembic.context`,
#: `alembic.op`): two threads of one process must not run it at once (hosts may install the
#: head schema from several threads). Across processes the runner lock serialises them.
ALEMBIC = threading.Lock()


def engine_for(dsn: str, application_name: str = APPLICATION_NAME) -> sa.Engine:
    """A SQLAlchemy Engine over psycopg that accepts URL and key=value DSNs alike."""
    validate(dsn)

    def creator() -> Any:
        # No server-side prepared statements: through a transaction pooler the next
        # transaction may run on another server connection, where they do not exist.
        return psycopg.connect(
            dsn,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT_S,
            prepare_threshold=None,
        )

    engine = sa.create_engine("postgresql+psycopg://", creator=creator, poolclass=NullPool)
    return own_engine(engine)


def script_config(root: Path, **attributes: Any) -> Config:
    """An Alembic Config on a script directory (no alembic.ini needed). Alembic's own
    messages go to a buffer, not sys.stdout (swapping sys.stdout is not thread-safe)."""
    cfg = Config(stdout=io.StringIO())
    cfg.set_main_option("script_location", str(root))
    cfg.attributes.update(attributes)
    return cfg


def upgrade(
    mset: MigrationSet, dsn: str, target: str | None, limits: Limits, guards: Guards
) -> UpgradeReport:
    """Bring the database at `dsn` to `target`; see the module doc. A server lost on the way
    ends with the one lost-server message (exit 2)."""
    started = time.monotonic()
    engine = engine_for(dsn)
    try:
        conn = engine.connect()
    except sa.exc.OperationalError as exc:
        failed = f"cannot connect to {redact(dsn)}: {reason(exc.orig or exc)}"
        raise ConnectionFailed(failed) from None
    running: str | None = None  # the revision being applied, for a lost server
    gone = False
    try:
        _read(conn, lambda _raw, cursor: topology.refuse_standby(cursor, "upgrade"))
        before = _read(conn, lambda _raw, cursor: guards.start(cursor))
        report = UpgradeReport(mset.format, target, before, after=before)
        pending = [r.id for r in mset.pending(before, target)]
        if pending:
            _read(conn, lambda raw, cursor: guards.before(raw, cursor, pending, report))
            table = mset.version_table or alembic_version_table.DEFAULT_VERSION_TABLE
            _create_version_table(conn, table, limits.runner_wait_s)
            for running in pending:
                try:
                    _apply(conn, mset.root, running, limits, guards.attributes, report)
                except AlreadyApplied:
                    report.skipped.append(running)
                    continue
                report.applied.append(running)
            running = None
            report.after = _read(conn, lambda raw, _c: alembic_version_table.read(raw, table))
            _read(conn, lambda _raw, cursor: guards.after(cursor, report))
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    except (sa.exc.DBAPIError, psycopg.Error) as exc:
        if not connection_lost(exc):
            raise
        gone = True
        raise ConnectionFailed(lost(dsn, running, getattr(exc, "orig", None) or exc)) from None
    finally:
        _close(conn, engine, gone)


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


def _create_version_table(conn: sa.Connection, table: str, wait_s: float) -> None:
    """Create the version table under the runner lock (two runners, one empty database)."""
    name = sql.Identifier(table)

    def exists(raw: Any, _cursor: Any) -> bool:
        found = raw.execute(Q["version_table_exists"], {"table": name.as_string(raw)})
        return bool(found.fetchone()[0])

    if _read(conn, exists):
        return
    raw: Any = conn.connection.dbapi_connection
    runner_lock.take(raw, wait_s, restart=raw.rollback)
    create = sql.SQL(Q["version_table"]).format(table=name, key=sql.Identifier(f"{table}_pkc"))
    try:
        raw.execute(create)
    except psycopg.ProgrammingError as exc:  # e.g. a role without CREATE on the schema
        raw.rollback()
        raise MigrationError(f"cannot create {table}, nothing was changed: {exc}") from None
    raw.commit()


def _apply(
    conn: sa.Connection,
    root: Path,
    revision: str,
    limits: Limits,
    attributes: Mapping[str, object],
    report: UpgradeReport,
) -> None:
    """Apply one revision on the ladder, its lock waits and relocated rows into `report`
    once it committed; AlreadyApplied if another runner applied it first."""
    waits = 0

    def attempt(timeout: int) -> dict[str, int]:
        cfg = script_config(
            root,
            connection=conn,
            lock_timeout_ms=timeout,
            statement_timeout_ms=limits.statement_timeout_ms,
            runner_wait_ms=int(limits.runner_wait_s * 1000),
            **attributes,
        )
        try:
            with ALEMBIC:
                command.upgrade(cfg, revision)
            if revision not in cfg.attributes.get("applied", []):
                raise AlreadyApplied(revision, None)  # Alembic found it recorded: skipped
            return dict(cfg.attributes.get("relocated", {}))
        except (sa.exc.DBAPIError, psycopg.Error) as exc:
            if connection_lost(exc):
                raise
            conn.rollback()
            if _is_lock_timeout(exc):
                raise
            # Any other database error in a step: the revision's transaction rolled back
            # whole; said as a refusal (exit 1), not as a driver traceback.
            operational = isinstance(getattr(exc, "orig", exc), psycopg.OperationalError)
            kept = "" if operational else ", nothing was changed"
            raise MigrationError(
                f"revision {revision} failed{kept}: {getattr(exc, 'orig', exc)}"
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
        return gave_up(f"revision {revision}", limits.retries, timeout, "nothing was changed")

    relocated = climb(
        attempt, limits.lock_timeout_ms, limits.retries, give_up=give_up, waited=waited,
        lock_wait=lambda exc: "" if _is_lock_timeout(exc) else None,
    )  # fmt: skip
    report.lock_waits += waits
    report.relocated.update(relocated)


def _is_lock_timeout(exc: BaseException) -> bool:
    # Step files run on the raw psycopg cursor (steps.apply), so the error may be psycopg's
    # own; statements run through SQLAlchemy arrive wrapped, with the original in `.orig`.
    return isinstance(getattr(exc, "orig", exc), psycopg.errors.LockNotAvailable)


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
