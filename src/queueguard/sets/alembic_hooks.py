"""The statement hooks of a running revision: the caller's before/after around every
statement it sends (caught at the driver, `sets.alembic_tap`), and the refusal of any other
database than the one queueguard gave env.py (`sets.alembic.run`)."""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from queueguard.errors import UsageError
from queueguard.pg.dsn import params

#: before(dbapi_connection, sql_text)
Before = Callable[[Any, str], None]
#: after(dbapi_connection, sql_text, seconds, error or None)
After = Callable[[Any, str, float, BaseException | None], None]
#: around(dbapi_connection, sql_text, execute): runs the statement by calling execute()
Around = Callable[[Any, str, Callable[[], Any]], Any]


def around_of(before: Before | None, after: After | None) -> Around:
    """An `alembic_tap.Around` calling `before(connection, sql)` and, once the statement
    returned or failed, `after(connection, sql, seconds, error)` (its own time: the hooks'
    is not counted)."""

    def around(conn: Any, sql: str, execute: Callable[[], Any]) -> Any:
        if before is not None:
            before(conn, sql)
        started = time.perf_counter()
        try:
            result = execute()
        except BaseException as exc:
            if after is not None:
                after(conn, sql, time.perf_counter() - started, exc)
            raise
        if after is not None:
            after(conn, sql, time.perf_counter() - started, None)
        return result

    return around


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


#: the SQLAlchemy engines queueguard makes itself (its connections for env.py, its reads of a
#: version table): `refuse_engine_elsewhere` leaves them alone, so that queueguard's own work
#: on another database in another thread meanwhile (the proof's other side) is not taken for
#: env.py's
_OWN_ENGINES: weakref.WeakSet[Any] = weakref.WeakSet()
_E = TypeVar("_E")


def own_engine(engine: _E) -> _E:
    """`engine`, marked as queueguard's own (see `_OWN_ENGINES`)."""
    _OWN_ENGINES.add(engine)
    return engine


def _url_where(url: Any) -> tuple[str, str, str, str]:
    """(backend, database, host, port) a SQLAlchemy URL names ("" where it does not say)."""
    query = dict(getattr(url, "query", {}) or {})

    def one(value: Any) -> str:
        if isinstance(value, tuple | list):
            return ",".join(str(v) for v in value)
        return "" if value is None else str(value)

    return (
        str(url.get_backend_name()),
        one(url.database),
        one(url.host or query.get("host")),
        one(url.port or query.get("port")),
    )


def refuse_engine_elsewhere(connection: Any, dsn: str) -> None:
    """Refuse a SQLAlchemy connection that env.py opened, in whatever thread, on another
    database than `dsn`: read from the driver's own connection where it says (psycopg,
    psycopg2), else from the engine's URL (asyncpg, SQLite: another backend is another
    database). The driver-level tap only sees psycopg on the thread that runs env.py; an
    application that migrates from a worker thread or through an async engine (Prefect's
    env.py does both, with the URL of its own settings) is caught here, before any
    statement."""
    if connection.engine in _OWN_ENGINES:
        return
    raw = getattr(getattr(connection, "connection", None), "dbapi_connection", None)
    info = getattr(raw, "info", None)
    if info is not None and hasattr(info, "dbname"):
        refuse_elsewhere(raw, dsn)
        return
    backend, database, host, port = _url_where(connection.engine.url)
    want_db, want_host, want_port = _where(dsn)
    differs = backend != "postgresql" or any(
        want and have and want != have
        for want, have in ((want_db, database), (want_host, host), (want_port, port))
    )
    if differs:
        raise UsageError(
            f"the project's env.py connected to {connection.engine.url.render_as_string()!r}"
            f", not to the database queueguard gave it ({want_db!r} on "
            f"{want_host or 'the default host'}:{want_port or 'the default port'}); nothing "
            "was run there. Make env.py use config.attributes['connection'] or the "
            "sqlalchemy.url queueguard sets"
        )
