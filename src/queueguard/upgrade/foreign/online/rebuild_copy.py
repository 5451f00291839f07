"""Filling the shadow while the application writes: the table copied batch by batch in key
order, one batch per transaction (the capture triggers, in place before, log every row a
writer changes meanwhile; `rebuild_replay` catches the shadow up).

What the copy selects: every column the shadow shares with the table (same attnum, same
name), through the statement's USING expression where its TYPE change gives one. Generated
columns compute themselves; a column the statement adds takes its default row by row (a
volatile default, an identity, a serial: each row its own value), except a default calling
no volatile function, which the plain statement evaluates once and the copy takes once."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from pglast import ast
from psycopg import sql

from queueguard.upgrade import topology
from queueguard.upgrade.foreign.online.choose import nodes, parse_one
from queueguard.upgrade.foreign.online.context import Context
from queueguard.upgrade.foreign.online.names import quote
from queueguard.upgrade.foreign.online.rebuild_catalog import Column, Q, Table
from queueguard.upgrade.foreign.online.rebuild_statement import Statement

Progress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class Throttle:
    batch_size: int = 5000  # rows per copy/replay batch
    pause_s: float = 0.0  # sleep between batches
    max_lag_s: float | None = None  # pause while a streaming standby lags more


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


def _key_text(copy: CopyPlan) -> sql.Composable:
    """The key as text, under other names than the columns': ORDER BY a column's own name
    would otherwise sort by the text (and '10' comes before '9'), never by the index."""
    return sql.SQL(", ".join(f"{quote(c.name)}::text AS b{i}" for i, c in enumerate(copy.key)))


def key_names(copy: CopyPlan) -> str:
    return ", ".join(quote(c.name) for c in copy.key)


def _row(copy: CopyPlan, prefix: str) -> str:
    """The key as a row of casts of the parameters `prefix0`, `prefix1`, …"""
    return ", ".join(cast(f"%({prefix}{i})s", c) for i, c in enumerate(copy.key))


def _params(prefix: str, values: tuple[str, ...] | None) -> dict[str, str]:
    return {f"{prefix}{i}": v for i, v in enumerate(values or ())}


def fill(ctx: Context, copy: CopyPlan, throttle: Throttle, progress: Progress) -> int:
    """Copy the table into the shadow, one batch of keys per transaction; rows copied."""
    table = copy.table
    key = key_names(copy)
    done, lower = 0, None
    while True:

        def batch(
            conn: psycopg.Connection[Any], lower: tuple[str, ...] | None = lower
        ) -> tuple[tuple[str, ...] | None, int]:
            no_row_security(conn)
            after = f"({key}) > ({_row(copy, 'lo')})" if lower else "true"
            bound = conn.execute(
                sql.SQL(Q["fill_bound"]).format(
                    key_text=_key_text(copy), table=sql.SQL(table.qualified),
                    after=sql.SQL(after), key=sql.SQL(key),
                ),
                {"skip": throttle.batch_size - 1, **_params("lo", lower)},
            ).fetchone()  # fmt: skip
            upper = tuple(bound) if bound else None
            within = [after] + ([f"({key}) <= ({_row(copy, 'hi')})"] if upper else [])
            cur = conn.execute(
                sql.SQL(Q["fill_batch"]).format(
                    shadow=sql.SQL(table.shadow), columns=sql.SQL(", ".join(copy.columns)),
                    expressions=sql.SQL(", ".join(copy.expressions)),
                    table=sql.SQL(table.qualified), range=sql.SQL(" AND ".join(within)),
                ),
                {**_params("lo", lower), **_params("hi", upper)},
            )  # fmt: skip
            return upper, cur.rowcount

        upper, rows = ctx.transaction(batch)
        done += rows
        progress("fill", done, max(table.rows_estimate, done))
        if upper is None:
            return done
        lower = upper
        between(ctx, throttle)


def no_row_security(conn: psycopg.Connection[Any]) -> None:
    """Row security never filters the copy: a policy that would is an error instead."""
    conn.execute("SET LOCAL row_security = off")


def between(ctx: Context, throttle: Throttle) -> None:
    """The pause between two batches, then wait while a streaming standby lags too far."""
    if throttle.pause_s:
        time.sleep(throttle.pause_s)
    if throttle.max_lag_s is None:
        return
    while True:
        lag = topology.replica_lag_s(ctx.conn.cursor())
        ctx.conn.rollback()
        if lag <= throttle.max_lag_s:
            return
        time.sleep(min(1.0, lag - throttle.max_lag_s))
