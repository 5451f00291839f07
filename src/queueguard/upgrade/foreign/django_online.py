"""`upgrade --online` of a Django project: the migrations given online forms run as the SQL
Django's migrate sent for them on the sample (`online.django_sql`), through the runner of
the SQL formats (forms, progress rows, resumable); the others through Django's own migrate,
in stretches between them, in Django's order.

Each migration run as SQL is recorded through Django's fake path: the recorder's INSERTs
(each name a squash replaces, else its own; then a squash all of whose originals are now
applied, as `migrate` completes it), compiled by the project's runner when the migration's
last transaction is about to commit, and run in that transaction. `django_migrations` is
written only by what Django's recorder compiles.

Django's post_migrate (content types, permissions, the apps' own handlers) is sent once, at
the end, as one plain `migrate` sends it: the runs before the last leave it out, and a run
that ends with a migration applied as SQL is followed by a `migrate` that applies nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from queueguard.errors import MigrationError
from queueguard.sets import MigrationSet
from queueguard.sets import django as django_format
from queueguard.sets.django_process import Runner
from queueguard.sets.model import stretches
from queueguard.upgrade.foreign import django_upgrade
from queueguard.upgrade.foreign.report import SetUpgradeReport, Step
from queueguard.upgrade.foreign.session import Limits

RunSql = Callable[[MigrationSet, str], SetUpgradeReport]


def recording(mset: MigrationSet, revision_id: str, runner: Runner) -> MigrationSet:
    """The set with the migration's fake path asked of `runner` (pointed at the target)."""

    def statements() -> list[tuple[str, list[Any]]]:
        found = runner.ask("record", id=revision_id)
        if found.get("ev") != "record":
            raise MigrationError(
                f"Django's recorder could not compile the record of {revision_id}: "
                f"{found.get('error')}"
            )
        return [(str(sql), list(params)) for sql, params in found["statements"]]

    revisions = tuple(
        replace(r, native={**r.native, django_format.RECORD: statements})
        if r.id == revision_id
        else r
        for r in mset.revisions
    )
    return replace(mset, revisions=revisions)


def record_on(mset: MigrationSet, revision_id: str, dsn: str, conn: Any) -> None:
    """Django's fake path for a migration run as SQL on the database at `dsn` (a plan's
    scratch copy), on `conn`, committed: the later migrations' capture starts after it."""
    with django_format.graph_of(mset).borrow(dsn) as runner:
        statements = (
            recording(mset, revision_id, runner).get(revision_id).native[django_format.RECORD]()
        )
    for sql, params in statements:
        conn.execute(sql, params)
    conn.commit()


def upgrade_in_parts(
    mset: MigrationSet,
    dsn: str,
    target: str | None,
    limits: Limits,
    on_step: Callable[[Step], None] | None,
    run_sql: RunSql,
) -> SetUpgradeReport:
    started = time.monotonic()
    before = django_format.current(mset, dsn)
    report = SetUpgradeReport(mset.format, target, before)
    parts = stretches(mset.pending(before, target) if target is not None else [])
    graph = django_format.graph_of(mset)
    for n, part in enumerate(parts):
        last = n == len(parts) - 1
        if part[0].statements is None:
            done = django_upgrade.upgrade(
                mset, dsn, target, limits, on_step, part=part, post_migrate=last
            )
        else:
            with graph.borrow(dsn) as runner:
                done = run_sql(recording(mset, part[0].id, runner), part[0].id)
            if last:  # post_migrate, as the plain run's end sends it
                django_upgrade.upgrade(mset, dsn, target, limits, part=part)
        report.applied += done.applied
        report.skipped += done.skipped
        report.resumed += done.resumed
        report.notes += done.notes
        report.lock_waits += done.lock_waits
    report.after = django_format.current(mset, dsn)
    report.latest_applied = django_format.latest_applied(mset, report.after)
    report.elapsed_ms = int((time.monotonic() - started) * 1000)
    return report
