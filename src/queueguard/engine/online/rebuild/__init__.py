"""The rebuild: the online form of a statement that rewrites a table (`ALTER COLUMN … TYPE`,
`ADD COLUMN … GENERATED ALWAYS AS (…) STORED`, a volatile default, a serial or identity
column, several of those in one statement). A copy of the table with the statement applied
— the shadow — is filled from the table while the application keeps writing, its changes
captured and replayed, its indexes built after the fill, analysed, and swapped in by one
short transaction. The end state is the plain statement's, name for name.

Phases, as `on_progress(phase, rows done, rows total)` reports them:

- capture: the table's DDL from `pg_dump --schema-only --table`, a probe of what the
  statement keeps, the shadow built empty under the table's name in `queueguard_shadow`
  with the statement applied (`rebuild_shadow`), then the triggers that log changed keys;
- fill: the table copied in the order of its pages, one range per transaction
  (`rebuild_copy`), then analysed: every query on the shadow after it is planned on what
  it holds;
- indexes: the key's index first, a replay (the fill read pages at different moments: a row
  a writer moved meanwhile can be in the shadow twice until then — one copy per key is kept
  for the key's index, the replay puts the live row back), then the other
  indexes and the constraints they back, built on the filled shadow nobody reads (with more
  maintenance_work_mem, not more parallel workers), each followed by a replay of the changes
  logged during its build;
- replay: logged changes replayed until the log is nearly empty (`rebuild_replay`); ANALYZE;
- swap: the log replayed down to what the swap replays in SWAP_REPLAY_S at the pace the
  last replays measured, then the last changes replayed and the shadow put in the table's
  place under ACCESS EXCLUSIVE (`rebuild_swap`); after it, foreign keys it added NOT VALID
  are validated, and the statement's last transaction (the runner's bookkeeping in it)
  drops the old table.

A run that stops anywhere before the swap leaves a shadow that a rerun removes and builds
again (`abort` removes it too, the table as before); the swap commits whole; after it a
ledger says what is left, and a rerun does only that. Modules: `rebuild_catalog` (facts,
names), `rebuild_refusals`, `rebuild_statement`, `rebuild_ddl` (pg_dump's statements and
their moments), `rebuild_text`, `rebuild_placeholders`, `rebuild_shadow`, `rebuild_copy`,
`rebuild_replay`, `rebuild_swap`; SQL in `queueguard/engine/online/rebuild/sql/rebuild.sql`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg

from queueguard.engine import topology
from queueguard.engine.apply.session import Limits
from queueguard.engine.online.choose import Form
from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote, unqualified
from queueguard.engine.online.rebuild import shadow as rebuild_shadow
from queueguard.engine.online.rebuild import swap as rebuild_swap
from queueguard.engine.online.rebuild.catalog import (
    CAPTURE_TRIGGERS,
    LOG,
    OLD_SCHEMA,
    SHADOW_SCHEMA,
    Q,
    describe,
    find,
    fingerprint,
    schema_exists,
)
from queueguard.engine.online.rebuild.copy import (
    SHADOW_MEMORY,
    Throttle,
    analyze,
    deduplicate,
    fill,
    hold_for_standbys,
)
from queueguard.engine.online.rebuild.ddl import INDEXES, Step, dump, split
from queueguard.engine.online.rebuild.refusals import refusals
from queueguard.engine.online.rebuild.replay import Pace, capture, replay
from queueguard.engine.online.rebuild.shadow import Build
from queueguard.engine.online.rebuild.statement import parse
from queueguard.engine.online.rebuild.swap import Pending
from queueguard.errors import MigrationError, RebuildRefused

__all__ = ["Throttle", "abort", "refusals", "run"]

Progress = Callable[[str, int, int | None], None]
#: how often the swap lets go to replay more when the log outgrew it, before it replays
#: everything under its lock anyway
SWAP_ATTEMPTS = 5
#: how long the swap waits for an anti-wraparound autovacuum of its tables to end
WRAPAROUND_WAIT_S = 30.0
#: the time the swap may spend replaying under its lock (at the pace the replays measured)
SWAP_REPLAY_S = 0.25
#: …and at least this many changes, however slow a change was
SWAP_REPLAY_MIN = 20


def run(
    ctx: Context,
    form: Form,
    throttle: Throttle = Throttle(),  # noqa: B008 (frozen: one shared default is safe)
    on_progress: Progress | None = None,
) -> None:
    progress: Progress = on_progress or (lambda phase, done, total: None)
    if throttle.max_lag_s is not None:  # this run's own watch of the standbys' lag
        throttle = replace(throttle, watch=topology.LagWatch())
    pending = ctx.transaction(rebuild_swap.ledger)
    if pending is not None:
        if pending.statement != form.sql:
            raise MigrationError(
                f"rebuild: a rebuild of {pending.relation} swapped and has its end left (the "
                f"validations, the old table's drop), but this is another statement: "
                f"{form.sql[:80]}"
            )
        _complete(ctx, pending)
        return
    ctx.transaction(lambda conn: _remove(conn, form.table))
    reasons = ctx.transaction(lambda conn: refusals(conn, form))
    if reasons:
        raise RebuildRefused(f"rebuild of {form.table} refused: " + "; ".join(reasons))
    build = _capture(ctx, form, progress)
    fill(ctx, build.copy, throttle, progress)
    # the key's index first: the replay finds rows by it, and a replay must come before the
    # other unique indexes. The fill read each page at its own moment, so a row a writer
    # moved during the fill can be in the shadow twice (under one key or, moved to another
    # key, under two) until the replay; one copy per key is kept for the key's index.
    key, others = _key_first(build)
    progress("indexes", 0, len(others) + 1)
    # what was filled is analysed before it is queried: a plan made on no statistics at all
    # depends on luck (autovacuum may or may not have sampled the shadow by now)
    ctx.transaction(lambda conn: analyze(conn, build.copy))
    ctx.transaction(lambda conn: deduplicate(conn, build.copy))
    _build_index(ctx, key)
    replay(ctx, build.copy, throttle, progress)
    pace = Pace()
    for i, step in enumerate(others):
        # said before the build too: the line shows the build, not the replay before it
        progress("indexes", i + 1, len(others) + 1)
        _build_index(ctx, step)
        progress("indexes", i + 2, len(others) + 1)
        # after each build, not once after all: a change replayed now goes into the indexes
        # built so far only, and the log never holds more than one build's worth of changes
        # (on a table of 55 indexes, all of them left for the end kept the replay behind
        # its writers); the last build's replay measures the pace the swap is sized by
        pace = Pace()
        replay(ctx, build.copy, throttle, progress, pace=pace)
    ctx.transaction(lambda conn: conn.execute(f"ANALYZE {build.table.shadow}"))
    _swap(ctx, build, throttle, progress, pace)


def _key_first(build: Build) -> tuple[Step, list[Step]]:
    """The statement that creates the key's index, and the rest of the indexes' moment."""
    steps = build.steps(INDEXES)
    name = build.table.key_index
    for i, step in enumerate(steps):
        if step.needs is not None and step.needs[1] == name:
            return step, steps[:i] + steps[i + 1 :]
    raise MigrationError(f"rebuild: the dump of {build.table.qualified} builds no index {name}")


def _build_index(ctx: Context, step: Step) -> None:
    def build(conn: psycopg.Connection[Any]) -> None:
        build_settings(conn)
        rebuild_shadow.execute(conn, step, step.shadow)

    ctx.transaction(build)


def build_settings(conn: psycopg.Connection[Any]) -> None:
    """A shadow index build's settings, for its transaction: SHADOW_MEMORY of
    maintenance_work_mem at least, and no more parallel workers than the server's own
    maintenance_work_mem would give the build (rebuild.sql, `shadow_build_workers`)."""
    conn.execute(Q["shadow_build_workers"])
    conn.execute(Q["shadow_index_memory"], {"memory": SHADOW_MEMORY})


def _capture(ctx: Context, form: Form, progress: Progress) -> Build:
    """The shadow built and the capture triggers in place."""
    statement = parse(form.sql)
    table = ctx.transaction(lambda conn: describe(conn, form.table))
    # taken before the dump: DDL between the two shows as a change at the swap (at worst a
    # needless rerun), never as a change the dump has and the check misses
    definition = ctx.transaction(lambda conn: fingerprint(conn, table))
    script = dump(ctx.conn, table, ctx.limits.lock_timeout_ms)
    ddl = split(script, table)
    survivors = ctx.probe(lambda conn: rebuild_shadow.probe(conn, table, ddl, statement))
    build = ctx.transaction(
        lambda conn: rebuild_shadow.create(conn, table, ddl, statement, survivors, definition)
    )
    progress("capture", 1, 2)
    ctx.transaction(lambda conn: capture(conn, table))
    progress("capture", 2, 2)
    return build


def swap_limit(pace: Pace) -> int:
    """The most logged changes the swap replays under its lock: what the replays since the
    last index build took SWAP_REPLAY_S for (a change costs a row in every index: on a table
    of 55 indexes under load, 3–5 ms each — a fixed 10 000 held the writers for seconds)."""
    per_row = pace.per_row_s()
    if per_row is None:
        return rebuild_swap.SWAP_REPLAY_LIMIT
    return max(SWAP_REPLAY_MIN, min(rebuild_swap.SWAP_REPLAY_LIMIT, int(SWAP_REPLAY_S / per_row)))


def _swap(ctx: Context, build: Build, throttle: Throttle, progress: Progress, pace: Pace) -> None:
    """The swap, the log replayed down to what it replays under its lock first; then the
    validations it leaves and the old table's drop, the last of those transactions the
    statement's end."""
    t = build.table
    _wait_for_wraparound(ctx, [t.qualified, t.shadow, LOG])
    progress("swap", 0, 1)
    locked = [0.0]  # when the swap's ACCESS EXCLUSIVE was granted
    for attempt in range(SWAP_ATTEMPTS + 1):
        # never swap while a standby lags past --max-lag (before the replay, so the wait
        # does not let the log grow past what the swap replays under its lock): its ACCESS
        # EXCLUSIVE is replayed on each standby too, where queries on the table then wait
        # for it (or are cancelled after max_standby_streaming_delay)
        hold_for_standbys(ctx, throttle, progress)
        replay(ctx, build.copy, throttle, progress, until=swap_limit(pace), pace=pace)
        limit = None if attempt == SWAP_ATTEMPTS else swap_limit(pace)

        def swap(conn: psycopg.Connection[Any], limit: int | None = limit) -> list[str]:
            return rebuild_swap.swap(conn, build, limit, locked)

        try:
            validations = ctx.transaction(swap)
        except rebuild_swap.Behind:
            continue
        # how long the lock was held, to the commit: what readers and writers waited at most
        held = time.perf_counter() - locked[0]
        ctx.ran.append((f"rebuild: swap of {t.qualified} (lock held)", held, True))
        break
    progress("swap", 1, 1)
    _complete(ctx, Pending(t.qualified, build.statement.sql, tuple(validations)))


