"""Which queueguard schema a database holds, and the runtime's start-up rule.

`read_state` is the one place that reads "which revision is this database at" (the runner,
preflight, status, the compatibility matrix and the fixtures all use it). The start-up rule:
an empty database gets the head schema through an installer the caller provides (the runtime
half cannot create schemas itself: that is the upgrade framework's job, see
`queueguard.queue_schema.install`); an older released schema is never upgraded implicitly (the
runtime refuses: "run queueguard upgrade"); then the protocol handshake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from queueguard import revisions
from queueguard.core import installer as installer_hook
from queueguard.core.installer import Installer
from queueguard.core.protocol import PROTOCOL
from queueguard.errors import ProtocolMismatch, SchemaTooOld, UnknownSchema
from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries
from queueguard.revisions import OUR_TABLES, ROLLOUT_SERVING, ROLLOUT_TABLE, VERSION_TABLE

Q = queries("queueguard.stores", "schema.sql")
#: Creates the head schema in an empty database (given its DSN).


@dataclass(frozen=True)
class SchemaState:
    tables: frozenset[str]
    #: the version table's rows (at most a few); None when there is no version table
    versions: tuple[str, ...] | None

    @property
    def revision(self) -> str | None:
        """The recorded revision; None without a version table or without exactly one row."""
        return self.versions[0] if self.versions is not None and len(self.versions) == 1 else None

    @property
    def empty(self) -> bool:
        """Nothing of queueguard's yet, or only an empty version table (the upgrade creates
        it just before the first revision, so a concurrent reader may see it so)."""
        if self.versions:
            return False
        return not (self.tables & OUR_TABLES - {VERSION_TABLE})

    @property
    def unversioned(self) -> bool:
        """queueguard tables without a version table: the revision cannot be known."""
        return self.versions is None and bool(self.tables & OUR_TABLES)


def read_tables(cursor: Any) -> frozenset[str]:
    """Table names of the current schema (catalog only). `cursor` is a DB-API cursor."""
    cursor.execute(Q["tables"])
    return frozenset(str(r[0]) for r in cursor.fetchall())


def read_versions(cursor: Any) -> tuple[str, ...]:
    """The version table's rows (at most a few; ACCESS SHARE on it)."""
    cursor.execute(Q["versions"])
    return tuple(str(r[0]) for r in cursor.fetchall())


def read_state(cursor: Any) -> SchemaState:
    """Which schema the database holds: no writes and no transaction control (the caller
    owns the transaction)."""
    tables = read_tables(cursor)
    return SchemaState(tables, read_versions(cursor) if VERSION_TABLE in tables else None)


def inspect(conn: psycopg.Connection[TupleRow]) -> SchemaState:
    """`read_state` in a transaction of its own, rolled back (nothing is written)."""
    with conn.cursor() as cursor:
        state = read_state(cursor)
    conn.rollback()
    return state


def check_protocol(conn: psycopg.Connection[TupleRow], protocol: int = PROTOCOL) -> tuple[int, int]:
    """The v0.3+ handshake: exactly one runtime_protocol row whose range holds `protocol`;
    returns the window."""
    try:
        rows = conn.execute(Q["protocol"]).fetchall()
    except psycopg.errors.UndefinedTable:
        # the caller's transaction (or connection) is aborted and rolled back by its owner
        raise ProtocolMismatch(protocol, None, None) from None
    if len(rows) != 1:
        raise ProtocolMismatch(protocol, None, None)
    low, high = rows[0]
    if not low <= protocol <= high:
        raise ProtocolMismatch(protocol, low, high)
    return int(low), int(high)


def rollout_phase(conn: psycopg.Connection[TupleRow], target: str) -> str | None:
    """The phase of an online rollout to `target`, or None when none is in progress."""
    try:
        row = conn.execute(Q["rollout"], {"target": target}).fetchone()
    except psycopg.errors.UndefinedTable:
        conn.rollback()
        return None
    return str(row[0]) if row else None


def _rollout_serving(dsn: str, app: str, state: SchemaState) -> bool:
    """The expanded database of an online rollout to the head: the revision before it, and a
    rollout whose window is open. Hosts of the head start against exactly that state."""
    migrations = revisions.packaged()
    if ROLLOUT_TABLE not in state.tables or state.revision != migrations.previous(
        migrations.head.id
    ):
        return False
    with connection(dsn, application_name=app) as conn:
        phase = rollout_phase(conn, migrations.head.id)
        conn.rollback()
    return phase in ROLLOUT_SERVING


def prepare_runtime(
    dsn: str, *, installer: Installer | bool = True, app: str = "queueguard"
) -> str:
    """The start-up rule; returns the revision the runtime will run on.

    `installer`: True for the registered default, False to refuse an empty database, or a
    callable that creates the head schema.
    """
    head = revisions.packaged().head.id
    with connection(dsn, application_name=app) as conn:
        state = inspect(conn)
    if state.empty:
        install = installer_hook.registered() if installer is True else installer or None
        if install is None:
            raise SchemaTooOld(None)
        install(dsn)
    elif state.unversioned:
        raise UnknownSchema(
            "database has queueguard-like tables but no version table "
            f"({VERSION_TABLE}); refusing to touch it"
        )
    elif state.revision is None or not revisions.packaged().knows(state.revision):
        found = state.revision or ", ".join(state.versions or ()) or "none"
        raise UnknownSchema(f"database is at revision {found}, which this code does not know")
    elif state.revision != head and not _rollout_serving(dsn, app, state):
        raise SchemaTooOld(state.revision)
    with connection(dsn, application_name=app) as conn:
        check_protocol(conn, PROTOCOL)
    return head
