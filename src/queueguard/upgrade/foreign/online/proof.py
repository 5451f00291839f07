"""The proof that the online forms end where the plain statements end: the two end states
of the scratch copies compared — a line-identical `pg_dump --schema-only` (owners and
privileges kept: `verify --fresh`'s catalog comparison ignores column order, names, ACLs,
comments and storage options) and equal rows.

Rows are compared as multisets of whole rows. A column the online form filled by a
volatile default (`random()`, `gen_random_uuid()`, a `serial` added to a filled table)
cannot be equal by nature: there every row must hold a value where the plain statement's
row does (and none where it does not). A bookkeeping table's time columns are when it ran.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

from psycopg import sql

from queueguard.errors import QueueguardError
from queueguard.pg import tools
from queueguard.pg.connect import connection
from queueguard.pg.dsn import redact
from queueguard.pg.sqlfiles import queries
from queueguard.upgrade.dumps import normalise_dump

Q = queries("queueguard.upgrade", "online_proof.sql")
_TIME_TYPES = ("timestamp", "date", "time")


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


def _rows(dsn: str) -> dict[str, tuple[list[str], list[str], list[dict[str, Any]]]]:
    found: dict[str, tuple[list[str], list[str], list[dict[str, Any]]]] = {}
    with connection(dsn) as conn:
        for qualified, _name, columns, types in conn.execute(Q["tables"]).fetchall():
            rows = conn.execute(
                sql.SQL("SELECT to_jsonb(t) FROM {} t").format(sql.SQL(qualified))
            ).fetchall()
            found[qualified] = (list(columns), list(types), [r[0] for r in rows])
        conn.rollback()
    return found


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
    plain, online = _rows(plain_dsn), _rows(online_dsn)
    found = [f"table {t}: only in the plain end state" for t in sorted(set(plain) - set(online))]
    found += [f"table {t}: only in the online end state" for t in sorted(set(online) - set(plain))]
    for table in sorted(set(plain) & set(online)):
        columns, types, rows_p = plain[table]
        columns_o, _, rows_o = online[table]
        if columns != columns_o:
            found.append(f"table {table}: columns {columns} vs {columns_o}")
            continue
        name = table.rpartition(".")[2].strip('"')
        loose = set(volatile.get(name, ())) | set(volatile.get(table, ()))
        if name in bookkeeping:
            loose |= {c for c, t in zip(columns, types, strict=True) if t.startswith(_TIME_TYPES)}
        problem = _compare(rows_p, rows_o, loose)
        if problem:
            found.append(f"table {table}: {problem}")
    return found


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
