"""`upgrade` of a Django project: Django's own `migrate` (its executor, its recorder writing
`django_migrations`, its signals) run in the project's interpreter, with queueguard's gates:

- the runner lock, held by a session of its own for the whole upgrade (it excludes other
  queueguard runs; Django's `migrate` takes no lock, so a `manage.py migrate` started beside
  it is not excluded);
- `lock_timeout` and `statement_timeout` on the migration's connection (its startup options),
  so every statement has them, `RunSQL`'s and `RunPython`'s included;
- on a lock timeout, a migration that runs in a transaction has rolled back whole: `migrate`
  is run again after the ladder's pause with a longer timeout; in an `atomic = False`
  migration the runner retries the statement that timed out in place (what ran before it
  stays committed, never replayed), dropping first the INVALID index a concurrent build
  left; a `RunPython` there is retried only when it ran in an atomic block of its own, else
  the migration stops, unrecorded, naming what stays applied.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from queueguard.engine.apply import progress
from queueguard.engine.apply.ladder import climb, gave_up, schedule
from queueguard.engine.apply.report import Step, UpgradeReport
from queueguard.engine.apply.session import Limits, runner_session
from queueguard.errors import HalfApplied, MigrationError, UsageError
from queueguard.pg.connect import connection
from queueguard.sets import MigrationSet, Revision
from queueguard.sets import django as django_format
from queueguard.sets.django_process import Runner
from queueguard.sets.model import state_of

LOCK_NOT_AVAILABLE = "55P03"


def refuse_custom(runner: Runner) -> None:
    """A project whose `migrate` or database backend is its own is named and refused unless
    `--allow-custom-migrate`."""
    if runner.project.allow_custom:
        return
    if runner.custom_migrate:
        raise UsageError(
            f"the project has its own migrate command ({runner.custom_migrate}): queueguard "
            "drives Django's; give --allow-custom-migrate to drive the project's"
        )
    if not runner.stock_backend:
        raise UsageError(
            f"the project's database backend is {runner.facts.get('engine')} (schema editor "
            f"{runner.facts.get('editor')}), not Django's PostgreSQL or PostGIS one: give "
            "--allow-custom-migrate to run it anyway"
        )


def upgrade(
    mset: MigrationSet,
    dsn: str,
    target: str | None,
    limits: Limits,
    on_step: Callable[[Step], None] | None = None,
    cancelled: threading.Event | None = None,
    *,
    part: Sequence[Revision] | None = None,
    post_migrate: bool = True,
) -> UpgradeReport:
    """`part`: only these migrations, and migrate run even when they are all applied (its
    pre/post_migrate signals); `post_migrate` False: the signal is left for a later run
    (`upgrade --online`'s runs between migrations it applies as SQL: one plain `migrate`
    sends it once, at its end)."""
    started = time.monotonic()
    settings = {
        "lock_timeout": str(limits.lock_timeout_ms),
        "statement_timeout": str(limits.statement_timeout_ms),
    }
    # the set's runner reads the applied set, migrates and reads it again (each runner's
    # start is the project's django.setup(), a second or more for a large project)
    graph = django_format.graph_of(mset)
    with runner_session(dsn, limits), graph.borrow(dsn, settings=settings) as runner:
        before = state_of(runner.ask("applied")["applied"])
        report = UpgradeReport(mset.format, target, before)
        report.after = before
        pending = mset.pending(before, target) if target is not None else []
        if part is not None:
            ids = {r.id for r in part}
            pending = [r for r in pending if r.id in ids]
        _refuse_left_online(dsn, pending)
        if pending or part:
            refuse_custom(runner)
            targets = django_format.migrate_targets(mset, pending or list(part or ()))
            with _cancelling(runner, cancelled):
                _run(mset, runner, targets, limits, {**settings}, report, on_step, post_migrate)
            report.after = state_of(runner.ask("applied")["applied"])
        report.latest_applied = django_format.latest_applied(mset, report.after)
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report


def _refuse_left_online(dsn: str, pending: Sequence[Revision]) -> None:
    """A migration a killed `upgrade --online` left part applied (its progress row): Django's
    migrate would run it again from its start over what is there (a built index, a NOT VALID
    key, a rebuild's shadow)."""
    if not pending:
        return
    with connection(dsn) as conn:
        rows = progress.read(conn)
        conn.rollback()
    left = [r.id for r in pending if r.id in rows]
    if left:
        raise HalfApplied(
            f"migration {left[0]} was left part applied by an `upgrade --online` run "
            "(queueguard_progress): rerun `upgrade --online` to finish it the way it began, or "
            "`upgrade --online --phase abort` to undo it; nothing was changed"
        )


@contextmanager
def _cancelling(runner: Runner, cancelled: threading.Event | None) -> Iterator[None]:
    """While migrate runs: `cancelled` set (a fleet's lost lease), the runner is stopped —
    its connection closes, and the server rolls its migration's transaction back."""
    if cancelled is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancelled.wait(0.2):
                runner.kill()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _run(
    mset: MigrationSet,
    runner: Runner,
    targets: list[str],
    limits: Limits,
    settings: dict[str, str],
    report: UpgradeReport,
    on_step: Callable[[Step], None] | None,
    post_migrate: bool = True,
) -> None:
    atomic = {r.id: bool(r.native.get(django_format.ATOMIC, True)) for r in mset.revisions}

    def attempt(timeout: int) -> None:
        failed = _migrate(
            runner, targets, limits, report, on_step,
            {**settings, "lock_timeout": str(timeout)}, post_migrate,
        )  # fmt: skip
        if failed is None:
            return
        migration = str(failed.get("migration") or "")
        if failed.get("sqlstate") != LOCK_NOT_AVAILABLE or not atomic.get(migration, False):
            raise _failure(failed, report, atomic)
        raise _LockWait(migration)  # its transaction rolled back whole: migrate again

    def waited(_exc: Exception) -> None:
        report.lock_waits += 1

    def give_up(timeout: int, exc: Exception) -> Exception:
        return gave_up(f"migration {exc}", limits.retries, timeout, "its transaction rolled back")

    climb(
        attempt, limits.lock_timeout_ms, limits.retries, give_up=give_up, waited=waited,
        lock_wait=lambda exc: str(exc) if isinstance(exc, _LockWait) else None,
    )  # fmt: skip


class _LockWait(Exception):
    """A migration's transaction hit its lock_timeout and rolled back (named by its id)."""


def _migrate(
    runner: Runner,
    targets: list[str],
    limits: Limits,
    report: UpgradeReport,
    on_step: Callable[[Step], None] | None,
    settings: dict[str, str],
    post_migrate: bool = True,
) -> dict[str, Any] | None:
    """One run of Django's migrate; the failure event, or None when it finished."""
    runner.send(
        op="migrate",
        targets=targets,
        settings=settings,
        post_migrate=post_migrate,
        allow_custom=runner.project.allow_custom,
        ladder=schedule(limits.lock_timeout_ms, limits.retries),
    )
    index: dict[str, int] = {}
    running: list[Step] = []  # the migration's statements, told when it commits
    for event in runner.events():
        kind = event["ev"]
        if kind == "start":
            runner.running = event["id"]
        elif kind == "stmt" and event.get("migration") and event.get("origin") != "bookkeeping":
            rid = event["migration"]
            index[rid] = index.get(rid, -1) + 1
            seconds = float(event.get("seconds") or 0.0)
            running.append(
                Step(rid, index[rid], event["sql"], bool(event.get("transaction")),
                     seconds, seconds, time.perf_counter() - seconds)
            )  # fmt: skip
        elif kind == "applied":
            committed = time.perf_counter()
            for step in running:
                if step.transactional:  # its locks are held until the migration commits
                    step.held_s = committed - step.started
                if on_step is not None:
                    on_step(step)
            running = []
            report.applied.append(event["id"])
            runner.running = None
        elif kind == "retry":
            report.lock_waits += 1
            report.notes.append(
                f"{event['id']}: lock timeout, {event['scope']} retried in place with "
                f"lock_timeout {event['timeout']} ms"
            )
        elif kind == "dropped_invalid":
            report.notes.append(
                f"{event['id']}: dropped the INVALID index {event['index']} a concurrent "
                "build left, then built it again"
            )
        elif kind == "done":
            return None
        elif kind == "failed":
            runner.running = None
            return event
    return None


def _failure(
    event: dict[str, Any], report: UpgradeReport, atomic: dict[str, bool]
) -> MigrationError:
    migration = event.get("migration")
    if migration is None:
        return MigrationError(f"Django's migrate failed before any migration: {event['error']}")
    if atomic.get(migration, True):
        kept = "its transaction rolled back"
    else:
        kept = (
            "it is `atomic = False`: the statements it ran before the failure stay "
            "committed, and it is not recorded in django_migrations"
        )
    if report.applied:
        kept += f" (the migrations before it, {', '.join(report.applied)}, stay applied)"
    error = MigrationError(f"migration {migration} failed ({event['error']}); {kept}")
    error.sqlstate = event.get("sqlstate")
    return error
