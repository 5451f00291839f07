"""The statement hooks of a running revision: the caller's before/after around every
statement it sends (caught at the driver, `sets.alembic_tap`), and the refusal of any other
database than the one queueguard gave env.py (`sets.alembic.run`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

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
