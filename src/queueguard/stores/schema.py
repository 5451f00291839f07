"""What schema a database holds, and the runtime's startup rule.

An empty database gets the head schema; an older released schema is never upgraded
implicitly (the runtime refuses: "run queueguard upgrade").
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import TupleRow

from queueguard.core.protocol import PROTOCOL
from queueguard.errors import SchemaTooOld, UnknownSchema
from queueguard.pg.connect import connection

HEAD = "004"
VERSION_TABLE = "queueguard_version"
#: Tables each released revision has; used to recognise an unversioned or foreign database.
OUR_TABLES = {
    "executions",
    "scheduled_tasks",
    "tasks",
    "task_queue_user_data",
    "task_queues",
    "runtime_protocol",
    "queueguard_migrations",
    VERSION_TABLE,
}


@dataclass(frozen=True)
class SchemaState:
    revision: str | None  # None: no version table
    tables: frozenset[str]

    @property
    def empty(self) -> bool:
        return self.revision is None and not (self.tables & OUR_TABLES)

    @property
    def at_head(self) -> bool:
        return self.revision == HEAD


def inspect(conn: psycopg.Connection[TupleRow]) -> SchemaState:
    """Read the revision and table names without writing anything."""
    tables = frozenset(
        r[0]
        for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    )
    revision = None
    if VERSION_TABLE in tables:
        row = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
        revision = row[0] if row else None
    conn.rollback()
    return SchemaState(revision, tables)


def prepare_runtime(dsn: str, *, create_if_empty: bool = True, app: str = "queueguard") -> str:
    """The startup rule; returns the revision the runtime will run on."""
    from queueguard.stores.postgres import check_protocol  # local: postgres imports this module

    with connection(dsn, application_name=app) as conn:
        state = inspect(conn)
    if state.empty:
        if not create_if_empty:
            raise SchemaTooOld(None)
        from queueguard.upgrade.runner import upgrade  # local: migrate pulls in Alembic

        upgrade(dsn, to=HEAD, progress=False)
    elif state.revision is None:
        raise UnknownSchema(
            "database has queueguard-like tables but no version table "
            f"({VERSION_TABLE}); refusing to touch it"
        )
    elif state.revision < HEAD:
        raise SchemaTooOld(state.revision)
    elif state.revision > HEAD:
        raise UnknownSchema(f"database is at revision {state.revision}, newer than this code")
    with connection(dsn, application_name=app) as conn:
        check_protocol(conn, PROTOCOL)
    return HEAD
