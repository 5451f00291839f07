"""The static compatibility matrix: released workers' statements × schema revisions.

For every legacy statement catalog (`fixtures/legacy_workers/*.sql`, see `upgrade.legacy`)
and every revision 001–004, each statement is resolved with sqlglot against the schema of a
database migrated to that revision (`catalog.introspect`), and classified:

- `unresolvable`: a table or column it names does not exist there — it fails at once;
- `fenced`: it resolves, but cannot take effect: the handshake refuses the worker's
  protocol (the `runtime_protocol` row of that database), the statement runs in a
  transaction whose handshake refuses, or it is a range-checked write and a migration since
  the worker's own revision bumped every `range_id` (found in the migration SQL);
- `runs`: it resolves and takes effect: reads, History writes (at-least-once: History
  rejects a repeated start), user data (its own compare-and-swap), or any write on a schema
  the worker still legitimately owns.

The safety property (`Matrix.violations`): on head, no statement of an older protocol that
writes Matching state (`task_queues`, `tasks`) runs, and every older handshake refuses; on
its own revision every statement of a worker resolves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sqlglot
from sqlglot import exp

from queueguard import revisions
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.revisions import MigrationSet
from queueguard.stores import schema
from queueguard.upgrade import catalog as catalog_mod
from queueguard.upgrade.legacy.catalog import StatementCatalog, all_catalogs
from queueguard.upgrade.runner import upgrade

Verdict = Literal["unresolvable", "fenced", "runs"]
MATCHING_TABLES = frozenset({"task_queues", "tasks"})
HISTORY_TABLES = frozenset({"executions", "scheduled_tasks"})
USER_DATA_TABLES = frozenset({"task_queue_user_data"})
PROTOCOL_TABLE = "runtime_protocol"
_QUERY = (exp.Select, exp.Insert, exp.Update, exp.Delete)
_DML = (exp.Insert, exp.Update, exp.Delete)


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """sqlglot logs a warning for each statement it keeps as a raw Command (LOCK, …)."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def parse(sql: str) -> exp.Expression:
    with _quiet_sqlglot():
        tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Expression):  # pragma: no cover - parse_one raises instead
        raise ValueError(f"not a statement: {sql[:60]!r}")
    return tree


# the schema of one revision -----------------------------------------------------------------
@dataclass(frozen=True)
class SchemaView:
    """What a statement can see at one revision: tables, columns, the protocol row."""

    revision: str
    columns: Mapping[str, frozenset[str]]
    #: the single runtime_protocol row, None when the table is missing or not exactly one row
    protocol: tuple[int, int] | None

    @classmethod
    def from_catalog(
        cls, revision: str, cat: catalog_mod.Catalog, protocol: tuple[int, int] | None
    ) -> SchemaView:
        return cls(revision, {t: frozenset(cols) for t, cols in cat.columns.items()}, protocol)


def schema_view(dsn: str) -> SchemaView:
    """Introspect the database at `dsn` (read-only): revision, columns, protocol row."""
    with connection(dsn, application_name="queueguard-compat") as conn:
        cat = catalog_mod.introspect(conn)
        state = schema.inspect(conn)
        protocol = None
        if PROTOCOL_TABLE in cat.tables:
            rows = conn.execute(f"SELECT min_protocol, max_protocol FROM {PROTOCOL_TABLE}")
            found = rows.fetchall()
            protocol = (int(found[0][0]), int(found[0][1])) if len(found) == 1 else None
        conn.rollback()
    return SchemaView.from_catalog(state.revision or "", cat, protocol)


# range bumps, read from the migrations themselves ------------------------------------------
def _bumps_every_range(node: object) -> bool:
    """`UPDATE task_queues SET range_id = range_id + k` (k > 0) without a WHERE clause."""
    if not isinstance(node, exp.Update) or node.args.get("where") is not None:
        return False
    if not isinstance(node.this, exp.Table) or node.this.name != "task_queues":
        return False
    for assignment in node.expressions:
        if not isinstance(assignment, exp.EQ) or assignment.this.name != "range_id":
            continue
        value = assignment.expression
        if (
            isinstance(value, exp.Add)
            and isinstance(value.this, exp.Column)
            and value.this.name == "range_id"
            and isinstance(value.expression, exp.Literal)
            and value.expression.is_int
            and int(value.expression.this) > 0
        ):
            return True
    return False


