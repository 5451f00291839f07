"""Filling the shadow while the application writes: the table copied range of pages by
range of pages, one range per transaction (the capture triggers, in place before, log every
row a writer changes meanwhile; `rebuild_replay` catches the shadow up).

What the copy selects: every column the shadow shares with the table (same attnum, same
name), through the statement's USING expression where its TYPE change gives one. Generated
columns compute themselves; a column the statement adds takes its default row by row (a
volatile default, an identity, a serial: each row its own value), except a default calling
no volatile function, which the plain statement evaluates once and the copy takes once."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pglast import ast
from psycopg import sql

from queueguard.engine import topology
from queueguard.engine.online.choose import nodes, parse_one
from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote
from queueguard.engine.online.rebuild.catalog import Column, Q, Table
from queueguard.engine.online.rebuild.statement import Statement

Progress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class Throttle:
    batch_size: int = 5000  # rows per copy/replay batch
    pause_s: float = 0.0  # sleep between batches
    max_lag_s: float | None = None  # pause while a streaming standby lags more
    #: the standbys' lag as measured through the run (`rebuild.run` gives each run its own)
    watch: topology.LagWatch | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CopyPlan:
    """What the copy and the replay write into the shadow and select from the table."""

    table: Table
    #: the shadow's columns the copy writes, and what it selects for each
    columns: tuple[str, ...]
    expressions: tuple[str, ...]
    #: the shadow's key as computed from a live key (the statement may change its type)
    shadow_key: tuple[str, ...]

    @property
    def key(self) -> tuple[Column, ...]:
        return tuple(self.table.column(k) for k in self.table.key)


def cast(value: str, column: Column) -> str:
    collate = f" COLLATE {column.collation}" if column.collation else ""
    return f"CAST({value} AS {column.type_sql}){collate}"


def plan(conn: psycopg.Connection[Any], table: Table, statement: Statement) -> CopyPlan:
    """Read off the shadow once the statement ran on it (in that transaction: a default
    evaluated once is evaluated there)."""
    using = statement.using()
    shadow_rows = conn.execute(Q["shadow_columns"], {"shadow": table.shadow}).fetchall()
    live = {c.attnum: c for c in table.live_columns}
    once = _evaluated_once(conn, table)
    columns: list[str] = []
    expressions: list[str] = []
    shadow_types: dict[str, Column] = {}
    for attnum, name, dropped, generated, identity, type_sql, collation in shadow_rows:
        if dropped:
            continue
        shadow_types[name] = Column(attnum, name, False, type_sql, collation, generated, identity)
        if generated:
            continue
        source = live.get(attnum)
        if source is not None and source.name == name:
            columns.append(quote(name))
            expressions.append(using.get(name, quote(name)))
        elif attnum > table.last_attnum and name in once:
            typed = shadow_types[name]
            row = conn.execute(f"SELECT ({cast(once[name], typed)})::text").fetchone()
            value = "NULL" if row is None or row[0] is None else _literal(row[0])
            columns.append(quote(name))
            expressions.append(cast(value, typed))
    shadow_key = tuple(cast(f"({using.get(k, quote(k))})", shadow_types[k]) for k in table.key)
    return CopyPlan(table, tuple(columns), tuple(expressions), shadow_key)


def _evaluated_once(conn: psycopg.Connection[Any], table: Table) -> dict[str, str]:
    """{column: default} of the added columns whose default calls no volatile function."""
    params = {"shadow": table.shadow, "after": table.last_attnum}
    defaults = dict(conn.execute(Q["added_defaults"], params).fetchall())
    calls = {name: _calls(expression) for name, expression in defaults.items()}
    every = sorted(set().union(*calls.values())) if calls else []
    rows = conn.execute(Q["volatile_functions"], {"names": every}).fetchall()
    volatile = {r[0] for r in rows}
    return {name: defaults[name] for name, called in calls.items() if not called & volatile}


def _calls(expression: str) -> set[str]:
    """The names of the functions an expression calls (PostgreSQL's parse tree)."""
    calls = [n for n in nodes(parse_one(f"SELECT {expression}")) if isinstance(n, ast.FuncCall)]
    names = ([n for n in c.funcname or () if isinstance(n, ast.String)] for c in calls)
    return {str(found[-1].sval) for found in names if found}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def key_names(copy: CopyPlan) -> str:
    return ", ".join(quote(c.name) for c in copy.key)


#: the memory of the sorts of the whole shadow, at least: maintenance_work_mem of its index
#: builds, work_mem of its deduplication (nobody reads the shadow, and every change made
#: meanwhile waits in the log: sorts in memory, not in passes over temporary files)
SHADOW_MEMORY = "512MB"
#: pages of the first batch when the statistics give no rows per page
FIRST_PAGES = 1


def fill(ctx: Context, copy: CopyPlan, throttle: Throttle, progress: Progress) -> int:
    """Copy the table into the shadow, one range of its pages per transaction, in the order
    they lie on disk (a TID range scan: each page read once, in sequence; a key order reads
    the heap at random — Temporal's key is an md5); rows copied. The pages are those the
    table had when the fill began: a row version written later was written after the capture
    triggers were in place, so its key is in the log. Each batch's rows are read once after
    its commit (`_hint`): the first scan after the fill then writes nothing."""
    table = copy.table
    pages = ctx.transaction(lambda conn: _pages(conn, table))
    step = _first_step(pages, table.rows_estimate, throttle.batch_size)
    done, lower, hinted = 0, 0, 0
    while lower < pages:
        upper = min(pages, lower + step)

        def batch(conn: psycopg.Connection[Any], lower: int = lower, upper: int = upper) -> int:
            no_row_security(conn)
            cur = conn.execute(
                sql.SQL(Q["fill_batch"]).format(
                    shadow=sql.SQL(table.shadow), columns=sql.SQL(", ".join(copy.columns)),
                    expressions=sql.SQL(", ".join(copy.expressions)),
                    table=sql.SQL(table.qualified),
                ),
                {"lo": f"({lower},0)", "hi": f"({upper},0)"},
            )  # fmt: skip
            return cur.rowcount

        done += ctx.transaction(batch)

        def hint(conn: psycopg.Connection[Any], start: int = hinted) -> int:
            return _hint(conn, table, start)

        hinted = ctx.transaction(hint)
        progress("fill", done, max(table.rows_estimate, done))
        step = _next_step(step, upper, done, throttle.batch_size)
        lower = upper
        if lower < pages:
            between(ctx, throttle, progress)
    return done


def _hint(conn: psycopg.Connection[Any], table: Table, start: int) -> int:
    """The shadow's rows from page `start` on read once after their batch's commit, setting
    their hint bits while the pages are still in shared buffers (rebuild.sql, `fill_hint`);
    the page to start at next time (its last, which the next batch may add rows to)."""
    query = sql.SQL(Q["fill_hint"]).format(shadow=sql.SQL(table.shadow))
    row = conn.execute(query, {"shadow": table.shadow, "from": f"({start},0)"}).fetchone()
    pages = int(row[1]) if row else 0
    return max(start, pages - 1)


def _pages(conn: psycopg.Connection[Any], table: Table) -> int:
    row = conn.execute(Q["fill_pages"], {"oid": table.oid}).fetchone()
    return int(row[0]) if row else 0


def _first_step(pages: int, rows_estimate: int, batch_size: int) -> int:
    """Pages of the first batch: batch_size rows at the planner's rows per page."""
    if pages <= 0 or rows_estimate <= 0:
        return FIRST_PAGES
    return max(1, round(batch_size * pages / rows_estimate))


def _next_step(step: int, read: int, copied: int, batch_size: int) -> int:
    """Pages of the next batch: batch_size rows at the rows per page read so far, growing at
    most fourfold a batch (a stretch of empty pages says little about the pages after it)."""
    if copied <= 0:
        return step * 4
    return max(1, min(step * 4, round(batch_size * read / copied)))


def deduplicate(conn: psycopg.Connection[Any], copy: CopyPlan) -> int:
    """One row per key left in the shadow, before the key's unique index is built (rows
    removed). Each page was read at its own moment: a row a writer moved to a page not read
    yet was copied twice — its key is in the log, and the replay puts the live row back.
    The statement's plan is the same whatever the shadow's statistics say (no join)."""
    key = ", ".join(quote(c.name) for c in copy.key)
    conn.execute(Q["shadow_sort_memory"], {"memory": SHADOW_MEMORY})
    cur = conn.execute(
        sql.SQL(Q["fill_duplicates"]).format(shadow=sql.SQL(copy.table.shadow), key=sql.SQL(key))
    )
    return cur.rowcount


def analyze(conn: psycopg.Connection[Any], copy: CopyPlan) -> None:
    """Statistics for the filled shadow, before anything queries it."""
    conn.execute(sql.SQL(Q["analyze"]).format(shadow=sql.SQL(copy.table.shadow)))


def no_row_security(conn: psycopg.Connection[Any]) -> None:
    """Row security never filters the copy: a policy that would is an error instead."""
    conn.execute("SET LOCAL row_security = off")


def between(ctx: Context, throttle: Throttle, progress: Progress | None = None) -> None:
    """The pause between two batches, then wait while a streaming standby lags too far."""
    if throttle.pause_s:
        time.sleep(throttle.pause_s)
    hold_for_standbys(ctx, throttle, progress)


def hold_for_standbys(ctx: Context, throttle: Throttle, progress: Progress | None) -> None:
    """With `--max-lag`: wait while the slowest streaming standby is further behind than the
    limit, saying so on the progress line (phase `standby lag`: ms behind, the limit in ms);
    said once each: no standby to watch, and WAL an inactive replication slot holds back."""
    if throttle.max_lag_s is None or throttle.watch is None:
        return
    say = progress or (lambda phase, done, total: None)
    waited = False
    while True:
        lag = throttle.watch.read(ctx.conn.cursor())
        ctx.conn.rollback()
        if lag.retained_bytes and "slot" not in _said(throttle):
            _said(throttle).add("slot")
            say(f"standby slot {lag.slots} inactive, holding back WAL (bytes)",
                int(lag.retained_bytes), None)  # fmt: skip
        if not lag.standbys and "none" not in _said(throttle):
            _said(throttle).add("none")
            say("standby lag: no streaming standby connected, --max-lag has nothing to watch",
                0, None)  # fmt: skip
        # rounded up: a standby 300.4 ms behind a 300 ms limit says 301, never "300 of 300"
        behind, limit = math.ceil(lag.seconds * 1000), int(throttle.max_lag_s * 1000)
        if lag.seconds <= throttle.max_lag_s:
            if waited:  # the line says it goes on
                say("standby lag", behind, limit)
            return
        waited = True
        say("standby lag", behind, limit)
        time.sleep(min(1.0, max(0.1, lag.seconds - throttle.max_lag_s)))


def _said(throttle: Throttle) -> set[str]:
    """What the throttle has said once already (kept on its watch: one per run)."""
    assert throttle.watch is not None
    return throttle.watch.said
