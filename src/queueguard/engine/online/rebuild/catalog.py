"""The rebuild's facts about the live table, read from the catalog, and the names of what it
builds beside it.

Everything the rebuild creates lives in the schema `queueguard_shadow`: the shadow (the
table with the statement applied, under the table's own name, its indexes under theirs),
the log of changed keys, the capture function, and — only between a swap and the
validation of the foreign keys it added NOT VALID — the ledger that says so. The swap moves
the old table into `queueguard_shadow_old` for the moment it takes to drop it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from queueguard.engine.online.names import quote
from queueguard.errors import MigrationError
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.online.rebuild", "rebuild.sql")

SHADOW_SCHEMA = "queueguard_shadow"
OLD_SCHEMA = "queueguard_shadow_old"
LOG = f"{SHADOW_SCHEMA}.queueguard_log"
LEDGER = f"{SHADOW_SCHEMA}.queueguard_rebuild"
CAPTURE_FUNCTION = f"{SHADOW_SCHEMA}.queueguard_capture()"
#: the capture triggers on the live table (row changes; TRUNCATE)
CAPTURE_TRIGGERS = ("queueguard_capture", "queueguard_capture_truncate")


@dataclass(frozen=True)
class Column:
    attnum: int
    name: str
    dropped: bool
    #: SQL type (a placeholder's for a dropped column) and collation where not the type's
    type_sql: str
    collation: str | None
    generated: bool
    identity: bool

    @property
    def typed(self) -> str:
        """The type as a cast or a column definition writes it, with its collation."""
        return self.type_sql + (f" COLLATE {self.collation}" if self.collation else "")


@dataclass(frozen=True)
class Sequence:
    qualified: str
    name: str
    column: str


@dataclass(frozen=True)
class Table:
    oid: int
    schema: str
    name: str
    kind: str
    persistence: str
    typed: bool
    partition: bool
    rows_estimate: int
    row_type: int
    array_type: int
    owner: str
    columns: tuple[Column, ...]
    #: the replay key: primary key columns, else a unique NOT NULL key (empty: none)
    key: tuple[str, ...]
    #: the index of that key (the shadow builds it first: the replay looks rows up by it)
    key_index: str | None
    serials: tuple[Sequence, ...]
    identities: tuple[Sequence, ...]
    #: the names that move with the table: its indexes and identity sequences
    moving: frozenset[str]

    @property
    def qualified(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}"

    @property
    def shadow(self) -> str:
        return f"{SHADOW_SCHEMA}.{quote(self.name)}"

    @property
    def live_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.dropped)

    def column(self, name: str) -> Column:
        for c in self.live_columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def last_attnum(self) -> int:
        return max((c.attnum for c in self.columns), default=0)


def find(conn: psycopg.Connection[Any], table: str) -> Table | None:
    """The table `table` names (as a statement writes it, resolved by the search_path)."""
    row = conn.execute(Q["table_facts"], {"table": table}).fetchone()
    if row is None:
        return None
    oid = int(row[0])
    params = {"oid": oid}
    columns = tuple(
        Column(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6])
        for r in conn.execute(Q["columns"], params).fetchall()
    )
    key_row = conn.execute(Q["replay_key"], params).fetchone()
    sequences = conn.execute(Q["owned_sequences"], params).fetchall()
    moving = {r[0] for r in conn.execute(Q["relation_names"], params).fetchall()}
    return Table(
        oid=oid,
        schema=row[1],
        name=row[2],
        kind=row[3],
        persistence=row[4],
        typed=row[5],
        partition=row[6],
        rows_estimate=max(int(row[7]), 0),
        row_type=int(row[8]),
        array_type=int(row[9]),
        owner=row[11],
        columns=columns,
        key=tuple(key_row[0]) if key_row else (),
        key_index=key_row[1] if key_row else None,
        serials=tuple(Sequence(r[0], r[1], r[2]) for r in sequences if r[3] == "a"),
        identities=tuple(Sequence(r[0], r[1], r[2]) for r in sequences if r[3] == "i"),
        moving=frozenset(moving),
    )


def describe(conn: psycopg.Connection[Any], table: str) -> Table:
    found = find(conn, table)
    if found is None:
        raise MigrationError(f"rebuild: no table {table}")
    return found


def fingerprint(conn: psycopg.Connection[Any], table: Table) -> str:
    row = conn.execute(Q["fingerprint"], {"oid": table.oid}).fetchone()
    return str(row[0]) if row else ""


def schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute(Q["schema_exists"], {"schema": schema}).fetchone()
    return bool(row and row[0])
