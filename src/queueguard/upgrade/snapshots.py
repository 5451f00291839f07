"""`queueguard snapshot export|import`: a database's whole state as a snapshot document.

Import only into an empty database (it gets the head schema first) or an empty head-schema
one; the document is validated before anything is written, and loaded in one transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from queueguard import revisions, snapshot
from queueguard.errors import QueueguardError, UsageError
from queueguard.pg.connect import connection
from queueguard.stores import schema
from queueguard.upgrade import state, topology
from queueguard.upgrade.runner import upgrade

Doc = dict[str, Any]


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
        found = schema.inspect(conn)
    if found.tables and found.revision != head:
        raise QueueguardError(
            "refusing to import: the target database is neither empty nor "
            "an empty head-schema database"
        )
    upgrade(dsn, progress=False)  # head schema for an empty database; no-op at head
    with connection(dsn) as conn, conn.transaction():
        state.load_document(conn, doc)
