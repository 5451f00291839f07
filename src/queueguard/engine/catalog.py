"""A database's schema as a normalised, comparable value, and a readable diff of two of them.

Used to prove that a fresh install and an upgraded database hold the same schema, and that
each released revision reproduces docs/schema-history.md. Everything is read from the system
catalogs of one schema (`public` by default; the queries: sql/catalog.sql), read-only, and
normalised so that only what a user could observe counts:

- tables (kind, persistence) and their columns: type including a non-default collation,
  nullability, default expression, identity/generated kind; column order is ignored;
- constraints compared by definition (`pg_get_constraintdef`), never by name;
- indexes by `pg_get_indexdef` with the index name removed;
- triggers by `pg_get_triggerdef` with the trigger name removed (internal triggers skipped);
- functions and procedures by signature and full definition (extension members skipped);
- sequences keyed by the column that owns them (else their name), with their parameters;
- views by definition, and enum / domain types.

Column order is read too (`Catalog.column_order`) but is not part of the schema's identity:
it is left out of `==`, `diff`, `document` and `fingerprint`, and `notes` reports it.
`differences` is `diff` with one line per object naming both sides (for reports comparing
two named databases), and `without` leaves tables out (another tool's bookkeeping).

Row contents are never read here, so the version tables (`queueguard_version`,
`queueguard_migrations`) count by structure only. `contents()` is the separate, explicit
reader of row contents, for tests that compare data.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries

Conn = psycopg.Connection[TupleRow]

#: one query per section of the catalog, each for the schema %(schema)s
Q = queries("queueguard.engine", "catalog.sql")

_INDEX_NAME = re.compile(r'^(CREATE (?:UNIQUE )?INDEX )(?:"(?:[^"]|"")*"|\S+) (ON )')
_TRIGGER_NAME = re.compile(r'^(CREATE (?:CONSTRAINT )?TRIGGER )(?:"(?:[^"]|"")*"|\S+) ')


@dataclass(frozen=True, order=True)
class Column:
    """One column as a user sees it (its position in the table is deliberately ignored)."""

    type: str
    nullable: bool
    default: str | None = None
    identity: str = ""  # '', 'a' (ALWAYS) or 'd' (BY DEFAULT)
    generated: str = ""  # '' or 's' (STORED)

    def __str__(self) -> str:
        text = self.type + ("" if self.nullable else " NOT NULL")
        if self.default is not None:
            text += f" DEFAULT {self.default}"
        if self.identity:
            text += f" IDENTITY({self.identity})"
        if self.generated:
            text += f" GENERATED({self.generated})"
        return text


@dataclass(frozen=True)
class Catalog:
    """The normalised schema: every field compares by value, so `a == b` means same schema."""

    tables: dict[str, str]
    columns: dict[str, dict[str, Column]]
    constraints: dict[str, frozenset[str]]
    indexes: dict[str, frozenset[str]]
    triggers: dict[str, frozenset[str]]
    functions: dict[str, str]
    sequences: dict[str, str]
    views: dict[str, str]
    types: dict[str, str]
    #: each table's (and view's) columns in their order; not compared (see the module doc)
    column_order: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def checks(self, table: str) -> frozenset[str]:
        """The CHECK constraint definitions of one table."""
        return frozenset(c for c in self.constraints.get(table, ()) if c.startswith("CHECK "))


def introspect(target: str | Conn, schema: str = "public") -> Catalog:
    """Read the catalog of `schema` from a DSN or an open connection (read-only).

    On a caller's connection the queries run in its current transaction, left open.
    """
    if isinstance(target, str):
        with connection(target, application_name="queueguard-catalog") as conn:
            return _introspect(conn, schema)
    return _introspect(target, schema)


def _rows(conn: Conn, section: str, schema: str) -> list[tuple[Any, ...]]:
    return list(conn.execute(Q[section], {"schema": schema}).fetchall())


_KINDS = {"r": "table", "p": "partitioned table", "f": "foreign table", "m": "materialized view"}
_PERSISTENCE = {"p": "", "u": "unlogged ", "t": "temporary "}


#: Spellings PostgreSQL stores differently for one and the same default: CURRENT_TIMESTAMP is
#: the SQL standard's name for now() (both the transaction's start time).
_SAME_DEFAULT = {"CURRENT_TIMESTAMP": "now()"}


def _default(expression: str | None) -> str | None:
    return None if expression is None else _SAME_DEFAULT.get(expression, expression)


def _grouped(rows: list[tuple[Any, ...]]) -> dict[str, frozenset[str]]:
    grouped: dict[str, set[str]] = {}
    for table, definition in rows:
        grouped.setdefault(table, set()).add(definition)
    return {table: frozenset(defs) for table, defs in grouped.items()}


def _introspect(conn: Conn, schema: str) -> Catalog:
    tables = {
        name: _PERSISTENCE.get(persistence, "") + _KINDS.get(kind, kind)
        for name, kind, persistence in _rows(conn, "tables", schema)
    }
    columns: dict[str, dict[str, Column]] = {}
    order: dict[str, list[str]] = {}
    for table, name, type_, nullable, default, identity, generated in _rows(
        conn, "columns", schema
    ):
        order.setdefault(table, []).append(name)
        columns.setdefault(table, {})[name] = Column(
            type_, bool(nullable), _default(default), identity or "", generated or ""
        )
    constraints = _grouped(_rows(conn, "constraints", schema))
    indexes = _grouped(
        [(t, _INDEX_NAME.sub(r"\1\2", d, count=1)) for t, d in _rows(conn, "indexes", schema)]
    )
    triggers = _grouped(
        [(t, _TRIGGER_NAME.sub(r"\1", d, count=1)) for t, d in _rows(conn, "triggers", schema)]
    )
    functions = {sig: body for sig, body in _rows(conn, "functions", schema)}
    sequences = {}
    for name, owner, *params in _rows(conn, "sequences", schema):
        type_, start, increment, minimum, maximum, cache, cycle = params
        sequences[f"owned by {owner}" if owner else name] = (
            f"{type_} START {start} INCREMENT {increment} MINVALUE {minimum} "
            f"MAXVALUE {maximum} CACHE {cache}{' CYCLE' if cycle else ''}"
        )
    views = {name: definition for name, definition in _rows(conn, "views", schema)}
    types = {name: definition for name, definition in _rows(conn, "types", schema)}
    return Catalog(
        tables,
        columns,
        constraints,
        indexes,
        triggers,
        functions,
        sequences,
        views,
        types,
        {table: tuple(names) for table, names in order.items()},
    )


def _compared() -> list[str]:
    """The sections that make up the schema's identity (column order is not one)."""
    return [f.name for f in fields(Catalog) if f.compare]


