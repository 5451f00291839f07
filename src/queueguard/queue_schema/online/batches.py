"""The online data work of 004, batch by batch (migrate runs it; contract once more after
closing the window). Each function commits one batch per `Session.transaction`, so a refusal,
a kill or a lost server leaves every committed batch valid and the rest for a rerun."""

from __future__ import annotations

import functools
import time
from typing import Any

from queueguard.errors import MigrationError
from queueguard.queue_schema.online.report import OnlineReport, Progress, Tell
from queueguard.queue_schema.online.session import Cursor, Session


class Paused(Exception):
    """The operator asked to stop (SIGINT): the last batch committed, the rest waits."""


def _between(session: Session) -> None:
    """Throttle between two batches: the pause knob, then replica lag; stop when asked."""
    if session.stop.is_set():
        raise Paused
    if session.knobs.pause_s:
        time.sleep(session.knobs.pause_s)
    if session.knobs.max_lag_s is None:
        return
    while True:  # measured as well as reported: a paused replay reports no new lag
        lag = session.read(session.lag_watch.read).seconds
        if lag <= session.knobs.max_lag_s or session.stop.is_set():
            return
        time.sleep(min(1.0, max(0.1, lag - session.knobs.max_lag_s)))


def _record(session: Session, cursor: Cursor, rows: int, started: float) -> None:
    """Count the batch's rows and time in the rollout record (status's rate and ETA), in the
    batch's own transaction."""
    cursor.execute(
        session.q("rollout.progress"),
        {"target": session.target, "rows": rows, "seconds": time.monotonic() - started},
    )


class _Rate:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, done: int) -> float | None:
        elapsed = time.monotonic() - self.started
        return done / elapsed if elapsed > 0 and done else None


def repair_counters(
    session: Session, phase: str, phases: tuple[str, ...], report: OnlineReport, tell: Tell
) -> None:
    """Every queue's last_task_id at least its highest stored id (keyset over queues)."""
    after, seen = "", 0
    while True:

        def batch(cursor: Cursor, after: str = after) -> Any:
            cursor.execute(
                session.q("migrate.repair_counters"),
                {"after": after, "limit": session.knobs.batch_size},
            )
            return cursor.fetchone()

        last, count, fixed = session.transaction(batch, phases=phases, what="repair counters")
        if not count:
            break
        after, seen = str(last), seen + count
        report.counters_repaired += fixed
        report.largest_batch = max(report.largest_batch, int(count))
        tell(Progress(phase, "counters", seen, None))
        _between(session)


def relocate(
    session: Session,
    phase: str,
    phases: tuple[str, ...],
    report: OnlineReport,
    tell: Tell,
    *,
    fence: bool,
) -> None:
    """Move every legacy @auto queue's rows into its default queue, batch by batch. `fence`:
    fence each source first (in the window; once contract closed it, no v0.3 host can hold
    a queue any more)."""
    queues = session.read(lambda c: c.execute(session.q("migrate.auto_queues")).fetchall())
    moved_total, rate = 0, _Rate()
    for source, destination in queues:
        fenced: int | None = None if fence else -1  # the range the source was fenced at
        while True:
            batch = functools.partial(
                _move, session, source=source, destination=destination, fenced=fenced
            )
            moved, fenced = session.transaction(batch, phases=phases, what=f"relocate {source}")
            if not moved:
                break
            moved_total += moved
            report.relocated[source] = report.relocated.get(source, 0) + moved
            report.largest_batch = max(report.largest_batch, moved)
            tell(Progress(phase, "relocate", moved_total, None, rate(moved_total)))
            _between(session)


def _move(
    session: Session, cursor: Cursor, *, source: str, destination: str, fenced: int | None
) -> tuple[int, int | None]:
    started = time.monotonic()
    cursor.execute(session.q("migrate.lock_source"), {"source": source})
    row = cursor.fetchone()
    if row is None:
        return 0, fenced
    range_id, namespace, task_queue, task_type, partition = row
    if fenced != -1 and range_id != fenced:  # fence first: its holder's next write fails
        cursor.execute(session.q("migrate.fence_source"), {"source": source})
        fenced = int(cursor.fetchone()[0])  # type: ignore[index]
    cursor.execute(
        session.q("migrate.ensure_destination"),
        {
            "destination": destination,
            "namespace": namespace,
            "task_queue": task_queue,
            "task_type": task_type,
            "partition": partition,
        },
    )
    cursor.execute(session.q("migrate.lock_destination"), {"destination": destination})
    (destination_range,) = cursor.fetchone()  # type: ignore[misc]
    cursor.execute(
        session.q("migrate.move_batch"),
        {
            "source": source,
            "destination": destination,
            "destination_range": destination_range,
            "limit": session.knobs.batch_size,
        },
    )
    moved, moved_max, inserted = cursor.fetchone()  # type: ignore[misc]
    if moved != inserted:  # rolls the batch back whole
        raise MigrationError(
            f"relocating {source}: moved {moved} rows but inserted {inserted} into "
            f"{destination}; the batch was rolled back"
        )
    if moved:
        cursor.execute(
            session.q("migrate.drain_source"), {"source": source, "moved_max": moved_max}
        )
        _record(session, cursor, moved, started)
    return int(moved), fenced


def directives(
    session: Session,
    phase: str,
    phases: tuple[str, ...],
    report: OnlineReport,
    tell: Tell,
    *,
    passes: int,
    total: int | None = None,
) -> None:
    """Give every task row outside @auto queues its version directive: keyset passes over
    the marker index until a pass finds nothing (or `passes` passes)."""
    updated_total, rate = 0, _Rate()
    for _ in range(passes):
        after: tuple[str, int] = ("", -1)
        updated_pass = 0
        while True:

            def batch(cursor: Cursor, after: tuple[str, int] = after) -> Any:
                started = time.monotonic()
                cursor.execute(
                    session.q("migrate.directive_batch"),
                    {
                        "after_queue": after[0],
                        "after_id": after[1],
                        "limit": session.knobs.batch_size,
                    },
                )
                row = cursor.fetchone()
                if row and row[1]:
                    _record(session, cursor, int(row[1]), started)
                return row

            seen, updated, last_queue, last_id = session.transaction(
                batch, phases=phases, what="directives"
            )
            if not seen:
                break
            after = (str(last_queue), int(last_id))
            updated_pass += updated
            updated_total += updated
            report.directives += updated
            report.largest_batch = max(report.largest_batch, int(seen))
            tell(Progress(phase, "directives", updated_total, total, rate(updated_total)))
            _between(session)
        if not updated_pass:
            break


def remaining(session: Session) -> tuple[int, int]:
    """(rows still without a directive, rows still in @auto queues)."""

    def count(cursor: Cursor) -> tuple[int, int]:
        cursor.execute(session.q("migrate.remaining"))
        directives, relocations = cursor.fetchone()  # type: ignore[misc]
        return int(directives), int(relocations)

    return session.read(count)
