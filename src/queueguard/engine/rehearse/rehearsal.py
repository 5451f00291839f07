"""`queueguard rehearse`: `rehearse`, the one rehearsal (copy, upgrade, drop, timed) of any
set, and `of_set` for a set of another format: the pending revisions applied to a full copy
of the user's database by the same runner as `upgrade`, each statement's real duration and
lock hold reported next to `plan`'s estimate for it (the plan is made on the source itself,
read only, with its own scratch sample).

The source is never written: the copy is a TEMPLATE clone or a pg_dump restore
(`rehearse.copy`), dropped at the end. An Alembic revision's statements are
those the runner saw at the driver (`sets.alembic_run`), less the queries `plan` found
locking nothing of the user's (SQLAlchemy's and Alembic's introspection).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from queueguard.engine.apply import runner
from queueguard.engine.apply.report import Step, UpgradeReport
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

U = TypeVar("U")  # what a set's upgrade returns
C = TypeVar("C")  # what its check returns


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


def rehearse(
    source_dsn: str,
    upgrade: Callable[[str], U],
    check: Callable[[str], Callable[[str], C]],
    scratch_admin: str | None = None,
    *,
    away: AbstractContextManager[object] | None = None,
    started: float | None = None,
) -> tuple[str, U, C, int]:
    """The one rehearsal: the source copied (`copy_database`, on `scratch_admin`'s server,
    default the source's; the source is never written), the upgrade run on the copy, the copy
    dropped whatever happens, all of it timed. What a set brings, each given the copy's DSN:
    `upgrade(copy)` runs its upgrade; `check(copy)` reads the copy before it and returns the
    function that judges the copy after it (a set's --invariants, the own set's conservation
    laws). `away`: held while the source is copied (the caller's session off it, so TEMPLATE
    may clone it); `started`: the `time.monotonic()` counted from, default now. Returns how
    the source was copied ("template" or "dump"), what `upgrade` returned, the judge's
    verdict and the milliseconds it all took."""
    started = time.monotonic() if started is None else started
    admin = scratch_admin or scratch.database_dsn(source_dsn, "postgres")
    with ScratchDatabases(admin, prefix="qgrehearse") as databases:
        with away or nullcontext():
            copy, method = copy_database(source_dsn, databases)
        judge = check(copy)
        upgraded = upgrade(copy)
        checked = judge(copy)
    return method, upgraded, checked, int((time.monotonic() - started) * 1000)


def of_set(
    mset: MigrationSet,
    source_dsn: str,
    scratch_admin: str | None = None,
    *,
    to: str | None = None,
    limits: Limits | None = None,
    invariants: dict[str, str] | None = None,
) -> SetRehearsal:
    """`rehearse` for a set of any format: its runner on the copy, each statement timed and
    set next to plan's estimate (plan reads the source first, with its own scratch sample),
    what the run wrote, the --invariants held."""
    started = time.monotonic()
    admin = scratch_admin or scratch.database_dsn(source_dsn, "postgres")
    bill_ = plan(mset, source_dsn, to=to, scratch_admin=admin)
    steps: list[Step] = []
    source_db = scratch.dbname_of(source_dsn)

    def upgrade(copy: str) -> tuple[UpgradeReport, Written]:
        if mset.format == "temporal":  # its version row is keyed on the database's name
            with connection(copy) as conn:
                temporal.take_over_version(conn, source_db)
                conn.commit()
        with written.measured(copy) as wrote:
            report = runner.upgrade(mset, copy, to=to, limits=limits, on_step=steps.append)
        return report, wrote

    subject = f"the copy of {source_db}"

    def rows(copy: str) -> dict[str, Any]:
        return invariant_rows(copy, invariants) if invariants else {}

    def held(copy: str) -> Callable[[str], list[Check]]:
        before = rows(copy)
        return lambda copy: [
            invariant_check(n, subject, before[n], after) for n, after in rows(copy).items()
        ]

    method, (report, wrote), checks, elapsed_ms = rehearse(
        source_dsn, upgrade, held, admin, away=_away(mset), started=started
    )
    doc = bill_.document()
    result = SetRehearsal(mset.format, method, report.before, report.after, checks=checks)
    result.written, result.latest_applied = wrote, report.latest_applied
    result.predicted = (int(doc["walBytes"]), int(doc["extraDiskBytes"]))
    estimates: dict[tuple[str, str], list[bill.Line]] = {}  # by text, in order: it may repeat
    for _, lines in bill_.revisions:
        for said in lines:
            estimates.setdefault((said.revision, said.seen.sql), []).append(said)
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
    result.elapsed_ms = elapsed_ms
    return result


def _away(mset: MigrationSet) -> AbstractContextManager[object]:
    """A Django set's runner off the source while it is copied: a TEMPLATE clone needs the
    source without sessions (else the copy is a slower pg_dump restore)."""
    if mset.format != "django":
        return nullcontext()
    from queueguard.sets import django

    return django.graph_of(mset).borrow(None)


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
