"""`upgrade --online` of a Django project: the migrations given online forms run as the SQL
Django's migrate sent for them on the sample (`online.django_sql`), through the runner of
the SQL formats (forms, progress rows, resumable); the others through Django's own migrate,
in stretches between them, in Django's order.

Each migration run as SQL is recorded through Django's fake path: the recorder's INSERTs
(each name a squash replaces, else its own; then a squash all of whose originals are now
applied, as `migrate` completes it), compiled by the project's runner as the migration's SQL
begins, and run in its last transaction. `django_migrations` is written only by what
Django's recorder compiles.

Django's post_migrate (content types, permissions, the apps' own handlers) is sent once, at
the end, as one plain `migrate` sends it: the runs before the last leave it out, and a run
that ends with a migration applied as SQL (or a rerun that only finished a killed run's) is
followed by a `migrate` that applies nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from queueguard.engine.apply.report import Step, UpgradeReport
from queueguard.engine.apply.session import Limits
from queueguard.engine.formats.django import runner as django_upgrade
from queueguard.errors import MigrationError
from queueguard.sets import MigrationSet
from queueguard.sets import django as django_format
from queueguard.sets.django_process import Runner
from queueguard.sets.model import heads_of, stretches

RunSql = Callable[[MigrationSet, str], UpgradeReport]


def recording(mset: MigrationSet, revision_id: str, runner: Runner) -> MigrationSet:
    """The set with the migration's fake path compiled by `runner` (pointed at the target)
    now, before its SQL runs: compiled inside its last transaction, the round trip to the
    project's process would lengthen every lock that transaction holds."""
    found = runner.ask("record", id=revision_id)
    if found.get("ev") != "record":
        raise MigrationError(
            f"Django's recorder could not compile the record of {revision_id}: {found.get('error')}"
        )
    compiled = [(str(sql), list(params)) for sql, params in found["statements"]]

    def statements() -> list[tuple[str, list[Any]]]:
        return compiled

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
    stop: Callable[[], bool] | None = None,
    cancelled: threading.Event | None = None,
) -> UpgradeReport:
    """`stop`: asked before each part after the first (`fleet`); the runner lock is taken by
    each part and let go between them, as between two `upgrade` runs."""
    started = time.monotonic()
    before = django_format.current(mset, dsn)
    report = UpgradeReport(mset.format, target, before)
    parts = stretches(mset.pending(before, target) if target is not None else [])
    graph = django_format.graph_of(mset)
    signalled = False
    for n, part in enumerate(parts):
        if n and stop is not None and stop():
            signalled = True  # stopped: the rest, and its signal, are a later run's
            break
        last = n == len(parts) - 1
        if part[0].statements is None:
            done = django_upgrade.upgrade(
                mset, dsn, target, limits, on_step, cancelled, part=part, post_migrate=last
            )
            signalled = last
        else:
            with graph.borrow(dsn) as runner:
                done = run_sql(recording(mset, part[0].id, runner), part[0].id)
        report.add(done)
    if not signalled and target is not None:
        # post_migrate, as the plain run's end sends it: after a last part run as SQL, and
        # after a rerun that only finished what a killed run left (its earlier parts sent
        # none): a migrate that applies nothing
        ends = [mset.get(rid) for rid in heads_of(target) if rid in mset.ids]
        django_upgrade.upgrade(mset, dsn, target, limits, cancelled=cancelled, part=ends)
    report.after = django_format.current(mset, dsn)
    report.latest_applied = django_format.latest_applied(mset, report.after)
    report.elapsed_ms = int((time.monotonic() - started) * 1000)
    return report
