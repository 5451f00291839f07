"""`upgrade` of an Alembic project: through its own env.py, run once from where the database
is to the target as `alembic upgrade` runs it (`sets.alembic_run`: one transaction per
revision unless env.py says otherwise), with lock_timeout and statement_timeout in the
connections' options. A lock timeout rolls back the revision that hit it; the run is started
again from there with a longer timeout (the runner's ladder: retries per revision). The
runner lock is held by a session of its own for the whole upgrade."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from queueguard.engine.apply.ladder import climb, gave_up
from queueguard.engine.apply.report import Step, UpgradeReport
from queueguard.engine.apply.session import Limits, runner_session
from queueguard.errors import MigrationError
from queueguard.sets import MigrationSet
from queueguard.sets import alembic as alembic_format
from queueguard.sets.model import stretches


def upgrade(
    mset: MigrationSet,
    dsn: str,
    target: str | None,
    limits: Limits,
    on_step: Callable[[Step], None] | None = None,
) -> UpgradeReport:
    started = time.monotonic()
    table = mset.version_table or alembic_format.DEFAULT_VERSION_TABLE
    with runner_session(dsn, limits):
        before = alembic_format.current(dsn, table)
        report = UpgradeReport(mset.format, target, before)
        report.after = before
        if target is not None and mset.pending(before, target):
            _run(mset, dsn, target, limits, report, on_step)
            # where the run left the database, as the driver saw it commit (no second read);
            # a set that branches is read again: its state is the heads the rows hold
            report.after = report.applied[-1] if report.applied else before
            if mset.steps is not None:
                report.after = alembic_format.current(dsn, table)
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report


def upgrade_in_parts(
    mset: MigrationSet,
    dsn: str,
    target: str | None,
    limits: Limits,
    on_step: Callable[[Step], None] | None,
    run_sql: Callable[[str], UpgradeReport],
) -> UpgradeReport:
    """`upgrade --online` of a set some of whose revisions run as their rendered SQL
    (`online.alembic_sql`): each run of consecutive Python revisions through env.py as
    `upgrade` runs it, each SQL revision through `run_sql(revision)` (the SQL formats'
    runner, to that revision), in order; one report."""
    started = time.monotonic()
    table = mset.version_table or alembic_format.DEFAULT_VERSION_TABLE
    before = alembic_format.current(dsn, table)
    report = UpgradeReport(mset.format, target, before)
    pending = mset.pending(before, target)
    for part in stretches(pending):
        end = mset.end_of(part)
        if part[0].statements is None:
            done = upgrade(mset, dsn, end, limits, on_step)
        else:
            done = run_sql(end)
        report.add(done)
    report.after = alembic_format.current(dsn, table)
    report.elapsed_ms = int((time.monotonic() - started) * 1000)
    return report


def _run(
    mset: MigrationSet,
    dsn: str,
    target: str,
    limits: Limits,
    report: UpgradeReport,
    on_step: Callable[[Step], None] | None,
) -> None:
    """env.py's run to `target`, started again after a lock timeout from where it stopped
    (each revision that waits climbs a ladder of its own)."""
    failing: list[str | None] = [None]  # the revision the last run stopped at

    def attempt(timeout: int) -> None:
        options = f"-c lock_timeout={timeout} -c statement_timeout={limits.statement_timeout_ms}"
        outcome = alembic_format.Outcome()
        try:
            alembic_format.upgrade_to(mset, dsn, target, options=options, outcome=outcome)
        finally:
            _record(outcome, report, on_step)
            failing[0] = outcome.running

    def lock_wait(exc: Exception) -> object | None:
        if isinstance(exc, MigrationError) and isinstance(
            _root_cause(exc), psycopg.errors.LockNotAvailable
        ):
            return (failing[0],)  # what waited: never None, even before a revision
        return None

    def waited(_exc: Exception) -> None:
        report.lock_waits += 1

    def give_up(timeout: int, _exc: Exception) -> Exception:
        return gave_up(
            f"revision {failing[0]}", limits.retries, timeout, "its transaction rolled back"
        )

    climb(
        attempt, limits.lock_timeout_ms, limits.retries,
        give_up=give_up, waited=waited, lock_wait=lock_wait,
    )  # fmt: skip


def _record(
    outcome: alembic_format.Outcome,
    report: UpgradeReport,
    on_step: Callable[[Step], None] | None,
) -> None:
    """The revisions a run committed, and each statement they sent as a step."""
    committed = outcome.committed
    report.applied += committed
    if on_step is None:
        return
    for revision in committed:
        for index, sent in enumerate(outcome.of(revision)):
            seconds = sent.seconds
            held = sent.held_s if sent.held_s is not None else seconds
            on_step(
                Step(revision, index, sent.sql, not sent.autocommit, seconds, held, sent.started)
            )


def _root_cause(exc: BaseException) -> BaseException:
    seen = exc
    while seen.__cause__ is not None:
        seen = seen.__cause__
    return getattr(seen, "orig", None) or seen
