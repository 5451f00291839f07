"""Which online form a statement gets (pure): from PostgreSQL's own parse tree (pglast, the
server's parser as a library) together with what `plan` observed the statement do on the
scratch copy (a rewrite, the indexes it created). Never from regular expressions.

*Whether* a statement goes online is not decided here: the runner asks only for the
statements `plan` priced over the lock budget on a table that holds rows.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pglast
from pglast import ast, enums
from pglast.stream import RawStream

from queueguard.engine.online.names import quote

#: the forms, each a module of this package
CONCURRENT_INDEX = "concurrent-index"
NOT_VALID = "not-valid"
NOT_NULL = "not-null"
UNIQUE_INDEX = "unique-index"
REBUILD = "rebuild"
#: a cheap subcommand of a split ALTER TABLE, run as written
PLAIN = "plain"

_AT = enums.AlterTableType
_CON = enums.ConstrType


@dataclass(frozen=True)
class Form:
    """One online step of a statement: `kind`, the table it works on (as written), the SQL it
    starts from (the statement, or one subcommand of it as its own ALTER TABLE), and the
    names `plan` saw the plain statement create (an index PostgreSQL named itself)."""

    kind: str
    table: str
    sql: str
    created: tuple[str, ...] = ()
    #: for NOT_NULL: the column; for NOT_VALID / UNIQUE_INDEX: the constraint name, if given
    name: str | None = None


@dataclass(frozen=True)
class NoForm:
    """No online form: why, in one line."""

    reason: str


def parse_one(sql: str) -> ast.Node:
    """The one statement `sql` holds, parsed by PostgreSQL's grammar."""
    stmts = pglast.parse_sql(sql)
    if len(stmts) != 1:
        raise ValueError(f"expected one statement, got {len(stmts)}")
    node = stmts[0].stmt
    assert node is not None
    return node


def nodes(tree: object) -> Iterator[ast.Node]:
    """Every node of a parse tree, the tree's own first."""
    if isinstance(tree, ast.Node):
        yield tree
        for attr in tree:
            yield from nodes(getattr(tree, attr))
    elif isinstance(tree, tuple | list):
        for item in tree:
            yield from nodes(item)


def render(node: ast.Node) -> str:
    return str(RawStream()(node))


def relation_name(rel: ast.RangeVar) -> str:
    """The table as written (schema-qualified where it was), quoted where needed."""
    return ".".join(quote(p) for p in (rel.schemaname, rel.relname) if p)


def choose(sql: str, *, rewrites: bool, created: Sequence[str] = ()) -> list[Form] | NoForm:
    """The online steps of one statement over the budget. `rewrites`: plan saw it give the
    table a new file; `created`: the relations plan saw it create."""
    try:
        node = parse_one(sql)
    except (pglast.parser.ParseError, ValueError) as exc:
        return NoForm(f"PostgreSQL's parser does not read it as one statement ({exc})")
    if isinstance(node, ast.IndexStmt):
        return _index(node, created)
    if isinstance(node, ast.AlterTableStmt) and node.objtype == enums.ObjectType.OBJECT_TABLE:
        return _alter(node, rewrites, tuple(created))
    kind = type(node).__name__.removesuffix("Stmt")
    return NoForm(f"no online form for a {kind} statement")


def _index(node: ast.IndexStmt, created: Sequence[str]) -> list[Form] | NoForm:
    if node.concurrent:
        return NoForm("already CONCURRENTLY: it blocks no writer (waits for old snapshots)")
    if node.relation is None or node.relation.inh is False:
        return NoForm("CREATE INDEX … ON ONLY builds an invalid parent index: no online form")
    table = relation_name(node.relation)
    return [Form(CONCURRENT_INDEX, table, render(node), tuple(created), node.idxname)]


def _alter(
    node: ast.AlterTableStmt, rewrites: bool, created: tuple[str, ...]
) -> list[Form] | NoForm:
    if node.relation is None:
        return NoForm("ALTER TABLE without a table")
    table = relation_name(node.relation)
    if rewrites:
        return [Form(REBUILD, table, render(node), created)]
    cmds = list(node.cmds or ())
    forms: list[Form] = []
    for cmd in cmds:
        single = ast.AlterTableStmt(
            relation=node.relation, cmds=(cmd,), objtype=node.objtype, missing_ok=node.missing_ok
        )
        split = _column_references(node, cmd, table)
        if split:
            forms += split
            continue
        found = _subcommand(cmd, table, render(single), created)
        if isinstance(found, NoForm):
            if len(cmds) == 1:
                return found
            forms.append(Form(PLAIN, table, render(single)))
        else:
            forms.append(found)
    if all(f.kind == PLAIN for f in forms):
        what = _describe(cmds[0]) if len(cmds) == 1 else "any of its subcommands"
        return NoForm(f"no online form for {what}")
    return forms


