"""A revision's record in the format's own bookkeeping, as the runner of the SQL formats
reads and writes it in the revision's transaction: Temporal's schema_version, the sqldir
ledger, Alembic's version table (a revision run as its rendered SQL), Django's
`django_migrations` (a migration run as the SQL its migrate sent: the statements Django's
fake path compiles)."""

from __future__ import annotations

from typing import Any

import psycopg

from queueguard.engine.apply import progress
from queueguard.errors import UsageError
from queueguard.sets import MigrationSet, Revision, sqldir, temporal


def current(mset: MigrationSet, conn: psycopg.Connection[Any]) -> str | None:
    """The revision the database is at, by the format's own bookkeeping (read only)."""
    if mset.format == "temporal":
        return temporal.current(conn)
    if mset.format == "sqldir":
        return sqldir.current(conn)
    if mset.format == "alembic":  # a revision run as its rendered SQL (`upgrade --online`)
        from queueguard.sets import alembic_version_table as versions

        return versions.read(conn, mset.version_table or versions.DEFAULT_VERSION_TABLE)
    if mset.format == "django":  # a migration run as its captured SQL (`upgrade --online`)
        from queueguard.sets import django

        return django.applied_state(conn)
    raise UsageError(f"format {mset.format} is not read through this connection")


def record(
    conn: psycopg.Connection[Any], mset: MigrationSet, rev: Revision, previous: str | None
) -> None:
    """The format's own record of the revision, and our progress table gone, in the
    revision's (last) transaction."""
    if mset.format == "temporal":
        temporal.record(conn, rev, previous or temporal.INITIAL_VERSION)
    elif mset.format == "sqldir":
        sqldir.ensure_ledger(conn)
        sqldir.record(conn, rev)
    elif mset.format == "alembic":
        from queueguard.sets import alembic_version_table as versions
        from queueguard.sets.alembic_render import BOOKKEEPING

        table = mset.version_table or versions.DEFAULT_VERSION_TABLE
        versions.record(conn, table, rev.native[BOOKKEEPING])
    elif mset.format == "django":  # Django's fake path, as its recorder compiles it
        from queueguard.sets.django import RECORD

        for sql, params in rev.native[RECORD]():
            conn.execute(sql, params)
    progress.clear(conn, rev)
