"""Opening connections: one place that maps connection failures to typed errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from queueguard.errors import ConnectionFailed
from queueguard.pg.dsn import redact, validate

CONNECT_TIMEOUT_S = 10
#: called with the DSN and each connection `connect` opens in this context, before it is
#: used: a fleet worker keeps its target's connections (to cancel their statement when its
#: lease is lost) and checks a schema target's search_path on the server first
ON_CONNECT: ContextVar[Callable[[str, psycopg.Connection[Any]], None] | None] = ContextVar(
    "on_connect", default=None
)


def reason(exc: BaseException) -> str:
    """A driver error's message on one line, passwords redacted: libpq's "connection refused"
    comes with an indented hint on a second line, and errors are one line on stderr."""
    return " ".join(line.strip() for line in redact(str(exc)).splitlines() if line.strip())


def connection_lost(exc: BaseException) -> bool:
    """A lost connection (class 08, server shutdown 57P0x, or no SQLSTATE at all), as opposed
    to an error the server answered, such as a lock timeout. SQLAlchemy's wrapper counts by
    its original."""
    orig = getattr(exc, "orig", exc)
    if not isinstance(orig, psycopg.OperationalError):
        return False
    state = orig.sqlstate
    return state is None or state.startswith(("08", "57P"))


def connect(
    dsn: str, *, application_name: str = "queueguard", **kwargs: Any
) -> psycopg.Connection[TupleRow]:
    """Connect or raise ConnectionFailed with a redacted target."""
    validate(dsn)
    try:
        # The tools' connections prepare nothing server-side: through a transaction pooler
        # the next transaction may run on another server connection.
        options: dict[str, Any] = {"prepare_threshold": None, **kwargs}
        conn = psycopg.connect(
            dsn,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT_S,
            **options,
        )
    except psycopg.OperationalError as exc:
        raise ConnectionFailed(f"cannot connect to {redact(dsn)}: {reason(exc)}") from None
    hook = ON_CONNECT.get()
    if hook is not None:
        try:
            hook(dsn, conn)
        except BaseException:
            conn.close()
            raise
    return conn


@contextmanager
def connection(dsn: str, **kwargs: Any) -> Iterator[psycopg.Connection[TupleRow]]:
    """A connection closed on exit (commit is the caller's business)."""
    conn = connect(dsn, **kwargs)
    try:
        yield conn
    finally:
        conn.close()