def range_bumps(sql_root: Path | None = None) -> dict[str, str]:
    """{revision: file} of the migrations that increment every queue's range_id."""
    root = sql_root or revisions.packaged().root / "sql"
    found: dict[str, str] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.sql")):
            with _quiet_sqlglot():
                statements = sqlglot.parse(path.read_text(encoding="utf-8"), read="postgres")
            if any(_bumps_every_range(s) for s in statements):
                found[folder.name] = path.name
    return found


# the shape of one statement (schema-independent) --------------------------------------------
def _target(node: exp.Expression) -> str:
    table = node.this
    if isinstance(table, exp.Schema):
        table = table.this
    return table.name if isinstance(table, exp.Table) else ""


def _cte_bodies(tree: exp.Expression) -> dict[str, exp.Expression]:
    return {cte.alias_or_name: cte.this for cte in tree.find_all(exp.CTE)}


def _has_range_predicate(node: exp.Expression) -> bool:
    where = node.args.get("where")
    if where is None:
        return False
    conjuncts: list[exp.Expression] = []
    stack = [where.this]
    while stack:
        item = stack.pop()
        if isinstance(item, exp.And):
            stack += [item.this, item.expression]
        else:
            conjuncts.append(item)
    for c in conjuncts:
        if isinstance(c, exp.EQ):
            sides = (c.this, c.expression)
            if any(isinstance(s, exp.Column) and s.name == "range_id" for s in sides) and any(
                isinstance(s, exp.Placeholder) for s in sides
            ):
                return True
    return False


def _driving_sources(node: exp.Expression) -> list[str]:
    """Relations whose rows a DML statement's effect is an inner join over."""
    names: list[str] = []
    if isinstance(node, exp.Insert) and isinstance(node.expression, exp.Select):
        source = node.expression.args.get("from_")
        if source is not None and isinstance(source.this, exp.Table):
            names.append(source.this.name)
    if isinstance(node, exp.Delete):
        names += [t.name for t in node.args.get("using") or [] if isinstance(t, exp.Table)]
    if isinstance(node, exp.Update):
        source = node.args.get("from_")
        if source is not None:
            names += [t.name for t in source.find_all(exp.Table)]
    return names


def _range_checked(node: exp.Expression, ctes: Mapping[str, exp.Expression]) -> bool:
    """A write that only takes effect when a `range_id = :held` predicate matched: directly,
    or as an inner join over a CTE that is itself range-checked."""
    if _has_range_predicate(node):
        return True
    return any(
        name in ctes and isinstance(ctes[name], _DML) and _range_checked(ctes[name], ctes)
        for name in _driving_sources(node)
    )


@dataclass(frozen=True)
class Shape:
    """Schema-independent facts about one statement."""

    writes: frozenset[str]
    #: Matching tables written without a range check
    unchecked_matching_writes: frozenset[str]
    reads_protocol: bool

    @property
    def writes_matching(self) -> bool:
        return bool(self.writes & MATCHING_TABLES)

    @property
    def role(self) -> str:
        if self.writes_matching:
            return "unchecked write" if self.unchecked_matching_writes else "range-checked write"
        if self.writes & HISTORY_TABLES:
            return "History write"
        if self.writes & USER_DATA_TABLES:
            return "user data (CAS)"
        if self.writes:
            return "write"
        return "handshake" if self.reads_protocol else "read"


def shape(sql: str) -> Shape:
    tree = parse(sql)
    ctes = _cte_bodies(tree)
    writes: set[str] = set()
    unchecked: set[str] = set()
    for node in tree.find_all(*_DML):
        table = _target(node)
        writes.add(table)
        if table in MATCHING_TABLES and not _range_checked(node, ctes):
            unchecked.add(table)
    reads = {t.name for t in tree.find_all(exp.Table)}
    return Shape(frozenset(writes), frozenset(unchecked), PROTOCOL_TABLE in reads)


