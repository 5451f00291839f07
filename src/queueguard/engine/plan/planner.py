"""`queueguard plan`: the downtime bill of a migration set's pending revisions against a real
database.

The target is only read, in READ ONLY transactions (its version, sizes, foreign keys, the
sessions holding locks) and by `pg_dump --schema-only`. The work happens in a scratch
database: the target's schema, a sample of its rows, and every pending revision applied there
as `upgrade` applies it, each statement watched (`observe`), then priced (`bill`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from queueguard.engine import locks
from queueguard.engine.formats.alembic import trace as python_revision
from queueguard.engine.plan import apply, bill, safer, sample, watch
from queueguard.engine.plan.observe import Observation, Q
from queueguard.errors import MigrationError
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.pg.dsn import with_search_path
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets import MigrationSet, Revision, adapter
from queueguard.sets.model import heads_of, one_revision, stretches


@dataclass
class Plan:
    format: str
    current: str | None
    target: str | None
    revisions: list[tuple[str, list[bill.Line]]] = field(default_factory=list)
    max_lock_ms: float | None = None
    sample_rows: int = sample.DEFAULT_ROWS
    #: a Django database: {app_label: its latest applied migration}
    latest_applied: dict[str, str] = field(default_factory=dict)
    #: what the bill says of a revision as a whole ({revision: lines}; Django's migrations)
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: a Django migration as the SQL its migrate sent (`upgrade --online` may run it so), or
    #: why it cannot run as SQL
    captured: dict[str, tuple[str, ...] | str] = field(default_factory=dict)

    @property
    def over(self) -> list[bill.Line]:
        return [
            line
            for _, lines in self.revisions
            for line in lines
            if line.verdict == "exceeds-max-lock"
        ]

    def document(self) -> dict[str, Any]:
        django = self.format == "django"  # an applied set, not a position: said as it is
        return {
            "schemaVersion": 1,
            "format": self.format,
            # one revision each (null at several heads of an Alembic set), and the heads
            "current": None if django else one_revision(self.current),
            "target": None if django else one_revision(self.target),
            "currentHeads": [] if django else list(heads_of(self.current)),
            "targetHeads": list(heads_of(self.target)),
            **({"latestApplied": self.latest_applied} if django else {}),
            "maxLockMs": self.max_lock_ms,
            "sampleRows": self.sample_rows,
            "ok": not self.over,
            "revisions": [
                {
                    "id": rid,
                    "walBytes": _total(line.wal_bytes for line in lines),
                    # a revision's new files are all kept until its commit
                    "extraDiskBytes": _total(line.extra_disk_bytes for line in lines),
                    "notes": self.notes.get(rid, []),
                    "statements": [bill.document(line) for line in lines],
                }
                for rid, lines in self.revisions
            ],
            # the run's WAL, and the most extra disk a revision keeps until its commit
            "walBytes": _total(line.wal_bytes for _, ls in self.revisions for line in ls),
            "extraDiskBytes": max(
                (_total(line.extra_disk_bytes for line in ls) for _, ls in self.revisions),
                default=0,
            ),
        }


def _total(values: Iterable[int | None]) -> int:
    """A sum of the figures measured (a Python revision's statements have none)."""
    return sum(v for v in values if v is not None)


def current_revision(mset: MigrationSet, target_dsn: str) -> str | None:
    """The revision the target is at, read in a READ ONLY transaction."""
    module = adapter(mset.format)
    if mset.format == "django":  # the migrations django_migrations holds, read by Django
        return module.current(mset, target_dsn)  # type: ignore[no-any-return]
    if mset.format in ("alembic", "queueguard"):
        from queueguard.sets import alembic as alembic_format  # not imported for the others

        return alembic_format.current(
            target_dsn, mset.version_table or alembic_format.DEFAULT_VERSION_TABLE
        )
    with sample.read_only(target_dsn) as conn:
        found = module.current(conn)
        conn.rollback()
    return found  # type: ignore[no-any-return]


def trace(mset: MigrationSet, revision: Revision, dsn: str) -> list[Observation]:
    """Apply one revision on the scratch database at `dsn` (at its previous revision) and
    watch each statement: a SQL revision statement by statement, a Python one through its
    own tool (`python_revision`)."""
    if revision.statements is None:
        found: list[watch.Traced] = python_tracer(mset)(mset, dsn, [revision])
        return found[0].seen
    with connection(dsn) as conn:
        try:
            return apply.traced(conn, dsn, revision.statements)
        except apply.StatementFailed as exc:
            text = " ".join(exc.statement.split())[:300]
            raise MigrationError(
                f"revision {revision.id}: statement {exc.index + 1} failed on a scratch "
                f"database: {apply.first_line(exc.error)}\n  {text}"
            ) from None


def python_tracer(mset: MigrationSet) -> Any:
    """What runs a set's Python revisions watched: Django's migrate, or Alembic's env.py."""
    if mset.format == "django":
        from queueguard.engine.formats.django import trace as django_revision

        return django_revision.traced
    return python_revision.traced


def _traced(
    mset: MigrationSet, pending: list[Revision], dsn: str, start: Mapping[str, int] | None
) -> list[watch.Traced]:
    """Every pending revision applied on the scratch copy at `dsn` and watched, with the
    copy's sizes before each and its indexes: consecutive Python revisions in one run of
    their env.py, SQL ones one at a time (from `start`'s statement where a previous run
    stopped). An Alembic revision run as its rendered SQL (`upgrade --online`) moves the
    copy's version row after it, so env.py goes on from there."""
    done = []
    for stretch in stretches(pending):
        if stretch[0].statements is None:
            done += python_tracer(mset)(mset, dsn, stretch)
            continue
        revision = stretch[0]
        if start and start.get(revision.id) and revision.statements is not None:
            revision = replace(revision, statements=revision.statements[start[revision.id] :])
        with connection(dsn) as conn:
            sizes, indexes = watch.sizes_now(conn), watch.indexes_now(conn)
            conn.rollback()
        seen = trace(mset, revision, dsn)
        with connection(dsn) as conn:  # and the indexes the revision built: their table
            indexes = {**watch.indexes_now(conn), **indexes}
            if mset.format == "alembic":
                _record_rendered(mset, revision, conn)
            if mset.format == "django":  # as the online run records it: Django's fake path
                from queueguard.engine.formats.django import online as django_online

                django_online.record_on(mset, revision.id, dsn, conn)
            conn.rollback()
        done.append(watch.Traced(revision, seen, sizes, indexes))
    return done


def _record_rendered(mset: MigrationSet, revision: Revision, conn: Any) -> None:
    """An Alembic revision run as its rendered SQL moves the copy's version row after it."""
    from queueguard.sets import alembic_version_table
    from queueguard.sets.alembic_render import BOOKKEEPING

    if BOOKKEEPING in revision.native:
        table = mset.version_table or alembic_version_table.DEFAULT_VERSION_TABLE
        alembic_version_table.record(conn, table, revision.native[BOOKKEEPING])
        conn.commit()


def _blockers(target_dsn: str, relations: list[str]) -> list[bill.Blocker]:
    if not relations:
        return []
    with sample.read_only(target_dsn) as conn:
        rows = conn.execute(Q["blockers"], {"relations": relations}).fetchall()
        conn.rollback()
    return [bill.Blocker(r[0], r[1], r[2], r[3], float(r[4] or 0), r[5] or "") for r in rows]


def _conflicts(pg_mode: str, held_mode: str) -> bool:
    return locks.mode_of(held_mode) in locks.CONFLICTS[locks.mode_of(pg_mode)]


def plan(
    mset: MigrationSet,
    target_dsn: str,
    *,
    to: str | None = None,
    scratch_admin: str | None = None,
    max_lock_ms: float | None = None,
    sample_rows: int = sample.DEFAULT_ROWS,
    start: Mapping[str, int] | None = None,
    prepared: tuple[str, Mapping[str, bill.Size]] | None = None,
    ahead: Callable[[], tuple[str, tuple[str, str]]] | None = None,
) -> Plan:
    """The bill of the pending revisions. `start`: {revision: first statement index} for a
    revision a previous run left part applied (its progress row): the bill starts there,
    each line's `index` still counting the statements billed. `prepared`: a sample of the
    target built already (the database to clone, the target's sizes read with it), so a
    caller that needs more copies of one sample builds it once. `ahead`: what
    `sample_ahead` made while the set was read (an empty scratch database, the target's
    schema dumped)."""
    current = current_revision(mset, target_dsn)
    pending = mset.pending(current, to)
    result = Plan(mset.format, current, mset.resolve(to), [], max_lock_ms, sample_rows)
    if mset.format == "django":
        from queueguard.sets import django as django_format

        result.latest_applied = django_format.latest_applied(mset, current)
    if not pending:
        return result
    admin = scratch_admin or scratch.database_dsn(target_dsn, "postgres")
    with ScratchDatabases(admin, prefix="qgplan") as databases:
        if prepared is not None:
            copy, target_sizes = databases.create(template=prepared[0]), prepared[1]
        elif ahead is not None:
            copy, dumped = ahead()
            target_sizes = sample.build(target_dsn, copy, sample_rows, dumped=dumped)
        else:
            copy = databases.create()
            target_sizes = sample.build(target_dsn, copy, sample_rows)
        traced = _traced(mset, pending, copy, start)
        result.revisions = bill_traced(traced, target_sizes, max_lock_ms)
        result.notes = {t.revision.id: t.notes for t in traced if t.notes}
        result.captured = {t.revision.id: t.captured for t in traced if t.captured is not None}
    _queue_behind(result, target_dsn)
    return result


@contextmanager
def sample_ahead(
    target_dsn: str, *, scratch_admin: str | None = None
) -> Iterator[Callable[[], tuple[str, tuple[str, str]]]]:
    """The part of a sample that does not depend on the set, started in a thread while the
    caller reads its set (a Django project's runner sets up for tenths of a second in a
    process of its own): an empty scratch database and the target's schema dumped; the rows
    are copied only when something is pending. Yields what waits for them, for `plan(...,
    ahead=)`. Unused, its failure is not the plan's; its database is dropped at the end."""
    admin = scratch_admin or scratch.database_dsn(target_dsn, "postgres")
    # the pool ends first (waiting for both), then the databases are dropped
    with (
        ScratchDatabases(admin, prefix="qgplan") as databases,
        ThreadPoolExecutor(max_workers=2) as pool,
    ):
        empty = pool.submit(databases.create)
        dumped = pool.submit(sample.schema, target_dsn)
        yield lambda: (empty.result(), dumped.result())


@contextmanager
def sampled(
    target_dsn: str,
    *,
    scratch_admin: str | None = None,
    sample_rows: int = sample.DEFAULT_ROWS,
    schema: str | None = None,
    leave_out: Sequence[str] = (),
) -> Iterator[tuple[ScratchDatabases, str, Mapping[str, bill.Size]]]:
    """A sample of the target in a scratch database (dropped after, with every other the
    caller creates in the same `ScratchDatabases`): the databases, the sample's DSN and the
    target's own sizes. `schema`: a schema target (a tenant's schema), sampled as its
    sessions run — `search_path` that schema alone, on the target and on the copy, whose
    DSN then carries it — with `leave_out` (its neighbours, other tenants of the database)
    neither copied nor sized."""
    admin = scratch_admin or scratch.database_dsn(target_dsn, "postgres")
    with ScratchDatabases(admin, prefix="qgplan") as databases:
        copy = databases.create()
        if schema is not None:
            target_dsn, copy = with_search_path(target_dsn, schema), with_search_path(copy, schema)
        yield databases, copy, sample.build(target_dsn, copy, sample_rows, leave_out)


def traced(mset: MigrationSet, pending: list[Revision], sample_dsn: str) -> list[watch.Traced]:
    """The pending revisions applied on the sample at `sample_dsn` and watched."""
    return _traced(mset, pending, sample_dsn, None)


def bill_traced(
    traced: list[watch.Traced],
    target_sizes: Mapping[str, bill.Size],
    max_lock_ms: float | None,
    reference: Mapping[str, bill.Size] | None = None,
    empty: list[watch.Traced] | None = None,
) -> list[tuple[str, list[bill.Line]]]:
    """The bill of revisions traced on a sample, priced at a target's sizes (`fleet plan`
    prices every target of a group from one trace on its largest target's sample, whose
    sizes are the `reference`, and from the same revisions traced on an empty copy of it,
    `empty`: each statement's fixed time)."""
    fixed = {  # a statement is matched by its text too: a Python revision may differ there
        (one.revision.id, i, seen.sql): seen.seconds * 1000
        for one in empty or []
        for i, seen in enumerate(one.seen)
    }
    revisions = []
    for one in traced:
        indexes = one.indexes
        lines = [bill.Line(one.revision.id, i, s) for i, s in enumerate(one.seen)]
        for line in lines:
            line.estimate_ms, line.basis = bill.estimate(
                line.seen, one.sizes, target_sizes, indexes, reference,
                fixed.get((one.revision.id, line.index, line.seen.sql), 0.0),
            )  # fmt: skip
            line.wal_bytes, line.extra_disk_bytes = bill.bytes_at_target(
                line.seen, one.sizes, target_sizes, indexes, reference
            )
        bill.held(lines)
        for line in lines:
            line.blocking = [
                (rel, mode)
                for rel, mode in bill.blocking(line.seen)
                if _on_target(rel, target_sizes, indexes)
            ]
            line.verdict = bill.verdict(line, max_lock_ms)
            line.safer = safer.safer(line)
        revisions.append((one.revision.id, lines))
    return revisions


def _on_target(
    relation: str, target_sizes: Mapping[str, bill.Size], indexes: dict[str, str]
) -> bool:
    """Whether a relation the statement locked exists on the target (a table created by an
    earlier pending revision blocks nobody: no one uses it yet)."""
    return indexes.get(relation, relation) in target_sizes


def _queue_behind(result: Plan, target_dsn: str) -> None:
    """Attach to each statement the target's sessions holding a lock that its own locks
    would wait for now."""
    lines = [line for _, ls in result.revisions for line in ls if line.seen.locks]
    relations = sorted({rel for line in lines for rel, _ in line.seen.locks})
    found = _blockers(target_dsn, relations)
    for line in lines:
        line.waits_behind = [
            b
            for b in found
            if any(rel == b.relation and _conflicts(mode, b.mode) for rel, mode in line.seen.locks)
        ]
