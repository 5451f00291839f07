"""The statement hooks of a running revision: every statement it sends, through SQLAlchemy's
cursor events, to the caller's before/after, and refused on any other database than the one
queueguard gave env.py (`sets.alembic.run`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from queueguard.errors import UsageError
from queueguard.pg.dsn import params

#: before(dbapi_connection, sql_text)
Before = Callable[[Any, str], None]
#: after(dbapi_connection, sql_text, seconds, error or None)
After = Callable[[Any, str, float, BaseException | None], None]


class _Hooks:
    """SQLAlchemy cursor events on the Engine class (so an engine env.py builds itself is
    hooked too) → the caller's before/after, for the thread that runs the revision only."""

    def __init__(self, before: Before | None, after: After | None, dsn: str) -> None:
        self.before, self.after = before, after
        self.thread = threading.get_ident()
        self.started: dict[int, float] = {}
        self.dsn = dsn

    def _mine(self) -> bool:
        return threading.get_ident() == self.thread

    def on_before(
        self, conn: sa.Connection, _cursor: Any, statement: str, _p: Any, context: Any, _m: bool
    ) -> None:
        if not self._mine():
            return
        refuse_elsewhere(conn.connection.dbapi_connection, self.dsn)
        if self.before is not None:
            self.before(conn.connection.dbapi_connection, statement)
        self.started[id(context)] = time.perf_counter()  # after the hook: its own time is not

    def on_after(
        self, conn: sa.Connection, _cursor: Any, statement: str, _p: Any, context: Any, _m: bool
    ) -> None:
        if not self._mine():
            return
        seconds = time.perf_counter() - self.started.pop(id(context), time.perf_counter())
        if self.after is not None:
            self.after(conn.connection.dbapi_connection, statement, seconds, None)

    def on_error(self, failure: sa.engine.ExceptionContext) -> None:
        if not self._mine() or failure.execution_context is None:
            return  # an error before any statement was sent (connecting): no before either
        started = self.started.pop(id(failure.execution_context), None)
        if started is None or self.after is None or failure.connection is None:
            return
        seconds = time.perf_counter() - started
        error = failure.original_exception
        raw = failure.connection.connection.dbapi_connection
        self.after(raw, failure.statement or "", seconds, error)

    @contextmanager
    def listening(self) -> Iterator[None]:
        listeners: list[tuple[str, Callable[..., None]]] = [
            ("before_cursor_execute", self.on_before),
            ("after_cursor_execute", self.on_after),
            ("handle_error", self.on_error),
        ]
        for name, fn in listeners:
            event.listen(sa.Engine, name, fn)
        try:
            yield
        finally:
            for name, fn in listeners:
                event.remove(sa.Engine, name, fn)


def _where(dsn: str) -> tuple[str, str, str]:
    """(database, host, port) a DSN names, libpq's environment defaults filled in ("" where
    nothing says: not compared)."""
    found = params(dsn)
    return (
        str(found.get("dbname") or os.environ.get("PGDATABASE") or found.get("user") or ""),
        str(found.get("host") or os.environ.get("PGHOST") or ""),
        str(found.get("port") or os.environ.get("PGPORT") or ""),
    )


def refuse_elsewhere(raw: Any, dsn: str) -> None:
    """Refuse a statement about to run on another database than `dsn`: an env.py that
    connects by its own settings (`DATABASE_URL`, the application's config) instead of the
    URL or connection it was given would otherwise migrate that database — production, when
    queueguard meant a scratch copy."""
    info = getattr(raw, "info", None)
    if info is None:
        return
    want_db, want_host, want_port = _where(dsn)
    got = (str(info.dbname), str(info.host or ""), str(info.port or ""))
    differs = [
        want != have
        for want, have in zip((want_db, want_host, want_port), got, strict=True)
        if want
    ]
    if any(differs):
        raise UsageError(
            f"the project's env.py connected to database {got[0]!r} on {got[1]}:{got[2]}, not "
            f"to the one queueguard gave it ({want_db!r} on {want_host or 'the default host'}:"
            f"{want_port or 'the default port'}); nothing was run there. Make env.py use "
            "config.attributes['connection'] or the sqlalchemy.url queueguard sets"
        )
