"""The scratch copy `plan` works on: the target's schema (`pg_dump --schema-only`) and a
sample of its rows — the first `rows` of every table — read from the target in read-only
transactions and nothing else.

The schema goes in in two halves: tables first, then the sample rows, then indexes and
constraints (the dump's post-data section), so indexes are built over the sample as they are
over the target's rows. A sample keeps only rows whose foreign-key parents it also has, so the
constraints load. Its sequences go on from where the target's are, as the rows they numbered
are there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from queueguard.engine.dumps import normalise_dump
from queueguard.engine.plan.bill import Size
from queueguard.engine.plan.observe import Q
from queueguard.errors import QueueguardError
from queueguard.pg import tools
from queueguard.pg.connect import connect, connection
from queueguard.pg.dsn import redact

DEFAULT_ROWS = 100_000
#: how long pg_dump waits for a table's ACCESS SHARE lock on the target before it gives up
DUMP_LOCK_WAIT_MS = 10_000
APPLICATION_NAME = "queueguard-plan"
_SECTIONS = ("pre-data", "post-data")


@contextmanager
def read_only(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose every transaction is READ ONLY (the target's)."""
    conn = connect(dsn, application_name=APPLICATION_NAME)
    conn.read_only = True
    try:
        yield conn
    finally:
        conn.close()


def write_rates(dsn: str, seconds: float) -> dict[str, float]:
    """{table: rows the writers change a second}, from the target's statistics read
    `seconds` apart (only read; a backend publishes its counts at its commits, at most once a
    second, so a window of a few seconds is needed)."""
    import time

    with connection(dsn, autocommit=True) as conn:
        first = dict(conn.execute(Q["write_counts"]).fetchall())
        time.sleep(seconds)
        second = dict(conn.execute(Q["write_counts"]).fetchall())
    return {t: (n - first.get(t, n)) / seconds for t, n in second.items() if n > first.get(t, n)}


def sizes(conn: psycopg.Connection[Any], leave_out: Sequence[str] = ()) -> dict[str, Size]:
    """The tables' sizes by name (as `conn`'s search_path names them), `leave_out`'s schemas
    not read."""
    rows = conn.execute(Q["table_sizes"], {"leave_out": list(leave_out)}).fetchall()
    conn.rollback()
    return {r[0]: Size(r[1], r[2], r[3], r[4], r[5]) for r in rows}


def _dump(target: str, section: str, leave_out: Sequence[str] = ()) -> str:
    # a schema name as a pg_dump pattern: double-quoted, so taken literally
    excluded = ['--exclude-schema="' + name.replace('"', '""') + '"' for name in leave_out]
    done = tools.run(
        "pg_dump",
        target,
        [
            *excluded,
            "--schema-only",
            f"--section={section}",
            "--no-owner",
            "--no-privileges",
            # its ACCESS SHARE locks queue behind a pending ACCESS EXCLUSIVE: give up instead
            f"--lock-wait-timeout={DUMP_LOCK_WAIT_MS}",
        ],
    )
    if done.returncode != 0:
        raise QueueguardError(
            f"pg_dump --schema-only of the target failed: "
            f"{redact(done.stderr.decode(errors='replace'))[-500:]}"
        )
    return normalise_dump(done.stdout.decode())


def _load(scratch: str, script: str, what: str) -> None:
    done = tools.run("psql", scratch, ["-v", "ON_ERROR_STOP=1", "-q"], stdin=script.encode())
    if done.returncode != 0:
        raise QueueguardError(
            f"loading the target's {what} into the scratch copy failed: "
            f"{done.stderr.decode(errors='replace')[-500:]}"
        )


_COLUMNS = """
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       array_agg(quote_ident(a.attname) ORDER BY a.attnum)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     AND a.attgenerated = ''
WHERE c.relkind = 'r'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname !~ '^pg_temp'
  AND n.nspname <> ALL(%(leave_out)s::text[])
GROUP BY 1 ORDER BY 1
"""


