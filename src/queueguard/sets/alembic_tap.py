"""Every statement a running revision sends, caught at the driver: psycopg's
`Cursor.execute` and `Cursor.executemany`, `ServerCursor.execute` (a server-side cursor's
query, which psycopg declares without going through `Cursor.execute`: SQLAlchemy's
`yield_per` and `stream_results`, as an ORM data migration reading in batches uses them),
and the connection's `commit`, wrapped for the thread that runs the revision while it runs
(`sets.alembic`, `upgrade.plan`). The rows a server-side cursor fetches later are not a
statement of their own: what reading them costs shows on the statement that follows.

At the driver rather than through SQLAlchemy's cursor events: a data migration may send SQL
through the DBAPI cursor itself (`op.get_bind().connection.cursor()`, as queueguard's own
revisions run their step files), and SQLAlchemy never sees those. Each statement is first
checked to be on the database queueguard gave env.py (`refuse_elsewhere`).

A hook's own queries on the revision's connection (reading its locks, its settings) go
straight to the driver: while a hook runs, nothing is tapped.

Every SQLAlchemy connection opened meanwhile, in any thread and with any driver, is checked
too (`refuse_engine_elsewhere`, on SQLAlchemy's `engine_connect`): an env.py that migrates
from a worker thread through an engine of its own settings (Prefect's does) is otherwise
seen by none of the above, and would migrate that database while queueguard reports the
one it was given as upgraded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy import event

from queueguard.sets.alembic_hooks import Around, refuse_elsewhere, refuse_engine_elsewhere

__all__ = ["Around", "OnCommit", "tapped"]
#: on_commit(connection): a commit was sent and returned
OnCommit = Callable[[psycopg.Connection[Any]], None]

#: psycopg's methods are patched class-wide: one tap at a time per process (a tap inside
#: another on the same thread wraps the outer one's methods)
_PATCH = threading.RLock()


def _text(cursor: psycopg.Cursor[Any], query: Any, params: Any = None) -> str:
    """The statement's text as the server reads it. Given parameters — even none, as
    SQLAlchemy passes `()` — psycopg reads `%%` as a literal `%` (SQLAlchemy doubles every `%`
    for it); with bound values the placeholders stay in the text."""
    if isinstance(query, str):
        text = query
    elif isinstance(query, bytes):
        text = query.decode(errors="replace")
    else:
        text = str(query.as_string(cursor)) if hasattr(query, "as_string") else str(query)
    if params is not None and not params:
        text = text.replace("%%", "%")
    return text


class _Tap:
    def __init__(self, dsn: str, around: Around | None, on_commit: OnCommit | None) -> None:
        self.dsn, self.around, self.on_commit = dsn, around, on_commit
        self.thread = threading.get_ident()
        self.busy = False

    def mine(self) -> bool:
        return threading.get_ident() == self.thread and not self.busy

    def statement(self, conn: psycopg.Connection[Any], sql: str, execute: Callable[[], Any]) -> Any:
        refuse_elsewhere(conn, self.dsn)
        if self.around is None:
            return execute()

        def unhooked() -> Any:  # the statement itself is tapped, not what the hook sends
            self.busy = False
            try:
                return execute()
            finally:
                self.busy = True

        self.busy = True
        try:
            return self.around(conn, sql, unhooked)
        finally:
            self.busy = False

    def committed(self, conn: psycopg.Connection[Any]) -> None:
        if self.on_commit is None:
            return
        self.busy = True
        try:
            self.on_commit(conn)
        finally:
            self.busy = False


@contextmanager
def tapped(
    dsn: str, around: Around | None = None, on_commit: OnCommit | None = None
) -> Iterator[None]:
    """Within the block, every statement this thread sends through psycopg goes through
    `around` (after the check that it is on `dsn`'s database), and every commit it sends
    is followed by `on_commit`."""
    tap = _Tap(dsn, around, on_commit)
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
    declare = psycopg.ServerCursor.execute
    commit = psycopg.Connection.commit

    def tapped_execute(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        if not tap.mine():
            return execute(self, query, params, **kw)
        run = lambda: execute(self, query, params, **kw)  # noqa: E731
        return tap.statement(self.connection, _text(self, query, params), run)

    def tapped_many(self: psycopg.Cursor[Any], query: Any, params_seq: Any, **kw: Any) -> Any:
        if not tap.mine():
            return executemany(self, query, params_seq, **kw)
        run = lambda: executemany(self, query, params_seq, **kw)  # noqa: E731
        return tap.statement(self.connection, _text(self, query), run)

    def tapped_declare(
        self: psycopg.ServerCursor[Any], query: Any, params: Any = None, **kw: Any
    ) -> Any:
        if not tap.mine():
            return declare(self, query, params, **kw)
        run = lambda: declare(self, query, params, **kw)  # noqa: E731
        return tap.statement(self.connection, _text(self, query), run)

    def tapped_commit(self: psycopg.Connection[Any]) -> None:
        commit(self)
        if tap.mine():
            tap.committed(self)

    def engine_connect(connection: sa.Connection) -> None:
        try:
            refuse_engine_elsewhere(connection, dsn)
        except BaseException:
            connection.close()
            raise

    with _PATCH:
        event.listen(sa.engine.Engine, "engine_connect", engine_connect)
        psycopg.Cursor.execute = tapped_execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = tapped_many  # type: ignore[method-assign]
        psycopg.ServerCursor.execute = tapped_declare  # type: ignore[method-assign]
        psycopg.Connection.commit = tapped_commit  # type: ignore[method-assign]
        try:
            yield
        finally:
            psycopg.Cursor.execute = execute  # type: ignore[method-assign]
            psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
            psycopg.ServerCursor.execute = declare  # type: ignore[method-assign]
            psycopg.Connection.commit = commit  # type: ignore[method-assign]
            event.remove(sa.engine.Engine, "engine_connect", engine_connect)
