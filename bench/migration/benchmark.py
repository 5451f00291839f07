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

    python -m bench.migration            # full size (1,000,000 rows)
    python -m bench.migration --rows 100000 --v2-rows 0

The server is the one tests use (`QUEUEGUARD_PG`, embedded by default) or `--admin-dsn`.
Scratch databases are dropped at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench.common.commands import QUEUEGUARD, ROOT
from bench.migration.databases import build_v2, build_v3, log
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases

LOCKED_TABLES = ("task_queues", "tasks", "runtime_protocol")
UNVERSIONED = '{"behavior": "unversioned", "deploymentVersion": null}'


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


def bench_004(databases: ScratchDatabases, rows: int, queues: int, repeat: int) -> dict[str, Any]:
    source = build_v3(databases, rows, queues)
    source_name = scratch.dbname_of(source)
    tool_runs: list[ProcessRun] = []
    minimal_runs: list[tuple[float, list[tuple[str, float]]]] = []
    for _ in range(repeat):
        a = databases.create(template=source_name)
        b = databases.create(template=source_name)
        minimal_runs.append(run_minimal(b))
        log(f"minimal SQL: {minimal_runs[-1][0]:.2f}s")
        tool_runs.append(run_upgrade_process(a, "004"))
        log(f"queueguard upgrade: {tool_runs[-1].wall_s:.2f}s")
        if content_digest(a) != content_digest(b):
            raise SystemExit("queueguard upgrade and the minimal SQL disagree on contents")
    with psycopg.connect(source) as conn:
        total_rows = int(_scalar(conn, "SELECT count(*) FROM tasks"))
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


def bench_003(databases: ScratchDatabases, rows: int, queues: int, repeat: int) -> dict[str, Any]:
    source_name = scratch.dbname_of(build_v2(databases, rows, queues))
    runs: list[ProcessRun] = []
    for _ in range(repeat):
        clone = databases.create(template=source_name)
        runs.append(run_upgrade_process(clone, "003"))
        log(f"queueguard upgrade --to 003: {runs[-1].wall_s:.2f}s")
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
    databases = ScratchDatabases(admin, prefix="qgbench")
    try:
        result: dict[str, Any] = {"004": bench_004(databases, args.rows, args.queues, args.repeat)}
        v2_rows = args.rows if args.v2_rows is None else args.v2_rows
        if v2_rows:
            result["003"] = bench_003(databases, v2_rows, args.queues, args.repeat)
    finally:
        if not args.keep:
            databases.drop_all()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
