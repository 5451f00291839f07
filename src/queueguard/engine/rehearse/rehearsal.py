"""`queueguard rehearse --migrations DIR` for a set of another format: the pending revisions
applied to a full copy of the user's database by the same runner as `upgrade`, each
statement's real duration and lock hold reported next to `plan`'s estimate for it (the plan
is made on the source itself, read only, with its own scratch sample).

The source is never written: the copy is a TEMPLATE clone or a pg_dump restore
(`rehearse.copy`), dropped at the end. An Alembic revision's statements are
those the runner saw at the driver (`sets.alembic_run`), less the queries `plan` found
locking nothing of the user's (SQLAlchemy's and Alembic's introspection).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from queueguard.engine.apply import runner
from queueguard.engine.apply.report import Step
from queueguard.engine.apply.session import Limits
from queueguard.engine.plan import bill
from queueguard.engine.plan.planner import plan
from queueguard.engine.plan.watch import is_introspection
from queueguard.engine.rehearse import written
from queueguard.engine.rehearse.copy import copy_database
from queueguard.engine.rehearse.written import Written
from queueguard.engine.verify.checks import invariant_check
from queueguard.engine.verify.data import invariant_rows
from queueguard.engine.verify.report import Check
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.report.units import size_bytes
from queueguard.sets import MigrationSet, temporal

WAL_BASIS = "the server's insert position around the run: every session's, an upper bound"


@dataclass
class Rehearsed:
    """One statement: what it really took on the copy, and what plan said."""

    revision: str
    index: int
    sql: str
    transactional: bool
    took_ms: float
    held_ms: float
    locks: list[tuple[str, str]]
    estimate_ms: float | None
    estimate_held_ms: float | None
    #: plan's WAL and extra disk for it at the target's size (None: not measured)
    wal_bytes: int | None = None
    extra_disk_bytes: int | None = None


@dataclass
class SetRehearsal:
    format: str
    method: str
    before: str | None
    after: str | None
    statements: list[Rehearsed] = field(default_factory=list)
    #: the --invariants, each run on the copy before and after the upgrade
    checks: list[Check] = field(default_factory=list)
    elapsed_ms: int = 0
    #: a Django database (an applied set, not a position): {app_label: latest applied}
    latest_applied: dict[str, str] | None = None
    #: plan's WAL and extra disk for the run (the most a revision keeps until its commit)
    predicted: tuple[int, int] = (0, 0)
    #: what the run wrote on the copy (`written`)
    written: Written = field(default_factory=Written)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def as_json(self) -> dict[str, Any]:
        django = self.format == "django"  # an applied set, not a position: said as it is
        return {
            "format": self.format,
            "method": self.method,
            "before": None if django else self.before,
            "after": None if django else self.after,
            **({"latestApplied": self.latest_applied or {}} if django else {}),
            "elapsed_ms": self.elapsed_ms,
            "walBytes": {
                "predicted": self.predicted[0],
                "written": self.written.wal_bytes,
                "basis": WAL_BASIS,
            },
            "extraDiskBytes": {
                "predicted": self.predicted[1],
                "peak": self.written.peak_extra_disk_bytes,
            },
            "ok": self.ok,
            "checks": [check.document() for check in self.checks],
            "statements": [
                {
                    "revision": s.revision,
                    "index": s.index,
                    "sql": s.sql,
                    "transactional": s.transactional,
                    "took_ms": round(s.took_ms, 1),
                    "held_ms": round(s.held_ms, 1),
                    "locks": [{"relation": r, "mode": m} for r, m in s.locks],
                    "estimate_ms": None if s.estimate_ms is None else round(s.estimate_ms, 1),
                    "estimate_held_ms": None
                    if s.estimate_held_ms is None
                    else round(s.estimate_held_ms, 1),
                    "wal_bytes": s.wal_bytes,
                    "extra_disk_bytes": s.extra_disk_bytes,
                }
                for s in self.statements
            ],
        }


def _estimates(lines: list[bill.Line]) -> dict[tuple[str, str], list[bill.Line]]:
    """Plan's lines by (revision, statement text), in order (a text may repeat)."""
    found: dict[tuple[str, str], list[bill.Line]] = {}
    for line in lines:
        found.setdefault((line.revision, line.seen.sql), []).append(line)
    return found