#: sections keyed by a table's name: their entries belong to that table
_PER_TABLE = ("columns", "constraints", "indexes", "triggers", "column_order")


def without(cat: Catalog, leave_out: Callable[[str], bool]) -> Catalog:
    """The catalog without the tables `leave_out` names (their columns, constraints,
    indexes, triggers and owned sequences go with them)."""
    changes: dict[str, Any] = {
        section: {k: v for k, v in getattr(cat, section).items() if not leave_out(k)}
        for section in ("tables", *_PER_TABLE)
    }
    changes["sequences"] = {
        k: v
        for k, v in cat.sequences.items()
        if not (k.startswith("owned by ") and leave_out(k.removeprefix("owned by ").split(".")[0]))
    }
    return replace(cat, **changes)


_MISSING = object()


def _walk(a: Catalog, b: Catalog) -> Iterator[tuple[str, str, Any, Any]]:
    """Every difference from `a` to `b` as (section, key, a's value, b's value), a value
    `_MISSING` where that side has none; a table's columns, constraints, indexes and
    triggers one by one where both sides have the table (the one comparer `diff`,
    `differences` and `notes` share)."""
    for section in _compared():
        left, right = getattr(a, section), getattr(b, section)
        for key in sorted(set(left) | set(right)):
            if key not in right:
                yield section, key, left[key], _MISSING
            elif key not in left:
                yield section, key, _MISSING, right[key]
            elif left[key] != right[key]:
                yield from _walk_value(section, key, left[key], right[key])


def _walk_value(
    section: str, key: str, left: Any, right: Any
) -> Iterator[tuple[str, str, Any, Any]]:
    if isinstance(left, frozenset) and isinstance(right, frozenset):
        for item in sorted(left - right):
            yield section, key, item, _MISSING
        for item in sorted(right - left):
            yield section, key, _MISSING, item
    elif isinstance(left, dict) and isinstance(right, dict):
        for name in sorted(set(left) | set(right)):
            if left.get(name) != right.get(name):
                yield section, f"{key}.{name}", left.get(name, _MISSING), right.get(name, _MISSING)
    else:
        yield section, key, left, right


def _line_diff(left: str, right: str) -> tuple[str, str] | None:
    """For two multi-line texts (a function's definition): the first line that differs on
    each side, as `line N: …` (None for one-line texts)."""
    a, b = left.splitlines(), right.splitlines()
    if len(a) < 2 and len(b) < 2:
        return None
    for n in range(max(len(a), len(b))):
        x = a[n].strip() if n < len(a) else "(end)"
        y = b[n].strip() if n < len(b) else "(end)"
        if x != y:
            return f"line {n + 1}: {x}", f"line {n + 1}: {y}"
    return None


