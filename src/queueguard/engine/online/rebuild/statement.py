"""The statement a rebuild applies (pure, from PostgreSQL's parse tree): which subcommands
it can apply to an empty shadow exactly as the plain statement applies them to the table,
what each TYPE change's copy selects (its USING expression), and the statement re-aimed at
the shadow."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pglast import ast, enums

from queueguard.engine.online.choose import nodes, parse_one, render
from queueguard.engine.online.names import quote
from queueguard.engine.online.rebuild.text import name_end

_AT = enums.AlterTableType
_CON = enums.ConstrType

#: subcommands that act on the table's own columns and options, which the shadow has from
#: its first transaction on (its indexes, foreign keys, triggers and policies come later)
_APPLICABLE = frozenset(
    {
        _AT.AT_AddColumn,
        _AT.AT_DropColumn,
        _AT.AT_AlterColumnType,
        _AT.AT_ColumnDefault,
        _AT.AT_DropNotNull,
        _AT.AT_SetNotNull,
        _AT.AT_SetExpression,
        _AT.AT_DropExpression,
        _AT.AT_SetStatistics,
        _AT.AT_SetOptions,
        _AT.AT_ResetOptions,
        _AT.AT_SetStorage,
        _AT.AT_SetCompression,
        _AT.AT_AddConstraint,
        _AT.AT_DropConstraint,
        _AT.AT_AddIdentity,
        _AT.AT_SetIdentity,
        _AT.AT_DropIdentity,
        _AT.AT_SetTableSpace,
        _AT.AT_SetLogged,
        _AT.AT_SetUnLogged,
        _AT.AT_SetAccessMethod,
        _AT.AT_SetRelOptions,
        _AT.AT_ResetRelOptions,
        _AT.AT_ChangeOwner,
    }
)


@dataclass(frozen=True)
class Statement:
    node: ast.AlterTableStmt
    sql: str

    @property
    def commands(self) -> list[ast.AlterTableCmd]:
        return list(self.node.cmds or ())

    def using(self) -> dict[str, str]:
        """{column: USING expression} of its TYPE changes that give one."""
        found: dict[str, str] = {}
        for cmd in self.commands:
            if (
                cmd.subtype == _AT.AT_AlterColumnType
                and isinstance(cmd.def_, ast.ColumnDef)
                and cmd.def_.raw_default is not None
            ):
                found[str(cmd.name)] = render(cmd.def_.raw_default)
        return found

    def dropped_columns(self) -> set[str]:
        return {str(c.name) for c in self.commands if c.subtype == _AT.AT_DropColumn}

    def at(self, shadow: str) -> str:
        """The statement as written, its table replaced by `shadow`."""
        rel = self.node.relation
        assert rel is not None and rel.location is not None
        start = rel.location
        return self.sql[:start] + shadow + self.sql[name_end(self.sql, start) :]


def parse(sql: str) -> Statement:
    node = parse_one(sql)
    if not isinstance(node, ast.AlterTableStmt) or node.objtype != enums.ObjectType.OBJECT_TABLE:
        raise ValueError(f"a rebuild applies an ALTER TABLE, not: {sql[:80]}")
    return Statement(node, sql)


def refusals(
    statement: Statement, key: tuple[str, ...], constraint_kinds: Mapping[str, str]
) -> list[str]:
    """Why the statement cannot be applied to the shadow as the plain statement applies it to
    the table (empty: it can). `constraint_kinds`: {name: contype} of the table's."""
    found: list[str] = []
    using = statement.using()
    for cmd in statement.commands:
        what = subcommand(cmd)
        if cmd.subtype not in _APPLICABLE:
            found.append(f"the statement's {what} (the shadow gets that object only at the swap)")
            continue
        if cmd.behavior == enums.DropBehavior.DROP_CASCADE:
            found.append(f"the statement's {what} … CASCADE (it would drop other objects)")
        if _adds_unique_constraint(cmd):
            found.append(
                "the statement adds a PRIMARY KEY, UNIQUE or EXCLUDE constraint on the table's "
                "rows (its index would check the shadow while the fill copies rows a writer "
                "moves; add it online after the rebuild, through a concurrent index)"
            )
        if _adds_foreign_key(cmd):
            found.append(
                "the statement adds a foreign key (run it after the rebuild: NOT VALID, then "
                "VALIDATE)"
            )
        if cmd.subtype == _AT.AT_DropConstraint and cmd.name is not None:
            kind = constraint_kinds.get(str(cmd.name))
            if kind not in (None, "c", "n"):
                found.append(
                    f"the statement drops constraint {quote(str(cmd.name))}, which the shadow "
                    "gets only after its fill"
                )
        if cmd.subtype == _AT.AT_DropColumn and str(cmd.name) in key:
            found.append(f"the statement drops column {quote(str(cmd.name))} of the replay key")
    for column, expression in using.items():
        if column in key and not _reads_only(expression, key):
            found.append(
                f"the TYPE change of key column {quote(column)} reads other columns in USING "
                "(the replay finds a row by its key alone)"
            )
    return found


def subcommand(cmd: ast.AlterTableCmd) -> str:
    """The subcommand's kind as PostgreSQL names it, `AT_` left off (`AlterColumnType`)."""
    return enums.AlterTableType(int(cmd.subtype or 0)).name.removeprefix("AT_")


def _adds_unique_constraint(cmd: ast.AlterTableCmd) -> bool:
    """ADD CONSTRAINT … PRIMARY KEY | UNIQUE | EXCLUDE (UNIQUE written in an ADD COLUMN is
    fine: the copy leaves a new column to its default)."""
    return isinstance(cmd.def_, ast.Constraint) and cmd.def_.contype in (
        _CON.CONSTR_PRIMARY,
        _CON.CONSTR_UNIQUE,
        _CON.CONSTR_EXCLUSION,
    )


def _adds_foreign_key(cmd: ast.AlterTableCmd) -> bool:
    if isinstance(cmd.def_, ast.Constraint):
        return cmd.def_.contype == _CON.CONSTR_FOREIGN
    if isinstance(cmd.def_, ast.ColumnDef):
        return any(
            isinstance(c, ast.Constraint) and c.contype == _CON.CONSTR_FOREIGN
            for c in cmd.def_.constraints or ()
        )
    return False


def _reads_only(expression: str, columns: tuple[str, ...]) -> bool:
    """Whether the expression's column references are all among `columns`."""
    refs = [n for n in nodes(parse_one(f"SELECT {expression}")) if isinstance(n, ast.ColumnRef)]
    fields = ([f for f in r.fields or () if isinstance(f, ast.String)] for r in refs)
    return {str(found[-1].sval) for found in fields if found} <= set(columns)
