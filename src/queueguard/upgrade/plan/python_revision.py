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

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queueguard.pg.connect import connection
from queueguard.sets import MigrationSet, Revision
from queueguard.upgrade.plan.apply import code_of
from queueguard.upgrade.plan.bill import Size
from queueguard.upgrade.plan.observe import (
    Observation,
    OutsideWatch,
    Q,
    Relation,
    State,
    diff,
    new_files,
    relations,
    state,
)

_SETTING = re.compile(r"^\s*(SET|RESET|SHOW)\s", re.IGNORECASE)
_QUERY = re.compile(r"^\s*\(?\s*(SELECT|WITH|VALUES|TABLE)\b", re.IGNORECASE)


@dataclass
class Traced:
    """One revision as it ran on the scratch copy: what each statement did, the copy's table
    sizes before it, and every index (existing before it or built by it) with its table."""

    revision: Revision
    seen: list[Observation] = field(default_factory=list)
    sizes: Mapping[str, Size] = field(default_factory=dict)
    indexes: dict[str, str] = field(default_factory=dict)
    #: what the bill says of the revision as a whole (a Django migration's: opaque,
    #: `atomic = False`, a concurrent build's retry, a RunPython's data)
    notes: list[str] = field(default_factory=list)
    #: a Django migration: its statements as SQL, every one the bill's lines stand for (it
    #: may run so, `upgrade --online`), or why it cannot run as SQL
    captured: tuple[str, ...] | str | None = None


def sizes_now(conn: psycopg.Connection[Any]) -> dict[str, Size]:
    """The tables' sizes as `conn` sees them, in its own transaction (left open)."""
    rows = conn.execute(Q["table_sizes"], {"leave_out": []}).fetchall()
    return {r[0]: Size(r[1], r[2], r[3], r[4], r[5]) for r in rows}


def indexes_now(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """{index: its table} as `conn` sees them (by regclass text)."""
    rows = conn.execute(
        "SELECT indexrelid::regclass::text, indrelid::regclass::text FROM pg_index"
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def is_introspection(sql: str) -> bool:
    """A query (SELECT, WITH, …): on the bill only when it locked something of the user's."""
    return bool(_QUERY.match(code_of(sql)))


class _Watcher:
    """Reads the session around each statement the revisions send."""

    def __init__(self, dsn: str, bookkeeping: frozenset[str]) -> None:
        self.dsn = dsn
        self.bookkeeping = bookkeeping
        self.seen: list[Observation] = []
        #: the session as read after the last statement in a transaction (None: after one
        #: in autocommit, or not read)
        self.after: State | None = None

    def wanted(self, sql: str) -> bool:
        if _SETTING.match(sql):
            return False
        if not self.bookkeeping:
            return True
        from queueguard.sets.alembic_version_table import is_bookkeeping  # Alembic's sets only

        return not any(is_bookkeeping(sql, t) for t in self.bookkeeping)

    def keep(self, seen: Observation) -> None:
        """A query that locked, created, rewrote and scanned nothing of the user's (the
        driver's and the tool's introspection) is not on the bill."""
        quiet = not (seen.locks or seen.created or seen.rewrites or seen.scans)
        if quiet and is_introspection(seen.sql):
            return
        self.seen.append(seen)

    def run(
        self,
        conn: psycopg.Connection[Any],
        sql: str,
        execute: Callable[[], Any],
        before: State | None = None,
    ) -> Any:
        """An `alembic_tap.Around`: the statement, with the session read before and after
        (outside a transaction: watched from other sessions while it runs). `before`: the
        session as the caller knows it is now, in the statement's transaction (read after
        the previous statement, with nothing sent between), else read here."""
        self.after = None
        if not self.wanted(sql):
            return execute()
        outside: tuple[OutsideWatch, dict[int, Relation]] | None = None
        wal = 0
        if conn.autocommit:
            before = None
            rels = relations(conn)
            wal = _server_wal(conn)
            outside = (OutsideWatch(self.dsn, conn.info.backend_pid, rels), rels)
        elif before is None:
            before = state(conn)
        started = time.perf_counter()
        try:
            result = execute()
        finally:
            # a session served elsewhere (the Django runner's) says how long the statement
            # took there, without the trip to it
            seconds = getattr(conn, "statement_seconds", None) or time.perf_counter() - started
            if outside is not None:
                outside[0].finish()
        if outside is not None:
            watch, rels = outside
            after = relations(conn)
            seen = Observation(
                sql=sql,
                transactional=False,
                seconds=max(0.0, seconds - watch.waited_s),
                locks=watch.finish(),
                created=sorted(r.name for oid, r in after.items() if oid not in rels),
                wal_bytes=max(0, _server_wal(conn) - wal),
            )
        elif before is not None:
            self.after = state(conn)
            seen = diff(sql, before, self.after, seconds)
        else:
            return result
        # its new relation files, read while they are there (before the commit)
        changed = [*seen.rewrites, *seen.created]
        seen.disk_bytes = new_files(conn, changed) if changed else 0
        self.keep(seen)
        return result


def _server_wal(conn: Any) -> int:
    row = conn.execute(Q["server_wal"]).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def traced(mset: MigrationSet, dsn: str, revisions: Sequence[Revision]) -> list[Traced]:
    """Run the pending Python `revisions` on the scratch database at `dsn` (at the first
    one's previous revision) in one env.py run; what each statement of each did. A revision
    that sends nothing on PostgreSQL (a branch for another dialect) has no statement."""
    if not revisions:
        return []
    watcher = _Watcher(dsn, mset.bookkeeping)
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