def _complete(ctx: Context, pending: Pending) -> None:
    _wait_for_wraparound(ctx, [f"{OLD_SCHEMA}.{quote(unqualified(pending.relation))}"])
    rebuild_swap.complete(ctx, pending)


def _wait_for_wraparound(ctx: Context, relations: list[str]) -> None:
    deadline = time.monotonic() + WRAPAROUND_WAIT_S
    while True:
        busy = ctx.transaction(lambda conn: rebuild_swap.wraparound_vacuums(conn, relations))
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise rebuild_swap.blocked(busy)
        time.sleep(1.0)


def abort(conn: psycopg.Connection[Any], form_or_table: Form | str) -> list[str]:
    """Remove what an unfinished rebuild left: the shadow, its log, the capture triggers;
    the table is as it was before. What was removed (empty: nothing was there). After a
    swap there is nothing to undo (MigrationError): a rerun finishes the statement instead."""
    table = form_or_table.table if isinstance(form_or_table, Form) else form_or_table
    with conn.transaction():
        # the caller's lock_timeout, else the runner's: DROP TRIGGER takes ACCESS EXCLUSIVE
        setting = conn.execute("SELECT current_setting('lock_timeout')").fetchone()
        if setting is None or setting[0] in ("0", "0ms"):
            conn.execute(f"SET LOCAL lock_timeout = {Limits().lock_timeout_ms}")
        pending = rebuild_swap.ledger(conn)
        if pending is not None:
            raise MigrationError(
                f"rebuild of {pending.relation}: the swap committed, nothing to undo; only its "
                "end is left (foreign key validations, the old table's drop): rerun the "
                "upgrade to finish it"
            )
        return _remove(conn, table)


def _remove(conn: psycopg.Connection[Any], table: str) -> list[str]:
    removed: list[str] = []
    live = find(conn, table)
    if live is not None:
        present = {r[0] for r in conn.execute(Q["trigger_names"], {"oid": live.oid})}
        for name in CAPTURE_TRIGGERS:
            if name in present:
                conn.execute(f"DROP TRIGGER {name} ON {live.qualified}")
                removed.append(f"dropped trigger {name} on {live.qualified}")
    for schema in (SHADOW_SCHEMA, OLD_SCHEMA):
        if schema_exists(conn, schema):
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            removed.append(f"dropped schema {schema} (the shadow and its log)")
    return removed
