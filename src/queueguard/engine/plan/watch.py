"""Watching revisions that run through their own tool (an Alembic project's env.py, Django's
migrate): every statement the tool sends is caught at the driver and the session's state is
read around it (`observe`); what each revision did is kept as a `Traced`. The formats' tracers
(`formats.alembic.trace`, `formats.django.trace`) drive the tool with this watcher.

Inside one transaction a lock the revision already holds does not show again: a statement
that takes a lock an earlier statement of the same revision took lists it under the earlier
one (a SQL file's statements are each watched in a transaction of their own instead).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queueguard.engine.plan.apply import code_of
from queueguard.engine.plan.bill import Size
from queueguard.engine.plan.observe import (
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
from queueguard.sets import Revision

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


class Watcher:
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
