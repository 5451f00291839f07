"""Dropped columns (pure): the shadow is created with a stand-in column wherever the table has
a dropped one, and the stand-ins dropped, so every column has the attnum it has on the table
and every column the statement adds gets the attnum the plain statement gives it (pg_dump
leaves dropped columns out; pg_repack and pg_upgrade do the same). A stand-in's type has
the dropped column's length and alignment."""

from __future__ import annotations

from pglast import ast

from queueguard.engine.online.rebuild.catalog import Table
from queueguard.errors import MigrationError

#: a dropped column's stand-in: created where the dropped column was, then dropped itself
PLACEHOLDER = '"........queueguard.dropped.{}........"'


def with_placeholders(text: str, base: int, node: ast.CreateStmt, table: Table) -> str:
    """The CREATE TABLE with a stand-in column wherever the table has a dropped one, so every
    column (and every column the statement adds) gets the attnum it has on the table; the
    stand-ins past the last live column are added by `trailing_placeholders`. `base`: where
    the statement's text starts in the dump (node locations count from there)."""
    defs = [e for e in node.tableElts or () if isinstance(e, ast.ColumnDef)]
    live = table.live_columns
    if [d.colname for d in defs] != [c.name for c in live]:
        raise MigrationError(f"rebuild: the dumped columns of {table.qualified} are not its own")
    inserts: list[tuple[int, str]] = []
    for column in table.columns:
        if not column.dropped:
            continue
        after = next((i for i, c in enumerate(live) if c.attnum > column.attnum), None)
        if after is not None:
            stand_in = f"{PLACEHOLDER.format(column.attnum)} {column.type_sql},\n    "
            inserts.append(((defs[after].location or 0) - base, stand_in))
    for at, stand_in in sorted(inserts, reverse=True):
        text = text[:at] + stand_in + text[at:]
    return text


def trailing_placeholders(table: Table) -> list[str]:
    """Stand-ins for dropped columns after the last live one, and every stand-in dropped."""
    last_live = max((c.attnum for c in table.live_columns), default=0)
    statements = [
        f"ALTER TABLE {table.shadow} ADD COLUMN {PLACEHOLDER.format(c.attnum)} {c.type_sql}"
        for c in table.columns
        if c.dropped and c.attnum > last_live
    ]
    dropped = [PLACEHOLDER.format(c.attnum) for c in table.columns if c.dropped]
    if dropped:
        drops = ", ".join(f"DROP COLUMN {name}" for name in dropped)
        statements.append(f"ALTER TABLE {table.shadow} {drops}")
    return statements
