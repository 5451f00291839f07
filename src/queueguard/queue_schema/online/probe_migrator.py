"""The online probe's checks of the migrator (`probe`): one migrator at a time (busy while
held or mid-batch, taken over once expired, released at the end); the rollout record counts
what migrate did, and `status` shows it.
"""

from __future__ import annotations

from queueguard.errors import LockTimeout, MigratorBusy
from queueguard.pg.connect import connect, connection
from queueguard.queue_schema import status
from queueguard.queue_schema.online.probe_common import KNOBS
from queueguard.queue_schema.online.report import OnlineReport
from queueguard.queue_schema.online.session import Session
from queueguard.report.units import duration_s
from queueguard.revisions import SetFacts


def lease(dsn: str, sql: dict[str, dict[str, str]], target: str, first: Session) -> list[str]:
    """One migrator at a time; a lease that expired is taken over; a release frees it."""
    found = []
    # The lease's length from the transaction that took it (its now()), not from a later
    # read: the gap between the two would eat into the window on a loaded machine.
    taken = first.transaction(
        lambda c: c.execute("SELECT now()").fetchone()[0],  # type: ignore[index]
        phases=("migrate",),
        what="probe: lease",
    )
    with connection(dsn) as conn:
        holder, left = conn.execute(
            "SELECT holder, extract(epoch FROM lease_until - %s) FROM queueguard_rollout",
            (taken,),
        ).fetchone() or (None, None)
    if holder != first.holder or not KNOBS.lease_s - 5 < float(left or 0) <= KNOBS.lease_s:
        found.append(f"the lease is {holder!r} for {left}s, not {first.holder!r} for ~30s")
    second = Session(dsn, target=target, sql=sql, knobs=KNOBS)
    try:
        if _takes(second):
            found.append("a second migrator took the lease while the first held it")
        with connection(dsn) as conn:
            conn.execute("UPDATE queueguard_rollout SET lease_until = now() - interval '1s'")
            conn.commit()
        in_batch = connect(dsn)  # another migrator inside a batch: its row lock
        try:
            in_batch.execute("SELECT 1 FROM queueguard_rollout FOR UPDATE")
            try:
                if _takes(second):
                    found.append("a second migrator took the lease during a batch")
            except LockTimeout:
                found.append("a second migrator queued behind a batch instead of waiting")
        finally:
            in_batch.rollback()
            in_batch.close()
        if not _takes(second):
            found.append("a second migrator could not take an expired lease")
        first.release()  # the first, its lease taken over, must not free the second's
        if _lease_holder(dsn) != second.holder:
            found.append("a migrator whose lease was taken over released its successor's")
        second.release()
        with connection(dsn) as conn:
            left_holder = conn.execute("SELECT holder FROM queueguard_rollout").fetchall()
        if left_holder != [(None,)]:
            found.append(f"a released lease is still held: {left_holder}")
    finally:
        second.close()
    return found


def _lease_holder(dsn: str) -> str | None:
    with connection(dsn) as conn:
        row = conn.execute("SELECT holder FROM queueguard_rollout").fetchone()
    return str(row[0]) if row and row[0] is not None else None


def _takes(session: Session) -> bool:
    try:
        session.transaction(lambda _c: None, phases=("migrate",), what="probe: lease")
    except MigratorBusy:
        return False
    return True


def progress(
    dsn: str, report: OnlineReport, migrations: SetFacts, took_s: float, holder: str
) -> list[str]:
    """The rollout record counts what migrate did, with sane times, and `status` shows it
    (the lease is still `holder`'s)."""
    found = []
    with connection(dsn) as conn:
        row = conn.execute(
            "SELECT rows_done, migrate_seconds, migrate_seconds BETWEEN 0 AND %s, "
            "started_at <= updated_at, updated_at <= now(), "
            "now() - started_at < interval '1 hour' FROM queueguard_rollout",
            (took_s,),
        ).fetchone()
        shown = status.rollout_status(conn, migrations)
    done = report.directives + report.rows_relocated
    if row is None or row[0] != done or not all(row[2:]):
        found.append(
            f"the rollout record says {row}, migrate did {done} rows in {duration_s(took_s)}"
        )
        return found
    rate = round(done / row[1], 1) if row[1] else None
    expected = {
        "phase": "contract",
        "rowsDone": done,
        "rowsLeft": {"directives": 0, "relocations": 0},
        "etaSeconds": None,
        "migrator": holder,
        "rowsPerSecond": rate,
    }
    seen = {key: (shown or {}).get(key) for key in expected}
    if seen != expected or not shown or not shown["startedAt"] <= shown["updatedAt"]:
        found.append(f"status shows the rollout as {shown}, expected {expected}")
    return found