# resolving names against a schema -------------------------------------------------------------
@dataclass
class _Scope:
    #: alias -> ("table", real name) | ("cte", cte name)
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    output_aliases: set[str] = field(default_factory=set)


def _add_source(scope: _Scope, node: exp.Expression | None, ctes: Mapping[str, Any]) -> None:
    if isinstance(node, exp.Schema):
        node = node.this
    if isinstance(node, exp.Table):
        kind = "cte" if node.name in ctes and not node.db else "table"
        scope.sources[node.alias_or_name] = (kind, node.name)
        scope.sources.setdefault(node.name, (kind, node.name))
    elif isinstance(node, exp.Subquery | exp.Lateral | exp.Unnest):
        scope.sources[node.alias_or_name] = ("derived", node.alias_or_name)


def _scope_of(node: exp.Expression, ctes: Mapping[str, Any]) -> _Scope:
    scope = _Scope()
    if isinstance(node, exp.Select):
        source = node.args.get("from_")
        _add_source(scope, source.this if source else None, ctes)
        for join in node.args.get("joins") or []:
            _add_source(scope, join.this, ctes)
        scope.output_aliases = {e.alias for e in node.expressions if isinstance(e, exp.Alias)}
    elif isinstance(node, exp.Insert):
        _add_source(scope, node.this, ctes)
        target = _target(node)
        scope.sources["excluded"] = ("table", target)
    elif isinstance(node, exp.Update):
        _add_source(scope, node.this, ctes)
        source = node.args.get("from_")
        if source is not None:
            for table in source.find_all(exp.Table):
                _add_source(scope, table, ctes)
    elif isinstance(node, exp.Delete):
        _add_source(scope, node.this, ctes)
        for table in node.args.get("using") or []:
            _add_source(scope, table, ctes)
    return scope


def _enclosing_queries(node: exp.Expression) -> list[exp.Expression]:
    found: list[exp.Expression] = []
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _QUERY):
            found.append(parent)
        parent = parent.parent
    return found


def _cte_outputs(body: exp.Expression) -> frozenset[str] | None:
    """Column names a CTE exposes (None: unknown, e.g. `*`)."""
    if isinstance(body, exp.Select):
        items = body.expressions
    else:
        returning = body.args.get("returning")
        items = returning.expressions if returning is not None else []
    names = set()
    for item in items:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star):
            return None
        names.add(item.alias_or_name)
    return frozenset(names)


def unresolved(sql: str, columns: Mapping[str, frozenset[str]]) -> list[str]:
    """The tables and columns `sql` names that the schema `columns` lacks."""
    tree = parse(sql)
    ctes = _cte_bodies(tree)
    missing: list[str] = []

    def note(item: str) -> None:
        if item not in missing:
            missing.append(item)

    for table in tree.find_all(exp.Table):
        if table.find_ancestor(exp.Lock) is not None:
            continue  # FOR UPDATE OF <alias>
        if table.name not in ctes and table.name not in columns:
            note(f"table {table.name}")

    def has_column(kind: str, name: str, column: str) -> bool:
        if kind == "table":
            return name not in columns or column in columns[name]  # missing table noted once
        if kind == "cte":
            outputs = _cte_outputs(ctes[name])
            return outputs is None or column in outputs
        return True  # derived relation: its columns are its own business

    for insert in tree.find_all(exp.Insert):
        if isinstance(insert.this, exp.Schema):
            target = _target(insert)
            for ident in insert.this.expressions:
                if not has_column("table", target, ident.name):
                    note(f"column {target}.{ident.name}")

    for join in tree.find_all(exp.Join):
        joined = join.this
        if isinstance(joined, exp.Table):
            for ident in join.args.get("using") or []:
                if not has_column("table", joined.name, ident.name):
                    note(f"column {joined.name}.{ident.name}")

    scopes: dict[int, _Scope] = {}
    for column in tree.find_all(exp.Column):
        if column.is_star:
            continue
        chain = [scopes.setdefault(id(q), _scope_of(q, ctes)) for q in _enclosing_queries(column)]
        qualifier = column.table
        if qualifier:
            source = next((s.sources[qualifier] for s in chain if qualifier in s.sources), None)
            if source is None:
                note(f"relation {qualifier}")
            elif not has_column(source[0], source[1], column.name):
                note(f"column {source[1]}.{column.name}")
            continue
        candidates = [src for s in chain for src in s.sources.values()]
        if any(column.name in s.output_aliases for s in chain[:1]):
            continue
        if not any(has_column(kind, name, column.name) for kind, name in candidates):
            tables = sorted({name for kind, name in candidates if kind == "table"})
            note(f"column {'/'.join(tables) or '?'}.{column.name}")
    return missing


