"""Scratch databases for the scenarios, and one-off queries against them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from psycopg import sql

from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.queue_schema.runner import upgrade

PREFIX = "qg_chaos"


def admin_dsn() -> str:
    """Admin DSN of the shared scratch server (QUEUEGUARD_PG, embedded by default)."""
    return scratch.server_dsn()


def scratch_databases(admin: str | None = None) -> scratch.ScratchDatabases:
    """The scenarios' scratch databases on `admin`'s server (the shared one by default)."""
    return scratch.ScratchDatabases(admin or admin_dsn(), prefix=PREFIX)


@contextlib.contextmanager
def scratch_database(
    admin: str | None = None, *, revision: str | None = "004", template: str | None = None
) -> Iterator[str]:
    """A database of our own (empty, at `revision`, or a clone of `template`), then dropped."""
    with scratch_databases(admin) as databases:
        dsn = databases.create(template=template)
        if template is None and revision is not None:
            upgrade(dsn, to=revision, progress=False)
        yield dsn


def query(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement in autocommit mode; its rows (none for a command)."""
    with connection(dsn, application_name="qg-chaos-check", autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def create_database(admin: str, name: str, owner: str | None = None) -> str:
    """A database of a fixed name (on a private server, which is thrown away whole)."""
    stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if owner:
        stmt = sql.SQL("{} OWNER {}").format(stmt, sql.Identifier(owner))
    with connection(admin, autocommit=True) as conn:
        conn.execute(stmt)
    return scratch.database_dsn(admin, name)
