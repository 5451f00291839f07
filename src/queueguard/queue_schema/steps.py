"""Applying one revision's SQL steps inside Alembic: the body of every thin revision file.

A revision is a folder `migrations/sql/<rev>/` of step files run in name order in the
revision's single transaction. `00_locks.sql` (when present) takes every lock up front in the
documented order; the guard then re-checks the revision's preconditions with the shared audit
queries under those locks and raises MigrationRefused, rolling the whole revision back.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from queueguard import revisions
from queueguard.engine import locks
from queueguard.engine.apply import runner_lock
from queueguard.errors import (
    AlreadyApplied,
    IrreversibleMigration,
    LockBudgetExceeded,
    MigrationRefused,
    RolloutInProgress,
)
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import audit, manifest
from queueguard.report.units import duration_s

Q = queries("queueguard.queue_schema", "upgrade.sql")
DEFAULT_LOCK_TIMEOUT_MS = 5000
DEFAULT_RUNNER_WAIT_MS = 30_000
# Bounded but generous: 004 rewrites ~65k rows/s here, so an hour covers >200M rows.
DEFAULT_STATEMENT_TIMEOUT_MS = 3_600_000


def _setting(name: str, default: int) -> int:
    value = context.config.attributes.get(name)
    return default if value is None else int(value)


def _progress(message: str) -> None:
    if context.config.attributes.get("progress", True):
        print(f"  {message}", file=sys.stderr, flush=True)


def _migration_set() -> revisions.SetFacts:
    """The migration set Alembic is running (its script directory: --migrations DIR)."""
    return revisions.load(Path(context.config.get_main_option("script_location") or ""))


def apply(revision: str) -> None:
    """Run the revision's steps; online, guard after the locks and report each step."""
    migrations = _migration_set()
    facts = migrations.get(revision)
    lock_ms = _setting("lock_timeout_ms", DEFAULT_LOCK_TIMEOUT_MS)
    stmt_ms = _setting("statement_timeout_ms", DEFAULT_STATEMENT_TIMEOUT_MS)
    op.execute(f"SET LOCAL lock_timeout = {lock_ms}")
    op.execute(f"SET LOCAL statement_timeout = {stmt_ms}")
    offline = context.is_offline_mode()
    if not offline:
        _exclusive(facts, lock_ms)
        with _raw().cursor() as cursor:
            existing = locks.relations(cursor)
    for path in manifest.step_files(revision, migrations.root):
        sql = path.read_text(encoding="utf-8")
        if offline:
            op.execute(sa.text(sql))
        else:
            started = time.monotonic()
            with _raw().cursor() as cursor:
                # The driver cursor without parameters: psycopg leaves `%` in the SQL alone.
                cursor.execute(sql)
                rows = max(cursor.rowcount, 0)
                while cursor.nextset():  # one result per statement of the step file
                    rows += max(cursor.rowcount, 0)
            _progress(
                f"{revision} {path.stem}: {rows} rows, {duration_s(time.monotonic() - started)}"
            )
            if path.stem == facts.relocation_step:
                _report_relocation(revision)
        if path.name.startswith("00_"):
            _guard(facts, offline)
    if facts.ledger:
        _record_ledger(migrations, revision, offline)
    if not offline:
        _enforce_budget(facts, existing)
    # Tells the runner this revision ran here (Alembic skips a revision another runner has
    # already recorded without saying so).
    context.config.attributes.setdefault("applied", []).append(revision)


