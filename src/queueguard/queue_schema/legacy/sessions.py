"""Sessions of a legacy host through pg8000 (a driver independent of the runtime's psycopg, so
the fence it proves cannot depend on our own client code) or through psycopg."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from queueguard.errors import (
    ConnectionFailed,
    UsageError,
)
from queueguard.pg.dsn import params, redact
from queueguard.queue_schema.legacy.catalog import PLACEHOLDER

Driver = Literal["pg8000", "psycopg"]
DRIVERS: tuple[Driver, ...] = ("pg8000", "psycopg")
Row = tuple[Any, ...]


# connections -----------------------------------------------------------------------------
class DriverError(Exception):
    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Session(Protocol):
    def run(self, sql: str, params: Mapping[str, Any]) -> list[Row]: ...

    def close(self) -> None: ...


class _Pg8000Session:
    def __init__(self, dsn: str, application_name: str | None) -> None:
        import pg8000.native

        p = params(dsn)
        kwargs: dict[str, Any] = {
            "user": p.get("user", "postgres"),
            "database": p.get("dbname"),
            "password": p.get("password"),
            "application_name": application_name,
            "timeout": 10,
        }
        host, port = p.get("host", "localhost"), int(p.get("port", "5432"))
        if host.startswith("/"):
            kwargs["unix_sock"] = f"{host}/.s.PGSQL.{port}"
        else:
            kwargs.update(host=host, port=port)
        self._errors: tuple[type[BaseException], ...] = (pg8000.native.DatabaseError,)
        try:
            self._conn = pg8000.native.Connection(**kwargs)
        except (pg8000.native.InterfaceError, pg8000.native.DatabaseError, OSError) as exc:
            raise ConnectionFailed(f"pg8000 cannot connect to {redact(dsn)}: {exc}") from None

    def run(self, sql: str, params: Mapping[str, Any]) -> list[Row]:
        try:
            rows = self._conn.run(sql, **params)
        except self._errors as exc:
            info = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            raise DriverError(str(info.get("C", "")), str(info.get("M", exc))) from None
        return [tuple(r) for r in rows or []]

    def close(self) -> None:
        self._conn.close()


class _PsycopgSession:
    def __init__(self, dsn: str, application_name: str | None) -> None:
        import psycopg

        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(
                dsn, autocommit=True, application_name=application_name or "", connect_timeout=10
            )
        except psycopg.OperationalError as exc:
            raise ConnectionFailed(f"psycopg cannot connect to {redact(dsn)}: {exc}") from None

    def run(self, sql: str, params: Mapping[str, Any]) -> list[Row]:
        query = PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))
        try:
            cursor = self._conn.execute(query, dict(params))
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        except self._psycopg.Error as exc:
            raise DriverError(exc.sqlstate or "", str(exc).strip()) from None

    def close(self) -> None:
        self._conn.close()


def default_driver() -> Driver:
    """pg8000 when installed (the independent driver), else psycopg."""
    import importlib.util

    return "pg8000" if importlib.util.find_spec("pg8000") is not None else "psycopg"


def open_session(dsn: str, application_name: str | None, driver: Driver = "pg8000") -> Session:
    if driver == "pg8000":
        return _Pg8000Session(dsn, application_name)
    if driver == "psycopg":
        return _PsycopgSession(dsn, application_name)
    raise UsageError(f"unknown driver {driver!r} (have: {', '.join(DRIVERS)})")