def _subcommand(
    cmd: ast.AlterTableCmd, table: str, sql: str, created: tuple[str, ...]
) -> Form | NoForm:
    if cmd.subtype == _AT.AT_SetNotNull:
        return Form(NOT_NULL, table, sql, name=cmd.name)
    if cmd.subtype == _AT.AT_AddConstraint and isinstance(cmd.def_, ast.Constraint):
        con = cmd.def_
        if con.contype in (_CON.CONSTR_FOREIGN, _CON.CONSTR_CHECK):
            if con.skip_validation:
                return NoForm("already NOT VALID: it scans nothing")
            return Form(NOT_VALID, table, sql, name=con.conname)
        if con.contype in (_CON.CONSTR_PRIMARY, _CON.CONSTR_UNIQUE):
            if con.indexname:
                return NoForm("ADD CONSTRAINT … USING INDEX: the index exists already")
            if con.exclusions:
                return NoForm("an EXCLUDE constraint has no USING INDEX form")
            return Form(UNIQUE_INDEX, table, sql, created, con.conname)
    return NoForm(f"no online form for {_describe(cmd)}")


_ATTRIBUTES = {
    _CON.CONSTR_ATTR_DEFERRABLE: ("deferrable", True),
    _CON.CONSTR_ATTR_NOT_DEFERRABLE: ("deferrable", False),
    _CON.CONSTR_ATTR_DEFERRED: ("initdeferred", True),
    _CON.CONSTR_ATTR_IMMEDIATE: ("initdeferred", False),
}


def _column_references(
    node: ast.AlterTableStmt, cmd: ast.AlterTableCmd, table: str
) -> list[Form] | None:
    """`ADD COLUMN c … CONSTRAINT k REFERENCES t (id)` (Django's `AddField` of a ForeignKey):
    the column added without the key (brief), then the key as `ADD CONSTRAINT k FOREIGN KEY
    (c)` through NOT VALID and VALIDATE; inline, the key is checked against every row under
    ACCESS EXCLUSIVE. None: not such a subcommand, or one this cannot split as written — a
    key without a name (its name is asked of PostgreSQL before the column exists), `ADD
    COLUMN IF NOT EXISTS` (the key would be added to a column that was there), something
    beside the key that builds or scans (UNIQUE, CHECK)."""
    column = cmd.def_
    if cmd.subtype != _AT.AT_AddColumn or not isinstance(column, ast.ColumnDef):
        return None
    kept: list[ast.Constraint] = []
    keys: list[ast.Constraint] = []
    last: ast.Constraint | None = None  # an attribute (DEFERRABLE …) is the one before's
    for con in column.constraints or ():
        if con.contype in _ATTRIBUTES and last is not None and last in keys:
            attr, value = _ATTRIBUTES[con.contype]
            setattr(last, attr, value)
            if attr == "initdeferred" and value:  # INITIALLY DEFERRED implies DEFERRABLE
                last.deferrable = True
            continue
        if con.contype == _CON.CONSTR_FOREIGN:
            keys.append(con)
        else:
            kept.append(con)
        if con.contype not in _ATTRIBUTES:
            last = con
    cheap = {_CON.CONSTR_NULL, _CON.CONSTR_NOTNULL, _CON.CONSTR_DEFAULT}
    if (
        not keys
        or node.relation is None
        or cmd.missing_ok
        or any(not key.conname for key in keys)
        or any(c.contype not in cheap for c in kept)
    ):
        return None
    added = copy.copy(column)  # its type, collation, storage, compression as written
    added.constraints = tuple(kept) or None
    plain = ast.AlterTableStmt(
        relation=node.relation, objtype=node.objtype, missing_ok=node.missing_ok,
        cmds=(ast.AlterTableCmd(subtype=_AT.AT_AddColumn, def_=added, behavior=cmd.behavior),),
    )  # fmt: skip
    forms = [Form(PLAIN, table, render(plain))]
    for key in keys:
        key.fk_attrs = (ast.String(sval=column.colname),)
        key.initially_valid = True
        add = ast.AlterTableStmt(
            relation=node.relation, objtype=node.objtype, missing_ok=node.missing_ok,
            cmds=(ast.AlterTableCmd(subtype=_AT.AT_AddConstraint, def_=key),),
        )  # fmt: skip
        forms.append(Form(NOT_VALID, table, render(add), name=key.conname))
    return forms


def _describe(cmd: ast.AlterTableCmd) -> str:
    what = enums.AlterTableType(int(cmd.subtype or 0)).name.removeprefix("AT_")
    return f"ALTER TABLE … {what}"
