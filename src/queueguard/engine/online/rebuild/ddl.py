"""The table's DDL as `pg_dump --schema-only --table` writes it, split into the three moments
the rebuild runs it: on the shadow before the statement (the table: columns, defaults,
identity, storage, statistics targets, owner, comments, grants), on the shadow after its
fill (indexes and the constraints they back, CLUSTER ON, REPLICA IDENTITY USING INDEX), and
in the swap after the move, as dumped (foreign keys, triggers with their enabled state,
policies, row security, comments on those). pg_dump is the authority on how to recreate a
table exactly; what it leaves out of a one-table dump (publication rows, extended
statistics, other tables' foreign keys, views) the swap reads from the catalog.

The shadow's statements are pg_dump's text with the table's schema replaced by the shadow
schema wherever it qualifies the table, one of its indexes or identity sequences."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pglast
import psycopg
from pglast import ast, enums

from queueguard.engine.dumps import normalise_dump
from queueguard.engine.online.rebuild.catalog import SHADOW_SCHEMA, Table
from queueguard.engine.online.rebuild.placeholders import with_placeholders
from queueguard.engine.online.rebuild.statement import subcommand
from queueguard.engine.online.rebuild.text import retarget
from queueguard.errors import MigrationError
from queueguard.pg import tools
from queueguard.pg.dsn import redact

TABLE, INDEXES, SWAP = "table", "indexes", "swap"
_AT = enums.AlterTableType
_CON = enums.ConstrType
_OBJ = enums.ObjectType
_TABLE_COMMANDS = frozenset(
    {
        _AT.AT_SetStatistics,
        _AT.AT_SetOptions,
        _AT.AT_ResetOptions,
        _AT.AT_SetStorage,
        _AT.AT_SetCompression,
        _AT.AT_ColumnDefault,
        _AT.AT_AddIdentity,
        _AT.AT_SetIdentity,
        _AT.AT_ChangeOwner,
        _AT.AT_SetNotNull,
        _AT.AT_SetRelOptions,
    }
)
_SWAP_COMMANDS = frozenset(
    {
        _AT.AT_EnableTrig,
        _AT.AT_EnableAlwaysTrig,
        _AT.AT_EnableReplicaTrig,
        _AT.AT_DisableTrig,
        _AT.AT_EnableRowSecurity,
        _AT.AT_ForceRowSecurity,
    }
)
#: the session settings pg_dump sets that decide where and how a relation is created
_PLACEMENT = ("default_tablespace", "default_table_access_method")


@dataclass(frozen=True)
class Step:
    """One statement of the dump: as dumped (the swap runs it so, after the move) and aimed
    at the shadow; the object it needs still there after the statement, as (kind, name)."""

    phase: str
    dumped: str
    shadow: str
    settings: tuple[str, ...] = ()
    needs: tuple[str, str] | None = None
    #: a foreign key's columns (its survival is read off them: the probe adds no foreign key,
    #: which would lock the referenced table)
    fk_columns: tuple[str, ...] | None = None
    #: a valid foreign key: added NOT VALID in the swap, validated after it
    validate: bool = False
    #: SET SESSION AUTHORIZATION's role (pg_dump grants as the grantor), "" for its RESET
    authorization: str | None = None


class Moment(NamedTuple):
    phase: str
    needs: tuple[str, str] | None = None
    fk_columns: tuple[str, ...] | None = None
    validate: bool = False


@dataclass
class Ddl:
    steps: list[Step] = field(default_factory=list)

    def phase(self, name: str, survivors: set[tuple[str, str]] | None = None) -> list[Step]:
        return [
            s
            for s in self.steps
            if s.phase == name and (survivors is None or s.needs is None or s.needs in survivors)
        ]


def dump(conn: psycopg.Connection[Any], table: Table, lock_wait_ms: int) -> str:
    """`pg_dump --schema-only` of the one table, on the connection's server and database."""
    params = conn.info.get_parameters()
    if conn.info.password:
        params["password"] = conn.info.password
    dsn = " ".join(f"{k}='{_conninfo_escape(v)}'" for k, v in params.items())
    pattern = f"{_pattern(table.schema)}.{_pattern(table.name)}"
    done = tools.run(
        "pg_dump",
        dsn,
        ["--schema-only", f"--table={pattern}", "--strict-names",
         f"--lock-wait-timeout={lock_wait_ms}"],
    )  # fmt: skip
    if done.returncode != 0:
        raise MigrationError(
            f"rebuild: pg_dump --schema-only of {table.qualified} failed: "
            f"{redact(done.stderr.decode(errors='replace'))[-500:]}"
        )
    return normalise_dump(done.stdout.decode())


