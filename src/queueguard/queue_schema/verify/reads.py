"""What verify reads from a scratch database, one connection each: its state document, its
clock, its whole rows since then, per-table checksums, the rows of a query."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from queueguard.engine.checksums import table_checksums
from queueguard.pg.connect import connection
from queueguard.queue_schema import rows, state
from queueguard.revisions import SetFacts


def _export(dsn: str) -> dict[str, Any]:
    with connection(dsn) as conn:
        return state.export_database(conn)


def _clock(dsn: str) -> datetime:
    with connection(dsn) as conn:
        return rows.clock(conn)


def _whole(dsn: str, since: datetime, migrations: SetFacts) -> rows.Doc:
    with connection(dsn) as conn:
        return rows.export_upgraded(conn, since, migrations)


def _checksums(dsn: str) -> dict[str, str]:
    with connection(dsn) as conn:
        return table_checksums(conn)


def _rows(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with connection(dsn) as conn:
        return conn.execute(sql).fetchall()
