"""`queueguard snapshot export|import`: a database's whole state as a snapshot document.

Import only into an empty database (it gets the head schema first) or an empty head-schema
one; the document is validated before anything is written, and loaded in one transaction.
An import that fails after installing the head schema into an empty database drops what it
installed: the database is left as it was found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psycopg import sql

from queueguard import revisions, snapshot
from queueguard.engine import topology
from queueguard.errors import QueueguardError, UsageError
from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import state
from queueguard.queue_schema.runner import upgrade
from queueguard.stores import schema

Doc = dict[str, Any]
Q = queries("queueguard.queue_schema", "snapshots.sql")


def export(dsn: str) -> Doc:
    """The state of the database at `dsn` (revision 003 or later), read-only."""
    with connection(dsn) as conn:
        return state.export_database(conn)


def read(path: Path) -> Doc:
    """Parse and validate a snapshot file (legacy formats are rejected)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    return snapshot.parse(raw)


def import_into(dsn: str, doc: Doc) -> None:
    """Load a validated document into an empty database (or an empty head-schema one)."""
    head = revisions.packaged().head.id
    with connection(dsn) as conn:
        with conn.cursor() as cursor:
            topology.refuse_standby(cursor, "import snapshots into")
            before = _schema_objects(cursor)
        found = schema.inspect(conn)
    if found.tables and found.revision != head:
        raise QueueguardError(
            "refusing to import: the target database is neither empty nor "
            "an empty head-schema database"
        )
    upgrade(dsn, progress=False)  # head schema for an empty database; no-op at head
    try:
        with connection(dsn) as conn, conn.transaction():
            state.load_document(conn, doc)
    except BaseException as exc:
        if not found.tables:
            try:
                _drop_installed(dsn, before)
            except Exception as cleanup:  # e.g. the server is gone: say so, keep the cause
                exc.add_note(f"the head schema installed for the import is left: {cleanup}")
        raise


def _schema_objects(cursor: Any) -> set[tuple[str, str]]:
    """(DROP keyword, quoted name) of the current schema's objects (catalog only)."""
    cursor.execute(Q["schema_objects"])
    return {(str(kind), str(name)) for kind, name in cursor.fetchall()}


def _drop_installed(dsn: str, before: set[tuple[str, str]]) -> None:
    """Drop, in one transaction, every object the head-schema install added (views, then
    tables, then the functions and types they use; CASCADE takes their indexes and owned
    sequences)."""
    with connection(dsn) as conn, conn.transaction(), conn.cursor() as cursor:
        cursor.execute(Q["schema_objects"])
        for kind, name in cursor.fetchall():
            if (kind, name) not in before:
                # `name` is PostgreSQL's own quoted text of the object (regclass/regprocedure)
                cursor.execute(
                    sql.SQL("DROP {} IF EXISTS {} CASCADE").format(sql.SQL(kind), sql.SQL(name))
                )
