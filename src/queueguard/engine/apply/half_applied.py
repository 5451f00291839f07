"""A revision another tool left half applied, found before anything runs.

`temporal-sql-tool update-schema` runs a version's statements one by one, each committing on
its own, and moves the version row only at the end; on a rerun it skips every error that
says "already exist". A version it stopped in the middle of therefore shows as: some of the
objects the version creates exist, the version row has not moved, and (ours would say how
far we got) no progress row of ours. Ignoring "already exists" would paper over an object
that exists *differently*; so the upgrade stops and names each object, and whether it
matches what the version would create.

Read only: objects are looked up in the catalog; a table's would-be columns come from
creating it in a scratch schema inside a savepoint that is rolled back, with a short
lock_timeout (its foreign keys lock their referenced tables for that moment). It runs in the
runner's transaction, under the runner lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg

from queueguard.engine.plan.apply import code_of
from queueguard.errors import HalfApplied
from queueguard.sets import MigrationSet, Revision

_NAME = r"(?P<name>(?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))?)"
_TABLE = re.compile(r"^CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?" + _NAME, re.I)
_INDEX = re.compile(
    r"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?" + _NAME,
    re.I,
)
_SIMPLE = {
    "sequence": re.compile(r"^CREATE\s+SEQUENCE\s+(?:IF\s+NOT\s+EXISTS\s+)?" + _NAME, re.I),
    "view": re.compile(
        r"^CREATE\s+(?:MATERIALIZED\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?" + _NAME, re.I
    ),
    "type": re.compile(r"^CREATE\s+TYPE\s+" + _NAME, re.I),
    "function": re.compile(r"^CREATE\s+(?:FUNCTION|PROCEDURE)\s+" + _NAME, re.I),
}
_ALTER = re.compile(
    r"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?" + _NAME + r"\s+(?P<rest>.*)$", re.I | re.S
)
_ADD_COLUMN = re.compile(
    r"ADD\s+(?:COLUMN\s+)?(?P<tolerant>IF\s+NOT\s+EXISTS\s+)?(?P<column>\"[^\"]+\"|[\w$]+)\s+"
    r"(?P<type>.+?)(?=\s+(?:NOT\s+NULL|NULL|DEFAULT|GENERATED|CONSTRAINT|PRIMARY|REFERENCES|"
    r"CHECK|UNIQUE|COLLATE)\b|,\s*(?:ADD|ALTER|DROP)\b|$)",
    re.I | re.S,
)
_NOT_A_COLUMN = {"CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "EXCLUDE"}
_IF_NOT_EXISTS = re.compile(r"\bIF\s+NOT\s+EXISTS\b", re.I)
_DROP = re.compile(
    r"^DROP\s+(?P<kind>TABLE|INDEX|SEQUENCE|VIEW|MATERIALIZED\s+VIEW|TYPE|FUNCTION|PROCEDURE)"
    r"\s+(?:CONCURRENTLY\s+)?(?:IF\s+EXISTS\s+)?(?P<names>[^;(]+?)(?:\s+(?:CASCADE|RESTRICT))?"
    r"\s*(?:\(|$)",
    re.I | re.S,
)
_DROP_COLUMN = re.compile(
    r"DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?(?P<column>\"[^\"]+\"|[\w$]+)", re.I
)


@dataclass(frozen=True)
class Found:
    kind: str
    name: str
    statement: str
    verdict: str  # "matches what it would create", "differs: …", "cannot be compared"

    def line(self) -> str:
        return f"{self.kind} {self.name} exists ({self.verdict})"


def _ident(part: str) -> str:
    """One identifier as the catalog spells it: a quoted one as written, others folded to
    lower case (as PostgreSQL reads `TemporalChangeVersion`)."""
    return part[1:-1].replace('""', '"') if part.startswith('"') else part.lower()


#: one part of a qualified name: a quoted identifier (which may hold a dot) or a plain one
_PART = re.compile(r'"(?:[^"]|"")*"|[^."]+')


def _unquote(name: str) -> str:
    """`schema.table` as the catalog spells each part (a quoted part's dots are its own)."""
    return ".".join(_ident(part) for part in _PART.findall(name))


def objects(statement: str) -> list[tuple[str, str, str | None, bool]]:
    """(kind, name, detail, tolerant) of what the statement creates (pure): a column's detail
    is its declared type; `tolerant` when it is created IF NOT EXISTS (per object: one
    `ADD COLUMN IF NOT EXISTS` says nothing of the other columns of the same ALTER)."""
    code = code_of(statement)
    whole = bool(_IF_NOT_EXISTS.search(code.split("(", 1)[0]))  # before any column list
    if found := _TABLE.match(code):
        return [("table", found["name"], None, whole)]
    if found := _INDEX.match(code):
        return [("index", found["name"], None, whole)]
    for kind, pattern in _SIMPLE.items():
        if found := pattern.match(code):
            return [(kind, found["name"], None, whole)]
    if found := _ALTER.match(code):
        out: list[tuple[str, str, str | None, bool]] = []
        for add in _ADD_COLUMN.finditer(found["rest"]):
            if add["column"].upper() in _NOT_A_COLUMN:
                continue
            column = f"{found['name']}.{add['column']}"
            out.append(("column", column, " ".join(add["type"].split()), bool(add["tolerant"])))
        return out
    return []


def _exists(conn: psycopg.Connection[Any], kind: str, name: str) -> bool:
    plain = _unquote(name)
    if kind in ("table", "index", "sequence", "view"):
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    elif kind == "type":
        row = conn.execute("SELECT to_regtype(%s) IS NOT NULL", (name,)).fetchone()
    elif kind == "function":
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE p.proname = %s AND n.nspname = ANY(current_schemas(false)))",
            (plain.rsplit(".", 1)[-1],),
        ).fetchone()
    else:  # column
        table, column = name.rsplit(".", 1)
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = %s AND attnum > 0 AND NOT attisdropped)",
            (table, _ident(column)),
        ).fetchone()
    return bool(row and row[0])


