"""`queueguard upgrade --online`: 004 while the fleet keeps dispatching (docs/upgrade.md).

`run` carries out one phase (`phase=`) or every phase that is due; `phases` holds them,
`batches` the data work, `session` the transaction discipline (bounds, lease, retries). The
statements belong to the revision: `migrations/sql/<rev>/online/*.sql`.
"""

from __future__ import annotations

import threading
import time

from queueguard import revisions
from queueguard.engine import topology
from queueguard.errors import UsageError
from queueguard.queue_schema import manifest
from queueguard.queue_schema.online import phases as _phases
from queueguard.queue_schema.online.batches import Paused
from queueguard.queue_schema.online.report import OnlineReport, Progress, Tell
from queueguard.queue_schema.online.session import Knobs, PhaseMoved, Session, statements
from queueguard.queue_schema.online.watch import Watch
from queueguard.revisions import SetFacts
from queueguard.stores import schema

__all__ = ["PHASES", "Knobs", "OnlineReport", "Progress", "run"]


PHASES = ("expand", "migrate", "contract", "abort")


def run(
    dsn: str,
    *,
    phase: str | None = None,
    knobs: Knobs | None = None,
    force: bool = False,
    pooled: bool = False,
    tell: Tell | None = None,
    migrations: SetFacts | None = None,
    stop: threading.Event | None = None,
    watch: bool = False,
) -> OnlineReport:
    """Carry out `phase` (or every due phase: expand, migrate, contract) against `dsn`.

    `stop`: once set (e.g. on SIGINT), the run stops after the batch in
    flight commits and reports itself paused. `watch`: hold the autocommit statements to
    the lock ceiling by observing them from other sessions (`online.watch`; verify's).
    """
    if phase is not None and phase not in PHASES:
        raise UsageError(f"--phase takes one of {', '.join(PHASES)}, got {phase!r}")
    knobs = (knobs or Knobs()).validate()
    migrations = migrations or revisions.packaged()
    target = migrations.head.id
    sql = statements(migrations, target)
    manifest.require_intact(migrations.root)
    say = tell or (lambda _message: None)
    started = time.monotonic()
    ceiling = migrations.get(target).online_locks
    observer = Watch(dsn, target, ceiling) if watch else None
    session = Session(
        dsn, target=target, sql=sql, knobs=knobs, ceiling=ceiling, stop=stop, watch=observer
    )
    try:
        session.read(lambda cursor: topology.refuse_standby(cursor, "upgrade --online"))
        before = session.read(lambda cursor: schema.read_state(cursor).revision)
        report = OnlineReport(target=target, before=before, after=before)

        def carry_out(due: str) -> None:
            if due == "expand":
                _phases.expand(session, migrations, report, say)
            elif due == "migrate":
                _phases.migrate(session, report, say)
            elif due == "contract":
                _phases.contract(session, migrations, report, say, force=force, pooled=pooled)
            else:
                _phases.abort(session, report, say, force=force)

        try:
            for due in [phase] if phase else ["expand", "migrate", "contract"]:
                try:
                    carry_out(due)
                except PhaseMoved as moved:
                    # Another migrator moved the rollout on while this one waited for the
                    # lease: the phase looks again (done: nothing left; else its refusal).
                    say(f"{due}: the rollout moved on meanwhile ({moved}); looking again")
                    carry_out(due)
        except Paused:
            report.paused = True
        now = _phases.current_phase(session)
        report.after = session.read(lambda cursor: schema.read_state(cursor).revision)
        if now is not None:
            report.phase = now
        else:
            report.phase = "aborted" if "abort" in report.phases else "done"
        report.next = (
            "paused after the last committed batch: rerun `queueguard upgrade --online` to resume"
            if report.paused
            else _phases.NEXT[report.phase]
        )
        report.batches, report.lock_waits = session.batches, session.lock_waits
        report.elapsed_ms = int((time.monotonic() - started) * 1000)
        return report
    finally:
        session.release()
        session.close()