def _conninfo_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _pattern(name: str) -> str:
    """A pg_dump pattern matching exactly `name` (inside double quotes nothing is a wildcard)."""
    return '"' + name.replace('"', '""') + '"'


def split(script: str, table: Table) -> Ddl:
    """The dump's statements, each given its moment."""
    ddl = Ddl()
    settings: dict[str, str] = {}
    #: where each constraint's ADD is (inline in CREATE TABLE: the table's moment)
    constraint_phase: dict[str, str] = {}
    moving = {table.name, *table.moving}
    serials = {s.name for s in table.serials}
    created = False
    for raw in pglast.parse_sql(script):
        node = raw.stmt
        start = raw.stmt_location or 0
        # a length of 0 is PostgreSQL's "to the end of the string"
        end = start + raw.stmt_len if raw.stmt_len else len(script)
        text = script[start:end]
        if isinstance(node, ast.VariableSetStmt) and node.name in _PLACEMENT:
            settings[str(node.name)] = _set_local(node)
            continue
        found = _classify(node, table, serials, constraint_phase)
        if found is None:
            continue
        if found.needs and found.needs[0] == "constraint":
            constraint_phase.setdefault(found.needs[1], found.phase)
        if isinstance(node, ast.CreateStmt):
            text = with_placeholders(text, start, node, table)
            created = True
        shadow = retarget(text, table.schema, moving, SHADOW_SCHEMA)
        ddl.steps.append(
            Step(found.phase, text, shadow, tuple(settings.values()), found.needs,
                 found.fk_columns, found.validate, _authorization(node))
        )  # fmt: skip
    if not created:
        raise MigrationError(f"rebuild: pg_dump wrote no CREATE TABLE for {table.qualified}")
    return ddl


def _authorization(node: ast.Node | None) -> str | None:
    if not isinstance(node, ast.VariableSetStmt) or node.name != "session_authorization":
        return None
    return _value(node) if node.kind == enums.VariableSetKind.VAR_SET_VALUE else ""


def _value(node: ast.VariableSetStmt) -> str:
    value = ""
    for arg in node.args or ():
        if isinstance(arg, ast.A_Const) and arg.val is not None:
            value = str(getattr(arg.val, "sval", ""))
    return value


def _set_local(node: ast.VariableSetStmt) -> str:
    """pg_dump's session SET as a SET LOCAL (it must not outlive the step's transaction)."""
    value = _value(node)
    return f"SET LOCAL {node.name} = '{value.replace(chr(39), chr(39) * 2)}'"


def _classify(
    node: ast.Node | None, table: Table, serials: set[str], constraint_phase: dict[str, str]
) -> Moment | None:
    """When the statement runs, or None for one the rebuild leaves alone (session settings,
    the serial sequences, which live on)."""
    if isinstance(node, ast.VariableSetStmt):
        return Moment(TABLE) if node.name == "session_authorization" else None
    if isinstance(node, ast.SelectStmt):  # set_config('search_path', …)
        return None
    if isinstance(node, ast.CreateStmt) and _is(node.relation, table):
        return Moment(TABLE)
    if isinstance(node, ast.CreateSeqStmt | ast.AlterSeqStmt):
        if node.sequence is not None and node.sequence.relname in serials:
            return None
    elif isinstance(node, ast.AlterTableStmt):
        return _alter(node, table, serials)
    elif isinstance(node, ast.IndexStmt) and _is(node.relation, table):
        return Moment(INDEXES, ("index", str(node.idxname)))
    elif isinstance(node, ast.CreateTrigStmt):
        return Moment(SWAP, ("trigger", str(node.trigname)))
    elif isinstance(node, ast.CreatePolicyStmt):
        return Moment(SWAP, ("policy", str(node.policy_name)))
    elif isinstance(node, ast.CommentStmt | ast.SecLabelStmt):
        return _comment(node, serials, constraint_phase)
    elif isinstance(node, ast.GrantStmt):
        names = [getattr(o, "relname", None) for o in node.objects or ()]
        if node.objtype == _OBJ.OBJECT_SEQUENCE and set(names) <= serials:
            return None
        if node.objtype in (_OBJ.OBJECT_TABLE, _OBJ.OBJECT_SEQUENCE):
            return Moment(TABLE)
    kind = type(node).__name__.removesuffix("Stmt")
    raise MigrationError(f"rebuild: the table's dump holds a {kind} statement it cannot carry")