def rehearse(
    mset: MigrationSet,
    source_dsn: str,
    scratch_admin: str | None = None,
    *,
    to: str | None = None,
    limits: Limits | None = None,
    invariants: dict[str, str] | None = None,
) -> SetRehearsal:
    started = time.monotonic()
    admin = scratch_admin or scratch.database_dsn(source_dsn, "postgres")
    bill_ = plan(mset, source_dsn, to=to, scratch_admin=admin)
    estimates = _estimates([line for _, lines in bill_.revisions for line in lines])
    steps: list[Step] = []
    with ScratchDatabases(admin, prefix="qgrehearse") as databases:
        with _away(mset):
            copy, method = copy_database(source_dsn, databases)
        if mset.format == "temporal":
            _rekey_temporal(copy, scratch.dbname_of(source_dsn))
        before = invariant_rows(copy, invariants) if invariants else {}
        with written.measured(copy) as wrote:
            report = runner.upgrade(mset, copy, to=to, limits=limits, on_step=steps.append)
        after = invariant_rows(copy, invariants) if invariants else {}
    result = SetRehearsal(mset.format, method, report.before, report.after)
    result.written = wrote
    doc = bill_.document()
    result.predicted = (int(doc["walBytes"]), int(doc["extraDiskBytes"]))
    result.latest_applied = report.latest_applied
    subject = f"the copy of {scratch.dbname_of(source_dsn)}"
    result.checks = [invariant_check(n, subject, before[n], after[n]) for n in before]
    for step in sorted(steps, key=lambda s: (mset.ids.index(s.revision), s.index)):
        planned = estimates.get((step.revision, step.sql), [])
        line = planned.pop(0) if planned else None
        if line is None and is_introspection(step.sql):
            continue  # a query plan saw lock nothing of the user's: the driver's, Alembic's
        result.statements.append(
            Rehearsed(
                revision=step.revision,
                index=step.index,
                sql=step.sql,
                transactional=step.transactional,
                took_ms=step.seconds * 1000,
                held_ms=step.held_s * 1000,
                locks=line.seen.locks if line else [],
                estimate_ms=line.estimate_ms if line else None,
                estimate_held_ms=line.held_ms if line else None,
                wal_bytes=line.wal_bytes if line else None,
                extra_disk_bytes=line.extra_disk_bytes if line else None,
            )
        )
    result.elapsed_ms = int((time.monotonic() - started) * 1000)
    return result


def _away(mset: MigrationSet) -> AbstractContextManager[object]:
    """A Django set's runner off the source while it is copied: a TEMPLATE clone needs the
    source without sessions (else the copy is a slower pg_dump restore)."""
    if mset.format != "django":
        return nullcontext()
    from queueguard.sets import django

    return django.graph_of(mset).borrow(None)


def _rekey_temporal(copy: str, source_db: str) -> None:
    """Temporal keys its version row on the database's name: the copy takes over the
    source's."""
    with connection(copy) as conn:
        temporal.take_over_version(conn, source_db)
        conn.commit()


def render_text(result: SetRehearsal) -> str:
    if result.latest_applied is not None:  # Django: an applied set, said app by app
        latest = ", ".join(f"{a}.{n}" for a, n in sorted(result.latest_applied.items()))
        where = f"each app's latest applied: {latest or 'none'}"
    else:
        where = f"{result.before or 'empty'} -> {result.after}"
    w = max([9, *(len(s.revision) for s in result.statements)])
    lines = [
        f"rehearsed ({result.format}) on a {result.method} copy: {where} in {result.elapsed_ms} ms",
        f"  {'revision':>{w}} {'#':>3} {'took':>9} {'held':>9} {'plan said':>10} "
        f"{'plan WAL':>9}  statement / locks",
    ]
    for s in result.statements:
        said = "-" if s.estimate_ms is None else f"{s.estimate_ms:.0f} ms"
        text = " ".join(s.sql.split())
        wal = "-" if s.wal_bytes is None else size_bytes(s.wal_bytes)
        lines.append(
            f"  {s.revision:>{w}} {s.index + 1:>3} {s.took_ms:>6.0f} ms {s.held_ms:>6.0f} ms "
            f"{said:>10} {wal:>9}  {text[:60]}"
        )
        if s.locks:
            held = ", ".join(f"{r} {m}" for r, m in s.locks)
            lines.append(f"  {'':>{w}} {'':>3} {'':>9} {'':>9} {'':>10} {'':>9}  {held}")
    lines.append(
        f"  WAL: plan said {size_bytes(result.predicted[0])}, the copy's server wrote "
        f"{size_bytes(result.written.wal_bytes)} (every session's: an upper bound); extra "
        f"disk: plan said {size_bytes(result.predicted[1])}, peak "
        f"{size_bytes(result.written.peak_extra_disk_bytes)}"
    )
    for check in result.checks:
        lines.append(f"{'ok  ' if check.ok else 'FAIL'} invariant {check.subject}: {check.detail}")
        lines.extend(f"       {problem}" for problem in check.problems)
    return "\n".join(lines)
