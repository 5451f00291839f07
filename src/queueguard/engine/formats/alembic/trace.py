"""Watching Python revisions (an Alembic project's, our own set's): their statements are
known only by running them, so the project's own env.py runs them on the scratch copy — once
for all the pending revisions, as `alembic upgrade` does, with a hook at each revision's
start and end (`sets.alembic_run`) — while the session's state is read around every
statement they send (`observe`).

The statements are caught at the driver (psycopg's `Cursor.execute` and `executemany`,
`sets.alembic_tap`), not by SQLAlchemy's cursor events: a data migration may send SQL
through the DBAPI cursor itself, as our own revisions run their step files. The version
table's bookkeeping and session settings (`SET …`) are left out of the bill. At each
revision's end, inside its transaction, the scratch copy's table sizes and indexes are read
for the bill of the next one (what `plan` reads between two SQL revisions).

Inside one transaction a lock the revision already holds does not show again: a statement
that takes a lock an earlier statement of the same revision took lists it under the earlier
one (a SQL file's statements are each watched in a transaction of their own instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from queueguard.engine.plan.watch import Traced, Watcher, indexes_now, sizes_now
from queueguard.pg.connect import connection
from queueguard.sets import MigrationSet, Revision


def traced(mset: MigrationSet, dsn: str, revisions: Sequence[Revision]) -> list[Traced]:
    """Run the pending Python `revisions` on the scratch database at `dsn` (at the first
    one's previous revision) in one env.py run; what each statement of each did. A revision
    that sends nothing on PostgreSQL (a branch for another dialect) has no statement."""
    if not revisions:
        return []
    watcher = Watcher(dsn, mset.bookkeeping)
    by_id = {r.id: r for r in revisions}
    with connection(dsn) as conn:
        sizes, indexes = sizes_now(conn), indexes_now(conn)
        conn.rollback()
    done: list[Traced] = []

    def started(revision: str) -> None:
        done.append(Traced(by_id[revision], [], sizes, dict(indexes)))
        watcher.seen = done[-1].seen

    def applied(_revision: str, conn: psycopg.Connection[Any]) -> None:
        # the next revision's "before", and the indexes this one built (with their table)
        nonlocal sizes, indexes
        sizes, indexes = sizes_now(conn), indexes_now(conn)
        done[-1].indexes = {**indexes, **done[-1].indexes}

    # imported here: Alembic and SQLAlchemy cost a second to a command that does not use them
    from queueguard.sets import alembic as alembic_format

    hooks = alembic_format.Hooks(around=watcher.run, started=started, applied=applied)
    alembic_format.upgrade_to(mset, dsn, mset.end_of(revisions), hooks=hooks)
    return done
