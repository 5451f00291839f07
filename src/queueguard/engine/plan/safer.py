"""`plan`'s `safer:` line (pure): a safer form of a blocking statement, chosen from what the
statement *is* — PostgreSQL's own parse of it, through the classifier the online forms use
(`online.choose`: pglast, the server's parser as a library) — together with what
`plan` observed it do (a rewrite, a scan, the relations it created). Never from a pattern
over its text: `ALTER TABLE … ADD CONSTRAINT … UNIQUE` is not an ADD COLUMN.

Offered only for a statement that takes a read- or write-blocking lock on a table the target
has and rewrote or scanned something (a catalog-only change is as short as its lock wait);
a statement with no known safer form (a DROP COLUMN, a DO block, a driver-parametrised
query the parser cannot read) gets none.
"""

from __future__ import annotations

from pglast import ast, enums

from queueguard.engine.online import choose as online
from queueguard.engine.plan.bill import Line

_AT = enums.AlterTableType
_CON = enums.ConstrType

CONCURRENT_INDEX = "CREATE INDEX CONCURRENTLY, outside a transaction: it blocks no writer"
NOT_VALID = (
    "ADD CONSTRAINT … NOT VALID, then VALIDATE CONSTRAINT in its own transaction "
    "(it scans under SHARE UPDATE EXCLUSIVE, which blocks no writer)"
)
NOT_NULL = (
    "ADD CONSTRAINT … CHECK (col IS NOT NULL) NOT VALID, VALIDATE it, then SET NOT NULL: "
    "PostgreSQL 12+ skips the scan when a valid CHECK proves it"
)
UNIQUE = (
    "CREATE UNIQUE INDEX CONCURRENTLY on its columns, then ADD CONSTRAINT … UNIQUE "
    "USING INDEX (a catalog change)"
)
PRIMARY_KEY = (
    "CREATE UNIQUE INDEX CONCURRENTLY on its columns (made NOT NULL first through a validated "
    "CHECK), then ADD CONSTRAINT … PRIMARY KEY USING INDEX (a catalog change)"
)
TYPE_CHANGE = "add a new column, backfill it in batches, and switch readers to it"
NEW_COLUMN = (
    "add the column nullable without a volatile default, backfill it in batches, "
    "then set its default"
)
STORED_COLUMN = (
    "a VIRTUAL generated column on PostgreSQL 18+ (computed when read: no rewrite); before "
    "18, a nullable column kept by a trigger and backfilled in batches"
)


def _constraint(sql: str) -> ast.Constraint | None:
    """The constraint a one-subcommand ALTER TABLE … ADD CONSTRAINT adds."""
    node = online.parse_one(sql)
    if isinstance(node, ast.AlterTableStmt) and node.cmds:
        definition = node.cmds[0].def_
        if isinstance(definition, ast.Constraint):
            return definition
    return None


def _rewriting(sql: str) -> list[str]:
    """What each subcommand of a rewriting ALTER TABLE calls for: a type change, a new
    column with a volatile default or a STORED expression; nothing for the others."""
    node = online.parse_one(sql)
    if not isinstance(node, ast.AlterTableStmt):
        return []
    found: list[str] = []
    for cmd in node.cmds or ():
        if cmd.subtype == _AT.AT_AlterColumnType:
            found.append(TYPE_CHANGE)
        elif cmd.subtype == _AT.AT_AddColumn and isinstance(cmd.def_, ast.ColumnDef):
            generated = any(
                isinstance(c, ast.Constraint) and c.contype == _CON.CONSTR_GENERATED
                for c in cmd.def_.constraints or ()
            )
            found.append(STORED_COLUMN if generated else NEW_COLUMN)
    return found


def _advice(form: online.Form) -> list[str]:
    if form.kind == online.CONCURRENT_INDEX:
        return [CONCURRENT_INDEX]
    if form.kind == online.NOT_VALID:
        return [NOT_VALID]
    if form.kind == online.NOT_NULL:
        return [NOT_NULL]
    if form.kind == online.UNIQUE_INDEX:
        constraint = _constraint(form.sql)
        primary = constraint is not None and constraint.contype == _CON.CONSTR_PRIMARY
        return [PRIMARY_KEY if primary else UNIQUE]
    if form.kind == online.REBUILD:
        return _rewriting(form.sql)
    return []  # a cheap subcommand of a split ALTER TABLE: as written


def safer(line: Line) -> str | None:
    """A safer form of the statement, where one is known (only for a costly lock)."""
    seen = line.seen
    if not line.blocking or not (seen.rewrites or seen.scans):
        return None
    forms = online.choose(seen.sql, rewrites=bool(seen.rewrites), created=seen.created)
    if isinstance(forms, online.NoForm):
        return None
    advice = list(dict.fromkeys(a for form in forms for a in _advice(form)))
    if not advice:
        return None
    split = len(forms) > 1 and any(f.kind != online.REBUILD for f in forms)
    prefix = "one ALTER TABLE per subcommand; " if split else ""
    return prefix + "; ".join(advice)