def _columns(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str, bool]]:
    return [
        (r[0], r[1], r[2])
        for r in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped "
            "ORDER BY attnum",
            (table,),
        ).fetchall()
    ]


def _compare_table(conn: psycopg.Connection[Any], name: str, statement: str) -> str:
    """Create the table in a scratch schema (rolled back) and compare the columns."""
    existing = _columns(conn, name)
    conn.execute("SAVEPOINT queueguard_probe")
    try:
        conn.execute("SET LOCAL lock_timeout = 1000")
        conn.execute("CREATE SCHEMA queueguard_probe")
        path = conn.execute("SELECT current_setting('search_path')").fetchone()
        conn.execute(f"SET LOCAL search_path = queueguard_probe, {path[0] if path else 'public'}")
        conn.execute(code_of(statement).replace(name, _unquote(name).rsplit(".", 1)[-1], 1))
        would = _columns(conn, "queueguard_probe." + _unquote(name).rsplit(".", 1)[-1])
    except psycopg.Error as exc:
        return f"cannot be compared: {str(exc).splitlines()[0]}"
    finally:
        conn.execute("ROLLBACK TO SAVEPOINT queueguard_probe")
    if existing == would:
        return "matches what it would create"
    return f"differs: it has {_show(existing)}, the revision would create {_show(would)}"


def _show(columns: list[tuple[str, str, bool]]) -> str:
    return "(" + ", ".join(f"{n} {t}{' NOT NULL' if nn else ''}" for n, t, nn in columns) + ")"


def _compare_column(conn: psycopg.Connection[Any], name: str, declared: str) -> str:
    table, column = name.rsplit(".", 1)
    have = next((t for n, t, _ in _columns(conn, table) if n == _ident(column)), None)
    conn.execute("SAVEPOINT queueguard_probe")
    try:
        conn.execute(f"CREATE TEMP TABLE queueguard_probe (x {declared})")
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'queueguard_probe'::regclass AND attname = 'x'"
        ).fetchone()
        want = row[0] if row else None
    except psycopg.Error as exc:
        return f"cannot be compared: {str(exc).splitlines()[0]}"
    finally:
        conn.execute("ROLLBACK TO SAVEPOINT queueguard_probe")
    if have == want:
        return "matches what it would create"
    return f"differs: it is {have}, the revision would make it {want}"


_INDEX_PARTS = re.compile(
    r"^CREATE\s+(?P<unique>UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?"
    + _NAME
    + r"\s+ON\s+(?:ONLY\s+)?(?P<table>(?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))?)"
    r"(?P<rest>.*)$",
    re.I | re.S,
)