def _copy_rows(
    target: psycopg.Connection[Any],
    scratch: psycopg.Connection[Any],
    rows: int,
    leave_out: Sequence[str],
) -> None:
    tables = target.execute(_COLUMNS, {"leave_out": list(leave_out)}).fetchall()
    for table, columns in tables:
        cols = sql.SQL(", ").join(sql.SQL(c) for c in columns)
        name = sql.SQL(table)  # quoted by quote_ident above
        out = sql.SQL("COPY (SELECT {} FROM {} LIMIT {}) TO STDOUT (FORMAT binary)").format(
            cols, name, sql.Literal(rows)
        )
        into = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(name, cols)
        with target.cursor().copy(out) as source, scratch.cursor().copy(into) as sink:
            for chunk in source:
                sink.write(chunk)
    target.rollback()


def delete_orphans(
    conn: psycopg.Connection[Any],
    child: str,
    child_cols: Sequence[str],
    parent: str,
    parent_cols: Sequence[str],
) -> int:
    """Delete `child`'s rows whose foreign key finds no row in `parent` (names as SQL, quoted
    where they need it); how many went. The sample's own business: the target is never
    written."""
    on = sql.SQL(" AND ").join(
        sql.SQL("p.{} = c.{}").format(sql.SQL(p), sql.SQL(c))
        for c, p in zip(child_cols, parent_cols, strict=True)
    )
    present = sql.SQL(" AND ").join(
        sql.SQL("c.{} IS NOT NULL").format(sql.SQL(c)) for c in child_cols
    )
    statement = sql.SQL(
        "DELETE FROM {} c WHERE {} AND NOT EXISTS (SELECT 1 FROM {} p WHERE {})"
    ).format(sql.SQL(child), present, sql.SQL(parent), on)
    return conn.execute(statement).rowcount


def _prune_orphans(scratch: psycopg.Connection[Any], fks: list[tuple[Any, ...]]) -> None:
    """Delete sample rows whose foreign-key parent is not in the sample, until none is left
    (deleting a parent can orphan a grandchild)."""
    while True:
        deleted = sum(
            delete_orphans(scratch, child, child_cols, parent, parent_cols)
            for child, parent, child_cols, parent_cols in fks
        )
        scratch.commit()
        if not deleted:
            return


def schema(target_dsn: str, leave_out: Sequence[str] = ()) -> tuple[str, str]:
    """The target's schema in its two halves (tables; indexes and constraints), dumped side
    by side (two pg_dump processes at once)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        pre, post = (pool.submit(_dump, target_dsn, s, leave_out) for s in _SECTIONS)
        return pre.result(), post.result()


def build(
    target_dsn: str,
    scratch_dsn: str,
    rows: int = DEFAULT_ROWS,
    leave_out: Sequence[str] = (),
    dumped: tuple[str, str] | None = None,
) -> Mapping[str, Size]:
    """Fill the empty database at `scratch_dsn` with the target's schema and a sample of its
    rows; the target's table sizes, read in the same pass. `leave_out`: schemas of the target
    not copied (a schema target's neighbours: other tenants of its database). Both DSNs may
    carry a search_path (a schema target's sessions): tables are then named as it names them,
    on both sides alike. `dumped`: the target's `schema`, dumped already."""
    pre_data, post_data = dumped or schema(target_dsn, leave_out)
    _load(scratch_dsn, pre_data, "tables")
    with read_only(target_dsn) as target, connection(scratch_dsn) as scratch:
        target_sizes = sizes(target, leave_out)
        fks = target.execute(Q["foreign_keys"], {"leave_out": list(leave_out)}).fetchall()
        target.rollback()
        _copy_rows(target, scratch, rows, leave_out)
        # read after the rows (sequences only grow): no copied row has a later number
        positions = target.execute(Q["sequence_values"], {"leave_out": list(leave_out)})
        for sequence, value in positions.fetchall():
            scratch.execute(Q["set_sequence_value"], {"sequence": sequence, "value": value})
        target.rollback()
        scratch.commit()
        _prune_orphans(scratch, fks)
    _load(scratch_dsn, post_data, "indexes and constraints")
    with connection(scratch_dsn, autocommit=True) as scratch:
        tables = [r[0] for r in scratch.execute(Q["sample_tables"]).fetchall()]
        if tables:  # sizes and row counts the scaling reads
            scratch.execute(f"VACUUM ANALYZE {', '.join(tables)}")
    return target_sizes
