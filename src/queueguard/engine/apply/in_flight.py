"""The online path's part of the runner (`upgrade --online`): a statement run in its online
forms (`online_statement`, across transactions of its own under the session-level runner
lock), and the statement a killed run left in flight, finished the way it began
(`finish_in_flight`, `with_flight`). Kept apart so the runner reads as the offline path."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from queueguard.engine.apply import bookkeeping, progress, runner_lock
from queueguard.engine.apply.report import Step
from queueguard.engine.apply.session import Limits, begin, online_name, stopped
from queueguard.engine.plan.apply import first_line, is_transaction_control
from queueguard.errors import MigrationError
from queueguard.pg.connect import connect, connection_lost
from queueguard.sets import MigrationSet, Revision

if TYPE_CHECKING:  # the online path (and pglast, its parser) is imported only when used
    from queueguard.engine.online.apply import OnlinePlan
    from queueguard.engine.online.choose import Form


def finish_in_flight(
    mset: MigrationSet, dsn: str, limits: Limits, options: Mapping[str, Any]
) -> str | None:
    """Finish the statement a killed `upgrade --online` left in flight, with the forms it
    was begun with (a rerun must not plan it again: its half-done state is on the target);
    `revision N statement I`, or None when nothing was in flight."""
    conn = connect(dsn, application_name=online_name())
    try:
        begin(conn, limits, limits.lock_timeout_ms)
        flight = progress.in_flight(conn)
        previous = bookkeeping.current(mset, conn)
        conn.commit()
        if flight is None:
            return None
        from queueguard.engine.online import apply as online_apply
        from queueguard.engine.online.apply import OnlinePlan

        revision, index, forms, step = flight
        rev = mset.get(revision)
        statements = rev.statements or ()
        last = max(i for i, s in enumerate(statements) if not is_transaction_control(s))
        found = (online_apply.decode(forms), step)
        with recorded(mset, dsn, revision) as view:
            online_statement(
                conn,
                view,
                view.get(revision),
                previous,
                limits,
                index,
                index == last,
                found,
                OnlinePlan(options={**options}),
            )
        return f"{index + 1} of revision {revision}"
    except psycopg.Error as exc:
        raise stopped(dsn, None, exc) from exc
    finally:
        conn.close()


@contextmanager
def recorded(mset: MigrationSet, dsn: str, revision: str) -> Iterator[MigrationSet]:
    """The set, a Django migration run as SQL given its fake path (see `django_online`)."""
    if mset.format != "django":
        yield mset
        return
    from queueguard.engine.formats.django import online as django_online
    from queueguard.sets import django

    with django.graph_of(mset).borrow(dsn) as runner:
        yield django_online.recording(mset, revision, runner)


def with_flight(conn: psycopg.Connection[Any], online: OnlinePlan | None) -> OnlinePlan | None:
    """The plan with the statement a killed run left in flight: it is finished with the
    forms it was begun with, whatever this run would choose."""
    flight = progress.in_flight(conn)
    if flight is None:
        return online
    from queueguard.engine.online import apply as online_apply
    from queueguard.engine.online.apply import OnlinePlan

    revision, index, forms, step = flight
    base = online or OnlinePlan()
    return OnlinePlan(base.forms, base.options, (revision, index, online_apply.decode(forms), step))


def online_statement(
    conn: psycopg.Connection[Any],
    mset: MigrationSet,
    rev: Revision,
    previous: str | None,
    limits: Limits,
    index: int,
    last: bool,
    found: tuple[Sequence[Form], int],
    online: OnlinePlan,
) -> list[Step]:
    """Statement `index` in its online forms; its last transaction moves the progress past
    it or, for the revision's last statement, writes the format's bookkeeping."""

    def finish(c: psycopg.Connection[Any]) -> None:
        if last:
            bookkeeping.record(c, mset, rev, previous)
        else:
            progress.write(c, rev, index + 1)

    from queueguard.engine.online import apply as online_apply

    forms, step = found
    # the runner lock for the whole statement, across its transactions (a second runner
    # waits, then finds it done)
    runner_lock.take_for_statement(conn, limits.runner_wait_s, restart=conn.rollback)
    conn.commit()
    try:
        ran = online_apply.run_statement(
            conn, limits, rev, forms, step=step, finish=finish, options=online.options
        )
    except psycopg.Error as exc:
        if connection_lost(exc):
            raise
        kinds = ", ".join(f.kind for f in forms)
        raise MigrationError(
            f"revision {rev.id} failed at statement {index + 1}, run online ({kinds}): "
            f"{first_line(exc)}; statements 1–{index} stay applied. Fix the cause and rerun "
            "(it finishes this statement the way it began), or undo it with --phase abort\n"
            f"  {' '.join(forms[0].sql.split())[:200]}"
        ) from None
    finally:
        if not conn.closed and not conn.broken:
            conn.rollback()
            runner_lock.release_statement(conn)
            conn.commit()
    return [Step(rev.id, index, sql, tx, took, took) for sql, took, tx in ran]
