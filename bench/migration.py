"""Benchmark of the data migrations: `queueguard upgrade` against the minimal hand-written SQL.

What it does (results: docs/benchmarks.md, "Migration"):

1. builds a v0.3 database (`queueguard upgrade --to 003`, then set-based `generate_series`
   inserts): `--rows` legacy `@auto` task rows over `--queues` queues, plus `--rows / 10`
   default and pinned rows (half each; half of the `@auto` queues relocate into a default
   queue that already has rows, a fifth of those with a stale `last_task_id`), and one
   execution per task row (1 % of the runs are unknown to History);
2. clones it twice with `CREATE DATABASE … TEMPLATE`;
3. on clone A times `queueguard upgrade --dsn …` 003→004 as a whole process (Python
   start-up, Alembic, the guard's audit queries, the plan, the data steps, commit), with its
   peak RSS (`os.wait4`) and, from a sampler polling `pg_locks`, the longest time any ACCESS
   EXCLUSIVE lock on task_queues / tasks / runtime_protocol was held;
4. on clone B times the minimal set-based SQL performing the same transformation (one UPDATE
   stamping kept rows' directives, one INSERT … SELECT with row_number() for relocated rows,
   one DELETE, the metadata updates, the fence) in one transaction;
5. checks both clones hold the same tasks, task_queues and runtime_protocol contents;
6. optionally (`--v2-rows`, default `--rows`) times 002→003 on a v0.2 spool of that size.

Run from the repository root:

    /work/venv/bin/python bench/migration.py            # full size (1,000,000 rows)
    /work/venv/bin/python bench/migration.py --rows 100000 --v2-rows 0

The server is the one tests use (`QUEUEGUARD_PG`, embedded by default) or `--admin-dsn`.
Scratch databases are dropped at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from queueguard.pg import scratch
from queueguard.upgrade.runner import upgrade

ROOT = Path(__file__).resolve().parent.parent
QUEUEGUARD = Path(sys.executable).with_name("queueguard")
LOCKED_TABLES = ("task_queues", "tasks", "runtime_protocol")
UNVERSIONED = '{"behavior": "unversioned", "deploymentVersion": null}'


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --- building the v0.3 database ---------------------------------------------------------


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


def build_v3(admin: str, rows: int, queues: int) -> str:
    """A v0.3 database with the benchmark's data; returns its DSN."""
    per_queue = rows // queues
    kept = rows // 10
    half = queues // 2
    per_kept_queue = max(kept // 2 // max(half, 1), 1)
    dsn = scratch.create_database(admin, prefix="qgbench")
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


def build_v2(admin: str, rows: int, queues: int) -> str:
    """A v0.2 database whose spool holds `rows` rows (auto, default, pinned, odd names)."""
    dsn = scratch.create_database(admin, prefix="qgbench")
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


# --- measuring -----------------------------------------------------------------------------


@dataclass
class LockSampler:
    """Polls pg_locks for ACCESS EXCLUSIVE locks the upgrade holds on our tables."""

    dsn: str
    interval_s: float = 0.005
    first_seen: dict[str, float] = field(default_factory=dict)
    last_seen: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def _run(self) -> None:
        query = """
            SELECT c.relname
            FROM pg_locks l
            JOIN pg_class c ON c.oid = l.relation
            JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
            WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND l.granted
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND l.pid <> pg_backend_pid()
        """
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                now = time.monotonic()
                for (name,) in conn.execute(query):
                    if name in LOCKED_TABLES:
                        self.first_seen.setdefault(name, now)
                        self.last_seen[name] = now
                time.sleep(self.interval_s)

    def longest_hold_s(self) -> float:
        holds = [self.last_seen[k] - self.first_seen[k] for k in self.first_seen]
        return max(holds, default=0.0)


@dataclass
class ProcessRun:
    wall_s: float
    max_rss_mb: float
    longest_exclusive_s: float
    stdout: str
    stderr: str


def run_upgrade_process(dsn: str, to: str) -> ProcessRun:
    """`queueguard upgrade` as its own process; wall time, peak RSS and lock holds."""
    sampler = LockSampler(dsn)
    sampler.start()
    time.sleep(0.05)
    # Without --json, so the per-step progress lines (stderr) say where the time goes.
    cmd = [str(QUEUEGUARD), "upgrade", "--dsn", dsn, "--to", to, "--lock-timeout", "5s"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        # wait4 reaps this child and returns its own rusage: ru_maxrss is its peak RSS (KiB).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    max_rss_kb = usage.ru_maxrss
    sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"upgrade failed ({proc.returncode}):\n{stderr}")
    return ProcessRun(wall, max_rss_kb / 1024, sampler.longest_hold_s(), stdout, stderr)


def minimal_sql() -> list[str]:
    """The minimal hand-written set-based 004, one statement per element."""
    directive = (
        f"CASE WHEN e.run_id IS NULL THEN '{UNVERSIONED}'::jsonb ELSE jsonb_build_object("
        "'behavior', e.versioning_behavior, 'deploymentVersion', e.deployment_version) END"
    )
    return [
        "LOCK TABLE task_queues, tasks, runtime_protocol IN ACCESS EXCLUSIVE MODE",
        # Kept rows: stamp the directive. A run matches on `run_id::text = runId` (hash join:
        # a non-uuid runId simply matches nothing); UPDATE cannot outer-join its own target,
        # hence the self-join on the primary key.
        f"""UPDATE tasks t
            SET data = jsonb_set(t.data, '{{task,versionDirective}}', k.directive)
            FROM (SELECT k.physical_queue, k.task_id, {directive} AS directive
                  FROM tasks k
                  JOIN task_queues q ON q.physical_queue = k.physical_queue
                                    AND q.version <> 'auto'
                  LEFT JOIN executions e ON e.run_id::text = k.data -> 'task' ->> 'runId') k
            WHERE t.physical_queue = k.physical_queue AND t.task_id = k.task_id""",
        # Missing destinations.
        """INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type,
                                   partition, version, range_id, ack_level, last_task_id)
           SELECT left(physical_queue, length(physical_queue) - 5), namespace, task_queue,
                  task_type, partition, '', 0, 0, 0
           FROM task_queues s
           WHERE version = 'auto' AND EXISTS (SELECT 1 FROM tasks t
                                              WHERE t.physical_queue = s.physical_queue)
           ON CONFLICT DO NOTHING""",
        # Relocated rows with their directives: fresh consecutive ids above both the
        # destination's last_task_id and its highest stored id, in source id order.
        f"""WITH base AS MATERIALIZED (
                SELECT s.physical_queue AS source, d.physical_queue AS destination,
                       greatest(d.last_task_id, coalesce((SELECT max(x.task_id) FROM tasks x
                                WHERE x.physical_queue = d.physical_queue), 0)) AS base_id
                FROM task_queues s
                JOIN task_queues d
                  ON d.physical_queue = left(s.physical_queue, length(s.physical_queue) - 5)
                WHERE s.version = 'auto')
            INSERT INTO tasks (physical_queue, task_id, data, created_at)
            SELECT b.destination,
                   b.base_id + row_number() OVER (PARTITION BY t.physical_queue
                                                  ORDER BY t.task_id),
                   jsonb_set(t.data, '{{task,versionDirective}}', {directive}),
                   t.created_at
            FROM tasks t
            JOIN base b ON b.source = t.physical_queue
            LEFT JOIN executions e ON e.run_id::text = t.data -> 'task' ->> 'runId'""",
        # Drain the sources (ack = last = greatest(last, max source id)).
        """UPDATE task_queues s
           SET last_task_id = greatest(s.last_task_id, m.max_id),
               ack_level = greatest(s.last_task_id, m.max_id)
           FROM (SELECT physical_queue, max(task_id) AS max_id FROM tasks
                 GROUP BY physical_queue) m
           WHERE s.version = 'auto' AND m.physical_queue = s.physical_queue""",
        """DELETE FROM tasks t USING task_queues s
           WHERE s.physical_queue = t.physical_queue AND s.version = 'auto'""",
        # Counters (destinations and stale ones), fence, protocol.
        """UPDATE task_queues q SET last_task_id = m.max_id
           FROM (SELECT physical_queue, max(task_id) AS max_id FROM tasks
                 GROUP BY physical_queue) m
           WHERE q.physical_queue = m.physical_queue AND m.max_id > q.last_task_id""",
        "UPDATE task_queues SET range_id = range_id + 1",
        "UPDATE runtime_protocol SET min_protocol = 4, max_protocol = 4",
    ]


def run_minimal(dsn: str) -> tuple[float, list[tuple[str, float]]]:
    """The minimal SQL in one transaction; total and per-statement seconds."""
    steps = []
    with psycopg.connect(dsn) as conn:
        started = time.monotonic()
        for statement in minimal_sql():
            t0 = time.monotonic()
            conn.execute(statement)
            steps.append((" ".join(statement.split()[:3]), time.monotonic() - t0))
        conn.commit()
        total = time.monotonic() - started
    return total, steps


def _scalar(conn: psycopg.Connection[Any], query: str) -> Any:
    row = conn.execute(query).fetchone()
    return row[0] if row else None


def content_digest(dsn: str) -> dict[str, str]:
    """md5 of each locked table's rows in a canonical order."""
    with psycopg.connect(dsn) as conn:
        return {
            table: str(
                _scalar(
                    conn,
                    "SELECT md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) "
                    f"FROM {table} x",
                )
            )
            for table in LOCKED_TABLES
        }


# --- main ------------------------------------------------------------------------------------


def bench_004(admin: str, rows: int, queues: int, repeat: int, keep: bool) -> dict[str, Any]:
    source = build_v3(admin, rows, queues)
    source_name = scratch.dbname_of(source)
    created = [source_name]
    tool_runs: list[ProcessRun] = []
    minimal_runs: list[tuple[float, list[tuple[str, float]]]] = []
    try:
        for _ in range(repeat):
            a = scratch.create_database(admin, template=source_name, prefix="qgbench")
            b = scratch.create_database(admin, template=source_name, prefix="qgbench")
            created += [scratch.dbname_of(a), scratch.dbname_of(b)]
            minimal_runs.append(run_minimal(b))
            log(f"minimal SQL: {minimal_runs[-1][0]:.2f}s")
            tool_runs.append(run_upgrade_process(a, "004"))
            log(f"queueguard upgrade: {tool_runs[-1].wall_s:.2f}s")
            if content_digest(a) != content_digest(b):
                raise SystemExit("queueguard upgrade and the minimal SQL disagree on contents")
        with psycopg.connect(source) as conn:
            total_rows = int(_scalar(conn, "SELECT count(*) FROM tasks"))
    finally:
        if not keep:
            for name in created:
                scratch.drop_database(admin, name)
    tool = statistics.median(r.wall_s for r in tool_runs)
    minimal = statistics.median(m[0] for m in minimal_runs)
    last = tool_runs[-1]
    return {
        "rows_auto": rows,
        "rows_total": total_rows,
        "queues_auto": queues,
        "tool_wall_s": round(tool, 2),
        "tool_wall_all_s": [round(r.wall_s, 2) for r in tool_runs],
        "minimal_sql_s": round(minimal, 2),
        "minimal_sql_all_s": [round(m[0], 2) for m in minimal_runs],
        "ratio": round(tool / minimal, 2),
        "rows_per_s": int(total_rows / tool),
        "peak_rss_mb": round(max(r.max_rss_mb for r in tool_runs), 1),
        "longest_access_exclusive_s": round(
            statistics.median(r.longest_exclusive_s for r in tool_runs), 2
        ),
        "minimal_steps_s": [(n, round(s, 2)) for n, s in minimal_runs[-1][1]],
        "tool_steps": [line.strip() for line in last.stderr.splitlines() if line.startswith("  ")],
        "tool_report": last.stdout.strip().splitlines()[:1]
        + [line.strip() for line in last.stdout.splitlines() if "fenced" in line],
        "relocated_queues": sum("relocated" in line for line in last.stdout.splitlines()),
    }


def bench_003(admin: str, rows: int, queues: int, repeat: int, keep: bool) -> dict[str, Any]:
    source = build_v2(admin, rows, queues)
    source_name = scratch.dbname_of(source)
    created = [source_name]
    runs: list[ProcessRun] = []
    try:
        for _ in range(repeat):
            clone = scratch.create_database(admin, template=source_name, prefix="qgbench")
            created.append(scratch.dbname_of(clone))
            runs.append(run_upgrade_process(clone, "003"))
            log(f"queueguard upgrade --to 003: {runs[-1].wall_s:.2f}s")
    finally:
        if not keep:
            for name in created:
                scratch.drop_database(admin, name)
    wall = statistics.median(r.wall_s for r in runs)
    return {
        "rows": rows,
        "tool_wall_s": round(wall, 2),
        "tool_wall_all_s": [round(r.wall_s, 2) for r in runs],
        "rows_per_s": int(rows / wall),
        "peak_rss_mb": round(max(r.max_rss_mb for r in runs), 1),
        "longest_access_exclusive_s": round(
            statistics.median(r.longest_exclusive_s for r in runs), 2
        ),
        "tool_steps": [
            line.strip() for line in runs[-1].stderr.splitlines() if line.startswith("  ")
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="legacy @auto rows (v0.3)")
    parser.add_argument("--queues", type=int, default=100, help="legacy @auto queues")
    parser.add_argument("--v2-rows", type=int, default=None, help="v0.2 rows (0 skips 002→003)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side (median)")
    parser.add_argument("--admin-dsn", help="admin DSN (default: QUEUEGUARD_PG's server)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    args = parser.parse_args(argv)
    admin = args.admin_dsn or scratch.server_dsn()
    os.chdir(ROOT)
    result: dict[str, Any] = {
        "004": bench_004(admin, args.rows, args.queues, args.repeat, args.keep)
    }
    v2_rows = args.rows if args.v2_rows is None else args.v2_rows
    if v2_rows:
        result["003"] = bench_003(admin, v2_rows, args.queues, args.repeat, args.keep)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
