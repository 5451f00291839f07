"""The 003 database the upgrade scenarios migrate (legacy `@auto` queues, History, counters),
and when an uninterrupted upgrade of it reaches 004 (where their kills aim)."""

from __future__ import annotations

import subprocess
import time

from bench.common.commands import QUEUEGUARD
from bench.common.databases import query
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema.runner import upgrade

FAMILIES = 10


def seed_v3(dsn: str, rows: int, families: int = FAMILIES) -> None:
    """`rows` task rows in the v0.3 shape over `families` default queues and their legacy
    auto siblings, half in the auto ones; History for 90 % of them (the rest get the
    unversioned directive), stale counters on some queues."""
    per_queue = max(1, rows // (2 * families))
    queue = "'bulk/f' || f || '/workflow/0' || CASE WHEN v = 'auto' THEN '@auto' ELSE '' END"
    # ':' keeps (family, row) pairs apart once there are 10+ families (f1 row 23, f12 row 3)
    run = "md5(f || v || ':' || i)::uuid"
    query(
        dsn,
        f"""
        INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition,
                                 version, range_id, ack_level, last_task_id)
        SELECT {queue}, 'bulk', 'f' || f, 'workflow', 0, v, 2, 0,
               CASE WHEN f % 3 = 0 THEN {per_queue} - 5 ELSE {per_queue} END
        FROM generate_series(1, {families}) f, unnest(ARRAY['', 'auto']) v;
        INSERT INTO tasks (physical_queue, task_id, data, created_at)
        SELECT {queue}, i, jsonb_build_object('task', jsonb_build_object(
                   'namespace', 'bulk', 'workflowId', 'wf-' || f || v || ':' || i,
                   'runId', {run}::text, 'kind', 'workflow', 'scheduledEventId', 1,
                   'attempt', 1), 'enqueuedAt', '2024-05-01T12:00:00Z'),
               '2024-05-01 12:00:00+00'::timestamptz + i * interval '1 second'
        FROM generate_series(1, {families}) f, unnest(ARRAY['', 'auto']) v,
             generate_series(1, {per_queue}) i;
        INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior,
                                created_at)
        SELECT {run}, 'bulk', 'wf-' || f || v || ':' || i, 'running',
               CASE WHEN v = 'auto' THEN 'auto_upgrade' ELSE 'unversioned' END,
               '2024-05-01 12:00:00+00'
        FROM generate_series(1, {families}) f, unnest(ARRAY['', 'auto']) v,
             generate_series(1, {per_queue}) i
        WHERE i % 10 <> 0;
        INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind)
        SELECT run_id, 1, 'workflow' FROM executions;
        ANALYZE;
        """,
    )


def build_template(databases: ScratchDatabases, rows: int, families: int = FAMILIES) -> str:
    """A new database at 003 holding `seed_v3`'s rows (to clone: `CREATE DATABASE … TEMPLATE`)."""
    dsn = databases.create()
    upgrade(dsn, to="003", progress=False)
    seed_v3(dsn, rows, families)
    return dsn


def first_step_at(dsn: str) -> tuple[float, float]:
    """(seconds until 004's first step reported, seconds until exit) of one upgrade."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [QUEUEGUARD, "upgrade", "--dsn", dsn],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = None
    for line in proc.stderr:
        if first is None and line.strip().startswith("004 "):
            first = time.monotonic() - started
    assert proc.wait(600) == 0
    total = time.monotonic() - started
    return (first if first is not None else 0.0), total
