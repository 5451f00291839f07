"""The proof that the online forms end where the plain statements end: the two end states
of the scratch copies compared — a line-identical `pg_dump --schema-only` (owners and
privileges kept: `verify --fresh`'s catalog comparison ignores column order, names, ACLs,
comments and storage options) and equal rows.

Rows are compared as multisets of whole rows. A column the online form filled by a
volatile default (`random()`, `gen_random_uuid()`, a `serial` added to a filled table)
cannot be equal by nature: there every row must hold a value where the plain statement's
row does (and none where it does not). A bookkeeping table's time columns are when it ran,
and a value naming the database (Temporal's `db_name`) names each copy's own.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

import psycopg
from psycopg import sql

from queueguard.engine.dumps import normalise_dump
from queueguard.errors import QueueguardError
from queueguard.pg import scratch, tools
from queueguard.pg.connect import connection
from queueguard.pg.dsn import redact
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.online", "proof.sql")
_TIME = ("timestamp", "date", "time")


def schema_dump(dsn: str) -> str:
    done = tools.run("pg_dump", dsn, ["--schema-only"])
    if done.returncode != 0:
        raise QueueguardError(
            f"pg_dump --schema-only failed: {redact(done.stderr.decode(errors='replace'))[-500:]}"
        )
    return normalise_dump(done.stdout.decode())


def dump_differences(plain: str, online: str) -> list[str]:
    """The objects whose dump lines differ, each named by pg_dump's header above it."""
    found: list[str] = []
    a, b = plain.splitlines(), online.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        where = _header(a, i1) if i2 > i1 else _header(b, j1)
        plain_text = " / ".join(x.strip() for x in a[i1:i2])[:200] or "(nothing)"
        online_text = " / ".join(x.strip() for x in b[j1:j2])[:200] or "(nothing)"
        found.append(f"{where}: plain has {plain_text}; online has {online_text}")
    return found


def _header(lines: list[str], at: int) -> str:
    for i in range(min(at, len(lines) - 1), -1, -1):
        if lines[i].startswith("-- Name: "):
            return lines[i].removeprefix("-- ").split("; Schema:")[0]
    return "the dump's preamble"


def _tables(conn: psycopg.Connection[Any]) -> dict[str, tuple[list[str], list[str]]]:
    return {r[0]: (list(r[2]), list(r[3])) for r in conn.execute(Q["tables"]).fetchall()}


def _fetch(conn: psycopg.Connection[Any], table: str) -> list[dict[str, Any]]:
    query = sql.SQL("SELECT to_jsonb(t) FROM {} t").format(sql.SQL(table))
    return [r[0] for r in conn.execute(query).fetchall()]


def _digest(
    conn: psycopg.Connection[Any], table: str, columns: list[str], loose: set[str]
) -> tuple[int, str]:
    """(rows, a digest of the multiset of rows) — a loose column by whether it holds a value
    — computed by the server, so a table of millions of rows never crosses the wire."""
    parts = [
        sql.SQL("({} IS NOT NULL)").format(sql.Identifier(c)) if c in loose else sql.Identifier(c)
        for c in columns
    ]
    query = sql.SQL(
        "SELECT count(*), md5(coalesce(string_agg(h, '' ORDER BY h), '')) "
        "FROM (SELECT md5(ROW({})::text) AS h FROM {} t) s"
    ).format(sql.SQL(", ").join(parts), sql.SQL(table))
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def row_differences(
    plain_dsn: str,
    online_dsn: str,
    *,
    volatile: Mapping[str, Collection[str]] | None = None,
    bookkeeping: Collection[str] = (),
) -> list[str]:
    """Tables whose rows differ. `volatile`: {table name: columns filled by a volatile
    default}; `bookkeeping`: tables whose time columns are left out."""
    volatile = volatile or {}
    with connection(plain_dsn) as p_conn, connection(online_dsn) as o_conn:
        plain, online = _tables(p_conn), _tables(o_conn)
        found = [
            f"table {t}: only in the plain end state" for t in sorted(set(plain) - set(online))
        ]
        found += [
            f"table {t}: only in the online end state" for t in sorted(set(online) - set(plain))
        ]
        for table in sorted(set(plain) & set(online)):
            (columns, types), (columns_o, _) = plain[table], online[table]
            if columns != columns_o:
                found.append(f"table {table}: columns {columns} vs {columns_o}")
                continue
            name = table.rpartition(".")[2].strip('"')
            loose = set(volatile.get(name, ())) | set(volatile.get(table, ()))
            if name not in bookkeeping and _digest(p_conn, table, columns, loose) == _digest(
                o_conn, table, columns, loose
            ):
                continue
            rows_p, rows_o = _fetch(p_conn, table), _fetch(o_conn, table)
            if name in bookkeeping:
                loose |= {c for c, t in zip(columns, types, strict=True) if t.startswith(_TIME)}
                # a serial id says only the order rows were recorded in (Django completes a
                # squash at migrate's end; `upgrade --online` with its last original)
                loose |= {"id"} & set(columns)
                # Temporal keys its version row on the database's name: each copy has its own
                rows_p = _own_name(rows_p, scratch.dbname_of(plain_dsn))
                rows_o = _own_name(rows_o, scratch.dbname_of(online_dsn))
            problem = _compare(rows_p, rows_o, loose)
            if problem:
                found.append(f"table {table}: {problem}")
        p_conn.rollback()
        o_conn.rollback()
    return found


def _own_name(rows: list[dict[str, Any]], dbname: str) -> list[dict[str, Any]]:
    return [{c: ("current_database()" if v == dbname else v) for c, v in r.items()} for r in rows]


def _compare(plain: list[dict[str, Any]], online: list[dict[str, Any]], loose: set[str]) -> str:
    if len(plain) != len(online):
        return f"{len(plain)} rows plain, {len(online)} online"

    def key(row: dict[str, Any]) -> str:
        kept = {c: (v if c not in loose else v is not None) for c, v in row.items()}
        return json.dumps(kept, sort_keys=True, default=str)

    only_p = Counter(map(key, plain)) - Counter(map(key, online))
    if not only_p:
        return ""
    example = next(iter(only_p))
    return f"{sum(only_p.values())} row(s) differ, e.g. plain {example[:200]}"
