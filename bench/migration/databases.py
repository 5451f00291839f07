"""The databases the migration benchmark upgrades: a v0.3 one (legacy `@auto` backlogs,
default and pinned queues, History) and a v0.2 spool, built set-based with generate_series."""

from __future__ import annotations

import sys
import time

import psycopg

from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema.runner import upgrade


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _payload(run_expr: str, workflow_expr: str, kind_expr: str) -> str:
    """SQL for a task payload in the released shape (same since 001)."""
    return (
        "jsonb_build_object('task', jsonb_build_object("
        f"'namespace', 'bench', 'workflowId', {workflow_expr}, 'runId', {run_expr}, "
        f"'kind', {kind_expr}, 'scheduledEventId', 5, 'attempt', 1), "
        "'enqueuedAt', '2024-05-01T12:00:00Z')"
    )


def _queue_key(q: str, version_suffix: str) -> str:
    """SQL for `bench/family-<q>/<type>/<partition>[@version]` (all components URL-safe)."""
    return (
        f"'bench/family-' || {q} || '/' || "
        f"(CASE WHEN {q} % 2 = 0 THEN 'workflow' ELSE 'activity' END) || '/' || ({q} % 4)::text"
        f" || '{version_suffix}'"
    )


def build_v3(databases: ScratchDatabases, rows: int, queues: int) -> str:
    """A v0.3 database with the benchmark's data; returns its DSN."""
    per_queue = rows // queues
    kept = rows // 10
    half = queues // 2
    per_kept_queue = max(kept // 2 // max(half, 1), 1)
    dsn = databases.create()
    upgrade(dsn, to="003", progress=False)
    kind = "CASE WHEN q % 2 = 0 THEN 'workflow' ELSE 'activity' END"
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        # Legacy auto backlogs: run ids g = q * per_queue + i.
        auto_run = f"md5('run' || (q * {per_queue} + i))::uuid::text"
        conn.execute(
            f"""
            INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type,
                                     partition, version, range_id, ack_level, last_task_id)
            SELECT {_queue_key("q", "@auto")}, 'bench', 'family-' || q,
                   CASE WHEN q % 2 = 0 THEN 'workflow' ELSE 'activity' END, q % 4, 'auto',
                   3, 0, {per_queue}
            FROM generate_series(0, {queues - 1}) q;
            INSERT INTO tasks (physical_queue, task_id, data, created_at)
            SELECT {_queue_key("q", "@auto")}, i,
                   {_payload(auto_run, f"'wf-' || (q * {per_queue} + i)", kind)},
                   timestamptz '2024-05-01' + i * interval '1 ms'
            FROM generate_series(0, {queues - 1}) q, generate_series(1, {per_queue}) i;
            """
        )
        log(f"auto rows: {queues * per_queue} ({time.monotonic() - started:.1f}s)")
        # Default queues (destinations of the first half of the auto queues; every fifth has
        # a stale last_task_id) and pinned queues: run ids offset by `rows`.
        default_run = f"md5('run' || ({rows} + q * {per_kept_queue} + i))::uuid::text"
        pinned_run = f"md5('run' || ({rows + kept} + q * {per_kept_queue} + i))::uuid::text"
        conn.execute(
            f"""
            INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type,
                                     partition, version, range_id, ack_level, last_task_id)
            SELECT {_queue_key("q", "")}, 'bench', 'family-' || q,
                   CASE WHEN q % 2 = 0 THEN 'workflow' ELSE 'activity' END, q % 4, '',
                   7, 0, CASE WHEN q % 5 = 0 THEN {per_kept_queue} - 5 ELSE {per_kept_queue} END
            FROM generate_series(0, {half - 1}) q;
            INSERT INTO tasks (physical_queue, task_id, data, created_at)
            SELECT {_queue_key("q", "")}, i,
                   {_payload(default_run, "'wf-d-' || i", kind)},
                   timestamptz '2024-05-02' + i * interval '1 ms'
            FROM generate_series(0, {half - 1}) q, generate_series(1, {per_kept_queue}) i;
            INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type,
                                     partition, version, range_id, ack_level, last_task_id)
            SELECT {_queue_key("q", "@dep.build-1")}, 'bench', 'family-' || q,
                   CASE WHEN q % 2 = 0 THEN 'workflow' ELSE 'activity' END, q % 4,
                   'dep.build-1', 2, 0, {per_kept_queue}
            FROM generate_series(0, {half - 1}) q;
            INSERT INTO tasks (physical_queue, task_id, data, created_at)
            SELECT {_queue_key("q", "@dep.build-1")}, i,
                   {_payload(pinned_run, "'wf-p-' || i", kind)},
                   timestamptz '2024-05-03' + i * interval '1 ms'
            FROM generate_series(0, {half - 1}) q, generate_series(1, {per_kept_queue}) i;
            """
        )
        log(f"default + pinned rows: {2 * half * per_kept_queue}")
        # One execution per task row; every hundredth run is unknown to History.
        conn.execute(
            f"""
            INSERT INTO executions (run_id, namespace, workflow_id, status,
                                    versioning_behavior, deployment_version)
            SELECT md5('run' || g)::uuid, 'bench', 'wf-' || g, 'running',
                   CASE WHEN g <= {rows} THEN 'auto_upgrade'
                        WHEN g <= {rows + kept} THEN 'unversioned' ELSE 'pinned' END,
                   CASE WHEN g <= {rows} THEN 'dep.build-2'
                        WHEN g <= {rows + kept} THEN NULL ELSE 'dep.build-1' END
            FROM generate_series(1, {rows + 2 * kept}) g
            WHERE g % 100 <> 0;
            """
        )
        conn.execute("VACUUM ANALYZE")
        total = conn.execute("SELECT count(*) FROM tasks").fetchone()
    log(
        f"v0.3 database built: {total[0] if total else 0} task rows "
        f"({time.monotonic() - started:.1f}s)"
    )
    return dsn


def build_v2(databases: ScratchDatabases, rows: int, queues: int) -> str:
    """A v0.2 database whose spool holds `rows` rows (auto, default, pinned, odd names)."""
    dsn = databases.create()
    upgrade(dsn, to="002", progress=False)
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"""
            INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data,
                               created_at)
            SELECT CASE WHEN g % 7 = 0 THEN 'ns with space/é' ELSE 'bench' END,
                   'family-' || (g % {queues}),
                   CASE WHEN g % 2 = 0 THEN 'workflow' ELSE 'activity' END,
                   g % 4,
                   CASE g % 3 WHEN 0 THEN '' WHEN 1 THEN 'auto' ELSE 'dep.build-1' END,
                   {_payload("md5('run' || g)::uuid::text", "'wf-' || g", "'workflow'")},
                   timestamptz '2024-05-01' + g * interval '1 ms'
            FROM generate_series(1, {rows}) g;
            """
        )
        conn.execute("VACUUM ANALYZE")
    log(f"v0.2 database built: {rows} spool rows ({time.monotonic() - started:.1f}s)")
    return dsn
