"""The online probe's checks around expand (`probe`): expand goes on beside another index
build (another schema's table) and replaces the invalid index a failed build left; after
expand, the window is [3, 4], the marker index serves the directive batches and the remaining
counts are right; a v0.4-held queue refuses a v0.3 load, other queues do not. (An interrupted
expand, aborted: `probe_abort`.)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import psycopg
import psycopg.sql

from queueguard.errors import QueueguardError, RolloutRefused
from queueguard.pg.connect import connect, connection
from queueguard.queue_schema.legacy.workers import LegacyQueue, V03Worker
from queueguard.queue_schema.online import batches, phases
from queueguard.queue_schema.online.probe_common import (
    FREE,
    HELD,
    KNOBS,
    MOMENT_S,
    NAMESPACE,
    OTHER,
    quiet,
)
from queueguard.queue_schema.online.report import OnlineReport
from queueguard.queue_schema.online.session import Session
from queueguard.revisions import SetFacts
from queueguard.stores.postgres import PostgresStore


def expand_beside_another_build(
    dsn: str, session: Session, migrations: SetFacts, report: OnlineReport
) -> list[str]:
    """expand, while a CREATE INDEX CONCURRENTLY of another index (another schema's table)
    is in progress: expand must tell it from a build of its own marker index and go on.
    The other build waits for a writer's transaction that ends once expand has returned."""
    writer = connect(dsn)
    builder = connect(dsn, autocommit=True)
    build = threading.Thread(
        target=_build_quietly,
        args=(
            builder,
            f"CREATE INDEX CONCURRENTLY other_build ON {OTHER}.queues (protocol4_range)",
        ),
        daemon=True,
    )
    try:
        writer.execute(f"LOCK TABLE {OTHER}.queues IN ROW EXCLUSIVE MODE")
        build.start()
        if not _building(dsn, builder.info.backend_pid):
            return ["the other index build never showed in pg_stat_progress_create_index"]
        try:
            phases.expand(session, migrations, report, quiet)
        except RolloutRefused as exc:
            return [f"expand refused while another index (not the marker) was being built: {exc}"]
        return []
    finally:
        writer.rollback()
        writer.close()
        build.join(timeout=30)
        builder.close()


def _build_quietly(builder: Any, statement: str) -> None:
    with contextlib.suppress(Exception):
        builder.execute(statement)


def _building(dsn: str, pid: int, timeout_s: float = MOMENT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    with connection(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute(
                "SELECT 1 FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
            ).fetchone():
                return True
            time.sleep(0.01)
    return False


def failed_build(dsn: str) -> None:
    """Leave what a CREATE INDEX CONCURRENTLY that failed half-way leaves: an invalid index of
    the marker's name (here a wrong one). expand must replace it: `expanded` then finds the
    rows through the right one. Marking an index invalid takes a superuser; other roles skip
    this part."""
    with connection(dsn) as conn:
        superuser = conn.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if not superuser or not superuser[0]:
            return
        conn.execute("CREATE INDEX queueguard_rollout_pending_directive ON tasks (task_id)")
        conn.execute(
            "UPDATE pg_index SET indisvalid = false "
            "WHERE indexrelid = 'queueguard_rollout_pending_directive'::regclass"
        )
        conn.commit()


def expanded(dsn: str, session: Session, before: dict[str, Any]) -> list[str]:
    """The window, the marker index and the remaining counts, right after expand."""
    found = []
    with connection(dsn) as conn:
        window = conn.execute("SELECT min_protocol, max_protocol FROM runtime_protocol").fetchall()
        # The rows still without a directive are found through the marker index (an index
        # whose predicate does not match cannot serve the count, whatever it costs).
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + session.q("migrate.remaining")).fetchone()
        # …and so can each directive batch's: without the primary key (dropped in this
        # transaction, rolled back) a batch whose predicate does not imply the index's has
        # only the table to scan, every batch (the plan's choice between two usable indexes
        # would depend on the data)
        conn.execute("SET lock_timeout = '5s'")
        for (pkey,) in conn.execute(_PRIMARY_KEY, ("tasks",)).fetchall():
            conn.execute(
                psycopg.sql.SQL("ALTER TABLE tasks DROP CONSTRAINT {}").format(
                    psycopg.sql.Identifier(pkey)
                )
            )
        batch_plan = conn.execute(
            "EXPLAIN (FORMAT JSON) " + session.q("migrate.directive_batch"),
            {"after_queue": "", "after_id": -1, "limit": KNOBS.batch_size},
        ).fetchone()
        conn.rollback()
    if window != [(3, 4)]:
        found.append(f"after expand the protocol window is {window}, not [(3, 4)]")
    if "queueguard_rollout_pending_directive" not in json.dumps(plan):
        found.append("the rows without a directive are not found through the marker index")
    if "queueguard_rollout_pending_directive" not in json.dumps(batch_plan):
        found.append("a directive batch does not find its rows through the marker index")
    directives = sum(
        1
        for q in before["queues"]
        if not q["physicalQueue"].endswith("@auto")
        for t in q["tasks"]
        if isinstance(t["data"].get("task"), dict) and "versionDirective" not in t["data"]["task"]
    )
    relocations = sum(
        len(q["tasks"]) for q in before["queues"] if q["physicalQueue"].endswith("@auto")
    )
    counted = batches.remaining(session)
    if counted != (directives, relocations):
        found.append(f"remaining counts {counted}, expected {(directives, relocations)}")
    with connection(dsn) as conn:  # migrate has not run: its counters start from nothing
        record = conn.execute(
            "SELECT rows_done, migrate_seconds FROM queueguard_rollout"
        ).fetchall()
    if record != [(0, 0.0)]:
        found.append(f"before migrate the rollout record counts (rows, seconds) {record}, not 0")
    return found


_PRIMARY_KEY = (
    "SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'"
)


def window(dsn: str, host: PostgresStore) -> list[str]:
    """A v0.4 load marks its queue; v0.3 loads of it are refused, of others not."""
    found = []
    state = host.load_queue(HELD)
    with V03Worker(dsn, host_id="verify-probe") as old:
        old.start()
        try:
            old.load(LegacyQueue(NAMESPACE, HELD.task_queue))
            found.append("a v0.3 host loaded a queue a v0.4 host holds")
        except QueueguardError as exc:
            if "queue_owned_by_protocol_4" not in str(exc):
                found.append(f"a v0.3 load of a v0.4 queue failed otherwise: {exc}")
        try:
            old.load(FREE)
        except QueueguardError as exc:
            found.append(f"a v0.3 load of a free queue was refused: {exc}")
    again = host.queue_state(HELD)
    if again is None or again.range_id != state.range_id:
        found.append(f"the v0.4 host's range moved: {state} -> {again}")
    return found
