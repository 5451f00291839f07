"""Watching a Python revision (an Alembic project's, our own set's): its statements are
known only by running it, so the project's own env.py runs it on the scratch copy while the
session's state is read around every statement it sends (`observe`).

The statements are caught at the driver (psycopg's `Cursor.execute` and `executemany`), not
by SQLAlchemy's cursor events: a data migration may send SQL through the DBAPI cursor itself,
as our own revisions run their step files, and SQLAlchemy never sees those. The version table's
bookkeeping and session settings (`SET …`) are left out of the bill.

Inside one transaction a lock the revision already holds does not show again: a statement
that takes a lock an earlier statement of the same revision took lists it under the earlier
one (a SQL file's statements are each watched in a transaction of their own instead).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from queueguard.sets import MigrationSet, Revision
from queueguard.sets import alembic as alembic_format
from queueguard.sets.alembic_hooks import refuse_elsewhere
from queueguard.sets.alembic_version_table import is_bookkeeping
from queueguard.upgrade.plan.apply import code_of
from queueguard.upgrade.plan.observe import (
    Observation,
    OutsideWatch,
    Relation,
    State,
    diff,
    relations,
    state,
)

_SETTING = re.compile(r"^\s*(SET|RESET|SHOW)\s", re.IGNORECASE)
_QUERY = re.compile(r"^\s*\(?\s*(SELECT|WITH|VALUES|TABLE)\b", re.IGNORECASE)
_PATCH = threading.Lock()


class _Watcher:
    """Reads the session around each statement the revision's thread sends."""

    def __init__(self, dsn: str, bookkeeping: frozenset[str]) -> None:
        self.dsn = dsn
        self.bookkeeping = bookkeeping
        self.thread = threading.get_ident()
        self.seen: list[Observation] = []
        self._busy = False  # our own queries on the same connection are not the revision's

    def wanted(self, sql: str) -> bool:
        if self._busy or threading.get_ident() != self.thread or _SETTING.match(sql):
            return False
        return not any(is_bookkeeping(sql, t) for t in self.bookkeeping)

    def keep(self, seen: Observation) -> None:
        """A query that locked, created, rewrote and scanned nothing of the user's (the
        driver's and the tool's introspection) is not on the bill."""
        quiet = not (seen.locks or seen.created or seen.rewrites or seen.scans)
        if quiet and _QUERY.match(code_of(seen.sql)):
            return
        self.seen.append(seen)

    def run(self, conn: psycopg.Connection[Any], sql: str, execute: Any) -> Any:
        self._busy = True
        try:
            outside: tuple[OutsideWatch, dict[int, Relation]] | None = None
            before: State | None = None
            if conn.autocommit:
                rels = relations(conn)
                outside = (OutsideWatch(self.dsn, conn.info.backend_pid, rels), rels)
            else:
                before = state(conn)
        finally:
            self._busy = False
        started = time.perf_counter()
        try:
            result = execute()
        finally:
            seconds = time.perf_counter() - started
            if outside is not None:
                outside[0].finish()
        self._busy = True
        try:
            if outside is not None:
                watch, rels = outside
                after = relations(conn)
                self.keep(
                    Observation(
                        sql=sql,
                        transactional=False,
                        seconds=max(0.0, seconds - watch.waited_s),
                        locks=watch.finish(),
                        created=sorted(r.name for oid, r in after.items() if oid not in rels),
                    )
                )
            elif before is not None:
                self.keep(diff(sql, before, state(conn), seconds))
        finally:
            self._busy = False
        return result


def _text(cursor: psycopg.Cursor[Any], query: Any) -> str:
    if isinstance(query, str):
        return query
    return str(query.as_string(cursor)) if hasattr(query, "as_string") else str(query)


@contextmanager
def _watching(watcher: _Watcher) -> Iterator[None]:
    """psycopg's Cursor.execute and Cursor.executemany (Alembic's `op.bulk_insert`, a
    DBAPI `executemany` in a data migration), wrapped for the revision's thread while it
    runs."""
    original = psycopg.Cursor.execute
    original_many = psycopg.Cursor.executemany

    def execute(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        text = _text(self, query)
        if threading.get_ident() == watcher.thread:
            refuse_elsewhere(self.connection, watcher.dsn)
        if not watcher.wanted(text):
            return original(self, query, params, **kw)
        return watcher.run(self.connection, text, lambda: original(self, query, params, **kw))

    def executemany(self: psycopg.Cursor[Any], query: Any, params_seq: Any, **kw: Any) -> Any:
        text = _text(self, query)
        if threading.get_ident() == watcher.thread:
            refuse_elsewhere(self.connection, watcher.dsn)
        if not watcher.wanted(text):
            return original_many(self, query, params_seq, **kw)
        return watcher.run(
            self.connection, text, lambda: original_many(self, query, params_seq, **kw)
        )

    with _PATCH:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
        try:
            yield
        finally:
            psycopg.Cursor.execute = original  # type: ignore[method-assign]
            psycopg.Cursor.executemany = original_many  # type: ignore[method-assign]


def traced(mset: MigrationSet, dsn: str, revision: Revision) -> list[Observation]:
    """Run one Python revision on the scratch database at `dsn`; what each statement did."""
    watcher = _Watcher(dsn, mset.bookkeeping)
    started = time.perf_counter()
    with _watching(watcher):
        alembic_format.run(mset.root, dsn, revision.id)
    if not watcher.seen:  # a revision that sent nothing of its own still took its time
        watcher.seen.append(Observation("-- (no statement)", True, time.perf_counter() - started))
    return watcher.seen
