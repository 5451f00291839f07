"""Change capture and replay: triggers on the table log the key of every row a writer
changes (one entry holding both keys when an UPDATE moves a row to another key), and the
replay takes entries off the log, deletes the shadow's rows of those keys and copies the live
rows of those keys as they are now — idempotent whatever order the changes and the copy met
in; an UPDATE that set a column to NULL is just the row as it now is."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote
from queueguard.engine.online.rebuild.catalog import Q, Table
from queueguard.engine.online.rebuild.copy import (
    CopyPlan,
    Progress,
    Throttle,
    between,
    cast,
    key_names,
    no_row_security,
)

#: the largest batch a replay takes when a unique index makes it take more
_MOST = 10_000_000


def _slots(table: Table, prefix: str) -> list[str]:
    """The log's columns for the key (`k`) or the key before a move (`o`)."""
    return [f"{prefix}{i}" for i in range(len(table.key))]


def capture(conn: psycopg.Connection[Any], table: Table) -> None:
    """The log and the triggers that fill it (SHARE ROW EXCLUSIVE on the table, briefly)."""
    key = [table.column(k) for k in table.key]
    keys, moved = _slots(table, "k"), _slots(table, "o")
    defs = [f"{s} {c.typed}" for s, c in zip(keys + moved, key + key, strict=True)]
    conn.execute(sql.SQL(Q["log_create"]).format(columns=sql.SQL(",\n    ".join(defs))))
    conn.execute(
        sql.SQL(Q["capture_function"]).format(
            keys=sql.SQL(", ".join(keys)), moved=sql.SQL(", ".join(moved)),
            old=sql.SQL(", ".join(f"OLD.{quote(c.name)}" for c in key)),
            new=sql.SQL(", ".join(f"NEW.{quote(c.name)}" for c in key)),
        )
    )  # fmt: skip
    conn.execute(sql.SQL(Q["capture_triggers"]).format(table=sql.SQL(table.qualified)))


def _logged_text(copy: CopyPlan) -> sql.Composable:
    slots = _slots(copy.table, "k") + _slots(copy.table, "o")
    return sql.SQL(", ".join(f"{s}::text" for s in slots))


def replay_batch(conn: psycopg.Connection[Any], copy: CopyPlan, limit: int) -> int:
    """Replay up to `limit` logged changes in the caller's transaction; how many were taken."""
    no_row_security(conn)
    table = copy.table
    taken = conn.execute(
        sql.SQL(Q["replay_take"]).format(key_text=_logged_text(copy)), {"limit": limit}
    ).fetchall()
    if not taken:
        return 0
    width = len(copy.key)
    keys = {
        tuple(half)
        for row in taken
        for half in (row[:width], row[width:])
        if any(v is not None for v in half)
    }
    shadow = sql.SQL(table.shadow)
    if any(all(v is None for v in r) for r in taken):  # a TRUNCATE: nothing before it counts
        conn.execute(sql.SQL(Q["replay_truncate"]).format(shadow=shadow))
    if not keys:
        return len(taken)
    slots = [f"k{i}" for i in range(len(copy.key))]
    arrays = sql.SQL(", ".join(f"%({s})s::text[]" for s in slots))
    logged = sql.SQL(
        ", ".join(
            f"{cast(f'u.{s}', c)} AS {quote(c.name)}" for s, c in zip(slots, copy.key, strict=True)
        )
    )
    params = {s: [k[i] for k in keys] for i, s in enumerate(slots)}
    parts = {
        "shadow": shadow,
        "arrays": arrays,
        "slots": sql.SQL(", ".join(slots)),
        "logged_key": logged,
    }
    conn.execute(
        sql.SQL(Q["replay_delete"]).format(
            shadow_key=sql.SQL(key_names(copy)),
            shadow_key_expressions=sql.SQL(", ".join(copy.shadow_key)),
            alias=sql.SQL(quote(table.name)), **parts,
        ),
        params,
    )  # fmt: skip
    conn.execute(
        sql.SQL(Q["replay_insert"]).format(
            columns=sql.SQL(", ".join(copy.columns)),
            expressions=sql.SQL(", ".join(copy.expressions)),
            table=sql.SQL(table.qualified), key=sql.SQL(key_names(copy)), **parts,
        ),
        params,
    )  # fmt: skip
    return len(taken)


@dataclass
class Pace:
    """What the replays took, to size the swap's: logged changes, and seconds, of the batches
    since the last index build (the cost of a change grows with each index it goes into)."""

    rows: int = 0
    seconds: float = 0.0

    def per_row_s(self) -> float | None:
        return self.seconds / self.rows if self.rows else None


def replay(
    ctx: Context,
    copy: CopyPlan,
    throttle: Throttle,
    progress: Progress,
    *,
    until: int | None = None,
    pace: Pace | None = None,
) -> int:
    """Replay batch after batch until a batch comes back short: the log is (nearly) empty;
    with `until`, until a batch takes at most that many changes, or takes no fewer than the
    one before (the writers keep the log at that size: more rounds would not shrink it).

    Each batch reads the log and the table in one snapshot (REPEATABLE READ), taking the
    oldest entries first. A batch that takes every entry its snapshot sees leaves the shadow
    equal to the table as of that snapshot, so its unique indexes hold. A batch cut short by
    its limit can re-read a row whose move to a key (or change of a unique value) it sees
    while the entry that frees the old one lies past the limit: the shadow's unique index
    then rejects the batch, which is taken again with four times the limit — at worst the
    whole log, which always fits."""
    done, limit, before = 0, throttle.batch_size, None
    while True:

        def batch(conn: psycopg.Connection[Any], limit: int = limit) -> int:
            return replay_batch(conn, copy, limit)

        began = time.perf_counter()
        try:
            taken = _repeatable_read(ctx, batch)
        except (psycopg.errors.UniqueViolation, psycopg.errors.ExclusionViolation):
            if limit >= _MOST:
                raise
            limit *= 4
            continue
        if pace is not None and taken:
            pace.rows += taken
            pace.seconds += time.perf_counter() - began
        done += taken
        progress("replay", done, None)
        if taken < limit and (
            until is None or taken <= until or (before is not None and taken >= before)
        ):
            return done
        before = taken if taken < limit else None
        limit = throttle.batch_size
        between(ctx, throttle, progress)


def _repeatable_read(ctx: Context, work: Callable[[psycopg.Connection[Any]], int]) -> int:
    conn = ctx.conn
    before = conn.isolation_level
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    try:
        return ctx.transaction(work)
    finally:
        conn.isolation_level = before