def diff(a: Catalog, b: Catalog) -> list[str]:
    """Readable differences from `a` to `b` (empty when the schemas are identical).

    `- x` exists only in a, `+ x` only in b, `~ x: va != vb` differs.
    """
    out: list[str] = []
    for section, key, left, right in _walk(a, b):
        where = f"{section} {key}"
        if right is _MISSING:
            out.append(f"- {where}: {_show(left)}")
        elif left is _MISSING:
            out.append(f"+ {where}: {_show(right)}")
        elif isinstance(left, str) and isinstance(right, str) and _line_diff(left, right):
            x, y = _line_diff(left, right) or ("", "")
            out.append(f"~ {where}: {x!r} != {y!r}")
        elif isinstance(left, Column):
            out.append(f"~ {where}: {left} != {right}")
        else:
            out.append(f"~ {where}: {left!r} != {right!r}")
    return out


#: how `differences` names an object of each section
_OBJECT = {
    "tables": "table",
    "columns": "column",
    "constraints": "constraint on",
    "indexes": "index on",
    "triggers": "trigger on",
    "functions": "function",
    "sequences": "sequence",
    "views": "view",
    "types": "type",
}


def printing_only(a: Catalog, b: Catalog, a_reloaded: Catalog) -> set[tuple[str, str]]:
    """The objects (section, key) that differ from `a` to `b` and not from `a_reloaded`
    (`a`'s schema through pg_dump and a reload) to `b`: they differ only as PostgreSQL
    prints them. Its printing of some expressions does not survive a reload word for word
    (`varchar_col IN ('a', 'b')` comes back with its casts moved), so a schema made by
    migrations and one loaded from a dump can differ in text alone."""
    first = {(section, key) for section, key, _, _ in _walk(a, b)}
    return first - {(section, key) for section, key, _, _ in _walk(a_reloaded, b)}


def differences(
    a: Catalog,
    b: Catalog,
    labels: tuple[str, str] = ("a", "b"),
    ignore: Collection[tuple[str, str]] = (),
) -> list[str]:
    """The differences from `a` to `b`, one line per object naming it and both sides:
    `column dogs.born: upgraded date; fresh (none)`. A table only one side has is one line
    (its columns, constraints and indexes are not listed again). `ignore`: objects
    (section, key) left out (`printing_only`'s)."""
    out: list[str] = []
    for section, key, left, right in _walk(a, b):
        if (section, key) in ignore:
            continue
        table = (
            key.split(".")[0]
            if section in ("columns", "constraints", "indexes", "triggers")
            else None
        )
        if (
            table is not None
            and (table not in a.tables or table not in b.tables)
            and (table in a.tables or table in b.tables)
        ):
            continue  # the table's own line says it
        if isinstance(left, str) and isinstance(right, str) and _line_diff(left, right):
            left, right = _line_diff(left, right) or (left, right)
        sides = "; ".join(
            f"{label} {'(none)' if value is _MISSING else _show(value)}"
            for label, value in zip(labels, (left, right), strict=True)
        )
        out.append(f"{_OBJECT.get(section, section)} {key}: {sides}")
    return out


def notes(a: Catalog, b: Catalog, labels: tuple[str, str] = ("a", "b")) -> list[str]:
    """What differs without being a difference: the column order of a table both sides
    have with the same columns."""
    out = []
    for table in sorted(set(a.column_order) & set(b.column_order)):
        x, y = a.column_order[table], b.column_order[table]
        if x != y and sorted(x) == sorted(y):
            out.append(
                f"column order of {table}: {labels[0]} {', '.join(x)}; {labels[1]} {', '.join(y)}"
            )
    return out


def _show(value: Any) -> str:
    if isinstance(value, frozenset):
        return "; ".join(sorted(value))
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items()))
    return str(value)


def contents(target: str | Conn, schema: str = "public") -> dict[str, list[str]]:
    """Every table's rows as sorted text (for tests that prove nothing changed)."""
    if isinstance(target, str):
        with connection(target, application_name="queueguard-catalog") as conn:
            return contents(conn, schema)
    conn = target
    names = [
        name
        for (name,) in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname",
            (schema,),
        )
    ]
    result: dict[str, list[str]] = {}
    for name in names:
        query = sql.SQL("SELECT x::text FROM {}.{} x").format(
            sql.Identifier(schema), sql.Identifier(name)
        )
        result[name] = sorted(str(row[0]) for row in conn.execute(query))
    return result


def document(cat: Catalog) -> dict[str, Any]:
    """The catalog as plain JSON (sorted): what `fixtures/head_catalog.json` freezes and what
    a fixture's schema fingerprint hashes."""
    return {
        f.name: {
            key: (
                sorted(value)
                if isinstance(value, frozenset)
                else {c: str(col) for c, col in sorted(value.items())}
                if isinstance(value, dict)
                else value
            )
            for key, value in sorted(getattr(cat, f.name).items())
        }
        for f in fields(Catalog)
        if f.compare
    }


def fingerprint(target: str | Conn, schema: str = "public") -> str:
    """sha256 of the normalised catalog: what a golden fixture's manifest records."""
    doc = document(introspect(target, schema))
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