def _exclusive(facts: revisions.RevisionFacts, lock_ms: int) -> None:
    """One runner per revision: the transaction-scoped runner lock (waiting at most the
    runner's wait), then the version row re-read under it. A runner that lost the race finds
    the revision applied and stops before changing anything (AlreadyApplied). Every setting
    is SET LOCAL: nothing outlives the transaction, so this holds through a transaction
    pooler."""
    wait_ms = _setting("runner_wait_ms", DEFAULT_RUNNER_WAIT_MS)
    with _raw().cursor() as cursor:
        # A runner killed mid-revision is noticed within a second and rolled back, instead of
        # holding its locks until the running statement ends (PostgreSQL >= 14 on Linux).
        cursor.execute(Q["dead_client_check"])
        runner_lock.take(cursor, wait_ms / 1000)  # Alembic's transaction: kept between tries
        cursor.execute(f"SET LOCAL lock_timeout = {lock_ms}")
        cursor.execute(Q["rollout_exists"])
        if cursor.fetchone()[0]:  # an online expand won the runner lock first
            cursor.execute(Q["rollout"])
            target, phase = cursor.fetchone() or ("?", "?")
            raise RolloutInProgress(str(target), str(phase), "upgrade offline")
        cursor.execute(Q["current_version"])
        rows = cursor.fetchall()
    found = str(rows[0][0]) if rows else None
    if found != facts.down_revision:
        raise AlreadyApplied(facts.id, found)


def _enforce_budget(facts: revisions.RevisionFacts, existing: dict[int, str]) -> None:
    """The locks this transaction holds must be exactly the revision's budget; otherwise
    the revision rolls back whole (nothing changed), naming table, mode and budget."""
    with _raw().cursor() as cursor:
        held = locks.held(cursor, existing)
    problems = locks.violations(facts.locks or {}, held)
    if problems:
        raise LockBudgetExceeded(facts.id, [str(p) for p in problems])
    _progress(f"{facts.id} locks within budget: {locks.render(held) or 'none'}")


def _report_relocation(revision: str) -> None:
    with _raw().cursor() as cursor:
        cursor.execute("SELECT source, destination, moved FROM relocation ORDER BY source")
        moved = cursor.fetchall()
    # For the runner's report (UpgradeReport.relocated): read here, under the revision's locks.
    context.config.attributes["relocated"] = {str(s): int(m) for s, _, m in moved}
    total, done = sum(m for _, _, m in moved), 0
    for source, destination, rows in moved:
        done += rows
        _progress(f"{revision} relocated {done}/{total} rows: {source} -> {destination} ({rows})")


def _raw() -> Any:
    """The psycopg connection under Alembic's, in the revision's transaction."""
    return op.get_bind().connection.dbapi_connection


def _guard(facts: revisions.RevisionFacts, offline: bool) -> None:
    """The audit checks of the revision before this one, re-run under this one's locks."""
    revision, previous = facts.id, facts.down_revision
    if previous is None:
        return
    queries = audit.for_revision(previous)
    if offline:
        names = ", ".join(q.name for q in queries)
        op.execute(sa.text(f"-- guard (run by queueguard under these locks): {names}"))
        return
    blocking = []
    started = time.monotonic()
    with _raw().cursor() as cursor:
        audit.set_local(cursor, target=revision, protocol=facts.protocol)
        for query in queries:
            blocking += [f for f in audit.run(cursor, query) if f.blocking]
            if blocking and query.kind == "schema":
                break  # later checks rely on the schema contract: refuse naming it
    if blocking:
        raise MigrationRefused(revision, blocking)
    _progress(
        f"{revision} guard: {len(queries)} audit queries clean under locks, "
        f"{duration_s(time.monotonic() - started)}"
    )


def _record_ledger(migrations: revisions.SetFacts, revision: str, offline: bool) -> None:
    statement = sa.text(
        "INSERT INTO queueguard_migrations (revision, sha256) VALUES (:revision, :sha256) "
        "ON CONFLICT (revision) DO NOTHING"
    )
    for rev in migrations.ids[: migrations.ids.index(revision) + 1]:
        params = {"revision": rev, "sha256": manifest.revision_sha256(rev, migrations.root)}
        if offline:
            op.execute(statement.bindparams(**params))
        else:
            op.get_bind().execute(statement, params)


def refuse_downgrade(revision: str) -> None:
    raise IrreversibleMigration(
        f"revision {revision} cannot be downgraded: task ids were renumbered. "
        "Roll back by restoring the backup taken before the upgrade."
    )
