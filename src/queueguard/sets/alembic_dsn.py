"""A libpq DSN as the Alembic adapter hands it to SQLAlchemy: a `postgresql+psycopg` URL
with libpq's options, and a connection on it (`sets.alembic`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from psycopg import conninfo
from sqlalchemy.pool import NullPool

from queueguard.errors import ConnectionFailed
from queueguard.pg.connect import CONNECT_TIMEOUT_S
from queueguard.pg.connect import reason as driver_reason
from queueguard.pg.dsn import params, redact, validate, with_params
from queueguard.sets.alembic_hooks import own_engine

#: libpq options of a connection that must not write (`current`, version-table discovery)
READ_ONLY = "-c default_transaction_read_only=on"


def _plain_host(host: str) -> bool:
    """A single TCP host name or address that fits a URL's host part (not a socket folder,
    not libpq's comma-separated list)."""
    return bool(host) and not host.startswith("/") and "," not in host and "@" not in host


def with_options(dsn: str, options: str | None) -> str:
    """`dsn` with libpq `options` added to its own (pure)."""
    if not options:
        return validate(dsn)
    own = params(dsn).get("options")
    return with_params(dsn, options=f"{own} {options}" if own else options)


def sqlalchemy_url(dsn: str, options: str | None = None) -> sa.URL:
    """A `postgresql+psycopg` URL for a libpq DSN in URL or key=value form (pure): libpq reads
    the DSN, and parameters a URL has no place for (a socket folder, several hosts, sslmode…)
    travel in the query, which SQLAlchemy's psycopg dialect hands to psycopg.connect. `options`
    (libpq's, e.g. `-c lock_timeout=5000`) is added to the DSN's own."""
    parsed = conninfo.conninfo_to_dict(with_options(dsn, options))
    found = {k: str(v) for k, v in parsed.items() if v}
    query = {k: v for k, v in found.items() if k not in {"user", "password", "dbname"}}
    query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    host, port = found.get("host"), found.get("port")
    url_host: str | None = None
    url_port: int | None = None
    if host is not None and _plain_host(host):
        url_host = query.pop("host")
        if port is not None and port.isdigit():
            url_port = int(query.pop("port"))
    return sa.URL.create(
        "postgresql+psycopg",
        username=found.get("user"),
        password=found.get("password"),
        host=url_host,
        port=url_port,
        database=found.get("dbname"),
        query=query,
    )


@contextmanager
def _connected(dsn: str, options: str | None = None) -> Iterator[sa.Connection]:
    engine = own_engine(sa.create_engine(sqlalchemy_url(dsn, options), poolclass=NullPool))
    try:
        try:
            connection = engine.connect()
        except sa.exc.OperationalError as exc:
            raise ConnectionFailed(
                f"cannot connect to {redact(dsn)}: {driver_reason(exc.orig or exc)}"
            ) from None
        with connection:
            yield connection
    finally:
        engine.dispose()