# classification ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    worker: str
    statement: str
    revision: str
    verdict: Verdict
    reason: str

    def as_json(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Row:
    worker: str
    protocol: int | None
    own_revision: str
    statement: str
    role: str
    writes: tuple[str, ...]
    requires: tuple[str, ...]


def _handshake(protocol: int, view: SchemaView) -> tuple[Verdict, str]:
    if view.protocol is None:
        return "fenced", f"refuses protocol {protocol}: no single runtime_protocol row"
    low, high = view.protocol
    if low <= protocol <= high:
        return "runs", f"accepts protocol {protocol} in [{low}, {high}]"
    return "fenced", f"refuses protocol {protocol}: schema accepts [{low}, {high}]"


def classify(cat: StatementCatalog, name: str, view: SchemaView, bumps: Mapping[str, str]) -> Cell:
    """One statement of one legacy worker against one revision's schema."""
    statement = cat[name]

    def cell(verdict: Verdict, reason: str) -> Cell:
        return Cell(cat.worker, name, view.revision, verdict, reason)

    missing = unresolved(statement.sql, view.columns)
    if missing:
        return cell("unresolvable", "missing " + ", ".join(missing))
    facts = shape(statement.sql)
    if facts.reads_protocol and not facts.writes and cat.protocol is not None:
        return cell(*_handshake(cat.protocol, view))
    for required in statement.requires:
        before = classify(cat, required, view, bumps)
        if before.verdict != "runs":
            return cell("fenced", f"its transaction's {required} {before.verdict}: {before.reason}")
    if facts.writes_matching:
        if facts.unchecked_matching_writes:
            if statement.requires:
                return cell("runs", f"after {', '.join(statement.requires)} in its transaction")
            tables = ", ".join(sorted(facts.unchecked_matching_writes))
            return cell("runs", f"UNFENCED write to {tables}")
        bumped = [
            f"{r} ({f})" for r, f in sorted(bumps.items()) if cat.revision < r <= view.revision
        ]
        if bumped:
            return cell("fenced", f"range-checked; {', '.join(bumped)} bumped every range_id")
        return cell("runs", "range-checked; the loaded range still holds")
    if facts.writes & HISTORY_TABLES:
        return cell("runs", "History write: at-least-once, a repeated start is rejected")
    if facts.writes & USER_DATA_TABLES:
        return cell("runs", "user data: its own compare-and-swap, not range-fenced")
    return cell("runs", "read" if not facts.writes else "write")


@dataclass
class Matrix:
    revisions: list[str]
    rows: list[Row]
    cells: dict[tuple[str, str, str], Cell]
    head: str
    head_protocol: int

    def cell(self, worker: str, statement: str, revision: str) -> Cell:
        return self.cells[(worker, statement, revision)]

    def violations(self) -> list[str]:
        """Breaches of the safety property (empty: no old worker can strand or corrupt work)."""
        found = []
        for worker, protocol in sorted({(r.worker, r.protocol) for r in self.rows}, key=str):
            roles = {r.role for r in self.rows if r.worker == worker}
            if protocol is not None and protocol < self.head_protocol and "handshake" not in roles:
                found.append(f"{worker} speaks protocol {protocol} but has no handshake")
        for row in self.rows:
            if row.protocol is not None and row.protocol >= self.head_protocol:
                continue  # not an older protocol
            if row.own_revision in self.revisions:
                own = self.cell(row.worker, row.statement, row.own_revision)
                if own.verdict == "unresolvable":
                    found.append(
                        f"{row.worker} {row.statement} does not resolve on its own "
                        f"revision {row.own_revision}: {own.reason}"
                    )
            if self.head not in self.revisions:
                continue
            at_head = self.cell(row.worker, row.statement, self.head)
            if row.role == "handshake" and at_head.verdict != "fenced":
                found.append(f"{row.worker} handshake is not refused on {self.head}")
            if row.writes and set(row.writes) & MATCHING_TABLES and at_head.verdict == "runs":
                found.append(
                    f"{row.worker} {row.statement} writes Matching state on {self.head}: "
                    f"{at_head.reason}"
                )
        return found

    def as_json(self) -> dict[str, Any]:
        return {
            "revisions": self.revisions,
            "head": self.head,
            "safe": not self.violations(),
            "violations": self.violations(),
            "statements": [
                {
                    "worker": row.worker,
                    "statement": row.statement,
                    "role": row.role,
                    "writes": list(row.writes),
                    "cells": {
                        r: {
                            "verdict": self.cell(row.worker, row.statement, r).verdict,
                            "reason": self.cell(row.worker, row.statement, r).reason,
                        }
                        for r in self.revisions
                    },
                }
                for row in self.rows
            ],
        }

    def render(self) -> str:
        width = max([len("statement"), *(len(r.statement) for r in self.rows)])
        role_w = max([len("role"), *(len(r.role) for r in self.rows)])
        header = (
            f"{'worker':6} {'statement':{width}} {'role':{role_w}} "
            + " ".join(f"{r:12}" for r in self.revisions)
        ).rstrip()
        lines = [
            "compatibility of released workers with each schema revision "
            "(sqlglot against the introspected schema)",
            header,
            "-" * len(header),
        ]
        for row in self.rows:
            cells = " ".join(
                f"{self.cell(row.worker, row.statement, r).verdict:12}" for r in self.revisions
            )
            lines.append(
                f"{row.worker:6} {row.statement:{width}} {row.role:{role_w}} {cells}".rstrip()
            )
        if self.head in self.revisions:
            lines.append(f"\non {self.head}:")
            for row in self.rows:
                at_head = self.cell(row.worker, row.statement, self.head)
                if at_head.verdict != "unresolvable":
                    lines.append(
                        f"  {row.worker} {row.statement}: {at_head.verdict}, {at_head.reason}"
                    )
        problems = self.violations()
        lines.append(
            "\nno released worker can write Matching state on head"
            if not problems
            else "\nCOMPATIBILITY VIOLATIONS:\n  " + "\n  ".join(problems)
        )
        return "\n".join(lines)


def build_matrix(
    views: Iterable[SchemaView],
    catalogs: Iterable[StatementCatalog] | None = None,
    bumps: Mapping[str, str] | None = None,
    migrations: MigrationSet | None = None,
) -> Matrix:
    migrations = migrations or revisions.packaged()
    views = sorted(views, key=lambda v: v.revision)
    catalogs = list(catalogs) if catalogs is not None else all_catalogs()
    bumps = range_bumps(migrations.root / "sql") if bumps is None else bumps
    rows, cells = [], {}
    for cat in catalogs:
        for name, statement in cat.statements.items():
            facts = shape(statement.sql)
            rows.append(
                Row(
                    cat.worker,
                    cat.protocol,
                    cat.revision,
                    name,
                    "write after " + "+".join(statement.requires)
                    if statement.requires and facts.unchecked_matching_writes
                    else facts.role,
                    tuple(sorted(facts.writes)),
                    statement.requires,
                )
            )
            for view in views:
                cells[(cat.worker, name, view.revision)] = classify(cat, name, view, bumps)
    head = migrations.head
    return Matrix([v.revision for v in views], rows, cells, head.id, head.protocol or 0)


def matrix_on_server(
    admin_dsn: str,
    databases: ScratchDatabases | None = None,
    migrations: MigrationSet | None = None,
) -> Matrix:
    """Migrate one scratch database per revision on the server, introspect, build, drop."""
    migrations = migrations or revisions.packaged()
    views = []
    with ScratchDatabases(admin_dsn) as own:
        for revision in migrations.ids:
            dsn = (databases or own).create()
            upgrade(dsn, to=revision, progress=False, migrations=migrations)
            views.append(schema_view(dsn))
            (databases or own).drop(dsn)
    return build_matrix(views, migrations=migrations)