def _compare_index(conn: psycopg.Connection[Any], name: str, statement: str) -> str:
    """Build the index the statement describes on an empty copy of its table's columns (a
    temporary table, in a rolled-back savepoint) and compare PostgreSQL's own definitions of
    both, names aside: textual forms differ in casts and parentheses where indexes do not."""
    row = conn.execute("SELECT pg_get_indexdef(to_regclass(%s))", (name,)).fetchone()
    have = row[0] if row else ""
    parts = _INDEX_PARTS.match(code_of(statement))
    if parts is None:
        return "cannot be compared: the statement was not understood"
    conn.execute("SAVEPOINT queueguard_probe")
    try:
        conn.execute("SET LOCAL lock_timeout = 1000")
        conn.execute(f"CREATE TEMP TABLE queueguard_probe (LIKE {parts['table']})")
        unique = "UNIQUE " if parts["unique"] else ""
        conn.execute(
            f"CREATE {unique}INDEX queueguard_probe_index ON pg_temp.queueguard_probe"
            + parts["rest"]
        )
        probe = conn.execute(
            "SELECT pg_get_indexdef('pg_temp.queueguard_probe_index'::regclass)"
        ).fetchone()
        want = probe[0] if probe else ""
    except psycopg.Error as exc:
        return f"cannot be compared: {str(exc).splitlines()[0]}"
    finally:
        conn.execute("ROLLBACK TO SAVEPOINT queueguard_probe")
    if _body(have) == _body(want):
        return "matches what it would create"
    return f"differs: it is `{have}`"


def _body(definition: str) -> str:
    """An index definition without its name and table: `UNIQUE` and what follows USING."""
    unique = "UNIQUE " if definition.upper().startswith("CREATE UNIQUE") else ""
    return unique + definition.partition(" USING ")[2]


def dropped(statement: str) -> list[tuple[str, str]]:
    """(kind, name) of what the statement drops (pure): tables, indexes, … and columns."""
    code = code_of(statement)
    if found := _DROP.match(code):
        kind = found["kind"].split()[-1].lower()
        return [(kind, name.strip()) for name in found["names"].split(",")]
    if found := _ALTER.match(code):
        return [
            ("column", f"{found['name']}.{drop['column']}")
            for drop in _DROP_COLUMN.finditer(found["rest"])
            if drop["column"].upper() not in _NOT_A_COLUMN
        ]
    return []


def _key(kind: str, name: str) -> tuple[str, str]:
    return ("table" if kind in ("table", "view") else kind, _unquote(name).lower())


def found(conn: psycopg.Connection[Any], rev: Revision) -> list[Found]:
    """The objects `rev` creates that exist already, each compared. Not evidence: an object
    the revision drops before creating it again (a column "fixed" by DROP then ADD), and one
    created `IF NOT EXISTS` (the revision is written to find it there)."""
    out: list[Found] = []
    gone: set[tuple[str, str]] = set()
    for statement in rev.statements or ():
        gone |= {_key(kind, name) for kind, name in dropped(statement)}
        for kind, name, detail, tolerant in objects(statement):
            if tolerant or _key(kind, name) in gone or not _exists(conn, kind, name):
                continue
            if kind == "table":
                verdict = _compare_table(conn, name, statement)
            elif kind == "column":
                verdict = _compare_column(conn, name, detail or "")
            elif kind == "index":
                verdict = _compare_index(conn, name, statement)
            else:
                verdict = "cannot be compared: only its existence is checked"
            out.append(Found(kind, _unquote(name), statement, verdict))
    return out


def refuse(conn: psycopg.Connection[Any], mset: MigrationSet, rev: Revision) -> None:
    """Raise HalfApplied if objects of the first pending revision exist already."""
    if mset.format not in ("temporal", "sqldir"):
        return
    existing = found(conn, rev)
    if existing:
        names = "\n  ".join(f.line() for f in existing)
        raise HalfApplied(
            f"revision {rev.id} looks half applied (by another tool?): the version row has not "
            f"moved, no progress of ours is recorded, and {len(existing)} of its objects exist "
            f"already:\n  {names}\nnothing was changed; finish or undo that version by hand "
            "(or restore a backup), then rerun"
        )
