"""What a SQL statement does, read with sqlglot without a database: the tables it writes,
whether its Matching writes are range-checked, the names it needs from a schema, and which
migrations bump every queue's range_id. The compatibility matrix (`compat`) classifies
released workers' statements with these facts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from queueguard import revisions

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