def _alter(node: ast.AlterTableStmt, table: Table, serials: set[str]) -> Moment | None:
    rel = node.relation
    if rel is None:
        raise MigrationError("rebuild: a dumped ALTER names no relation")
    if node.objtype == _OBJ.OBJECT_SEQUENCE:
        return None if rel.relname in serials else Moment(TABLE)
    if node.objtype == _OBJ.OBJECT_INDEX:
        return Moment(INDEXES, ("index", str(rel.relname)))
    if not _is(rel, table):
        raise MigrationError(f"rebuild: the table's dump alters another table ({rel.relname})")
    found: set[Moment] = set()
    for cmd in node.cmds or ():
        found.add(_command(cmd))
    if len(found) != 1:
        raise MigrationError("rebuild: a dumped ALTER TABLE mixes moments")
    return found.pop()


def _command(cmd: ast.AlterTableCmd) -> Moment:
    if cmd.subtype in _TABLE_COMMANDS:
        return Moment(TABLE)
    if cmd.subtype in _SWAP_COMMANDS:
        needs = ("trigger", str(cmd.name)) if cmd.name else None
        return Moment(SWAP, needs)
    if cmd.subtype == _AT.AT_ClusterOn:
        return Moment(INDEXES, ("index", str(cmd.name)))
    if cmd.subtype == _AT.AT_ReplicaIdentity and isinstance(cmd.def_, ast.ReplicaIdentityStmt):
        if cmd.def_.identity_type == "i":
            return Moment(INDEXES, ("index", str(cmd.def_.name)))
        return Moment(TABLE)
    if cmd.subtype == _AT.AT_AddConstraint and isinstance(cmd.def_, ast.Constraint):
        con = cmd.def_
        needs = ("constraint", str(con.conname))
        if con.contype in (_CON.CONSTR_PRIMARY, _CON.CONSTR_UNIQUE, _CON.CONSTR_EXCLUSION):
            return Moment(INDEXES, needs)
        if con.contype == _CON.CONSTR_FOREIGN:
            columns = tuple(str(c.sval) for c in con.fk_attrs or ())
            valid = not con.skip_validation and con.is_enforced is not False
            return Moment(SWAP, needs, columns, valid)
        # a CHECK or NOT NULL dumped apart from its table: NOT VALID waits for the swap
        # (live rows may break it); a valid one is there before the fill, as inline ones are
        return Moment(SWAP if con.skip_validation else TABLE, needs)
    raise MigrationError(f"rebuild: the table's dump holds ALTER TABLE … {subcommand(cmd)}")


def _comment(
    node: ast.CommentStmt | ast.SecLabelStmt, serials: set[str], constraint_phase: dict[str, str]
) -> Moment | None:
    parts = [str(getattr(p, "sval", "")) for p in _strings(node.object)]
    objtype = node.objtype
    if objtype in (_OBJ.OBJECT_TABLE, _OBJ.OBJECT_COLUMN):
        return Moment(TABLE)
    if objtype == _OBJ.OBJECT_SEQUENCE:
        return None if parts[-1] in serials else Moment(TABLE)
    if objtype == _OBJ.OBJECT_INDEX:
        return Moment(INDEXES, ("index", parts[-1]))
    if objtype == _OBJ.OBJECT_TABCONSTRAINT:
        name = parts[-1]
        return Moment(constraint_phase.get(name, TABLE), ("constraint", name))
    if objtype == _OBJ.OBJECT_TRIGGER:
        return Moment(SWAP, ("trigger", parts[-1]))
    if objtype == _OBJ.OBJECT_POLICY:
        return Moment(SWAP, ("policy", parts[-1]))
    what = objtype.name if objtype is not None else "?"
    raise MigrationError(f"rebuild: the table's dump comments on a {what}")


def _strings(obj: object) -> Iterable[object]:
    if isinstance(obj, tuple | list):
        return obj
    return (obj,)


def _is(rel: ast.RangeVar | None, table: Table) -> bool:
    return rel is not None and rel.relname == table.name and rel.schemaname == table.schema
