"""Benchmark of `queueguard preflight` on a v0.3 database (docs/benchmarks.md, "Preflight").

What it measures, in one run on one server:

1. builds a v0.3 database (`upgrade --to 003`, then set-based `generate_series` inserts):
   `--rows` task rows over 1,000 queues (900 default queues, 100 legacy `@auto` queues that
   relocate into a default queue with rows), one execution per 5 tasks, then ANALYZE;
2. times preflight against ONE sequential scan of tasks reading every payload
   (`SELECT sum(length(data::text)) FROM tasks`), alternating, `--rounds` each, medians; the
   scan runs with the server's settings (a parallel plan where it has workers), and also in one
   backend (`max_parallel_workers_per_gather = 0`, as preflight runs) for a like-for-like figure;
3. runs a concurrent v0.3 runtime writer (application_name `queueguard/3 host=bench-writer`;
   each operation is one transaction: the range-checked id allocation on task_queues and the
   task INSERT, the v0.3 spool path) first alone, then while preflight runs back to back;
   from another connection it samples pg_locks / pg_stat_activity every few milliseconds:
   the strongest relation lock preflight holds, and every time the writer waits on a lock
   whose holder is preflight (`pg_blocking_pids`); it reports the writer's p50/p99 latency
   with and without preflight;
4. calibrates the `estimate.*` findings: on a clone, applies 004 (`queueguard.queue_schema.runner`),
   and compares its wall time, WAL volume and table growth with what preflight predicted.

Run from the repository root (embedded server by default, or `--admin-dsn`):

    python -m bench.preflight                 # 1,000,000 rows
    python -m bench.preflight --rows 100000 --no-docs

With `--docs` (default) the figures replace the "## Preflight" section of docs/benchmarks.md
(other sections are kept). Scratch databases are dropped unless `--keep`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.common.commands import ROOT
from bench.common.doc_sections import replace_section
from bench.preflight.report import SECTION, render
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema.preflight import APPLICATION_NAME, PreflightReport, preflight
from queueguard.queue_schema.runner import upgrade

DOCS = ROOT / "docs" / "benchmarks.md"
LOCK_RANK = [
    "AccessShareLock",
    "RowShareLock",
    "RowExclusiveLock",
    "ShareUpdateExclusiveLock",
    "ShareLock",
    "ShareRowExclusiveLock",
    "ExclusiveLock",
    "AccessExclusiveLock",
]
WRITER_QUEUE = "bench/writer/workflow/0"
RUNTIME = queries("queueguard.stores", "runtime.sql")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# building the database ---------------------------------------------------------------------
BUILD = """
INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior,
                        deployment_version)
SELECT md5('run' || r)::uuid, 'bench', 'wf-' || r, 'running',
       (ARRAY['unversioned', 'auto_upgrade', 'pinned'])[1 + r %% 3],
       CASE WHEN r %% 3 = 2 THEN 'deploy.b' || (r %% 7) END
FROM generate_series(0, %(runs)s - 1) AS r;

INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                         range_id, ack_level, last_task_id)
SELECT 'bench/fam' || (q %% 900) || '/workflow/0' || CASE WHEN q >= 900 THEN '@auto' ELSE '' END,
       'bench', 'fam' || (q %% 900), 'workflow', 0, CASE WHEN q >= 900 THEN 'auto' ELSE '' END,
       1, 0, ceil(%(rows)s / 1000.0)::bigint
FROM generate_series(0, 999) AS q;

INSERT INTO tasks (physical_queue, task_id, data)
SELECT 'bench/fam' || (g %% 1000 %% 900) || '/workflow/0'
           || CASE WHEN g %% 1000 >= 900 THEN '@auto' ELSE '' END,
       g / 1000 + 1,
       jsonb_build_object(
           'task', jsonb_build_object(
               'namespace', 'bench', 'workflowId', 'wf-' || (g %% %(runs)s),
               'runId', md5('run' || (g %% %(runs)s))::uuid::text, 'kind', 'workflow',
               'scheduledEventId', g, 'attempt', 1),
           'enqueuedAt', '2024-05-01T12:00:00Z')
FROM generate_series(0, %(rows)s - 1) AS g;

INSERT INTO task_queues VALUES ('bench/writer/workflow/0', 'bench', 'writer', 'workflow', 0, '',
                                1, 0, 0);
"""


def build(databases: ScratchDatabases, rows: int) -> str:
    dsn = databases.create()
    started = time.monotonic()
    try:
        upgrade(dsn, to="003", progress=False)
        with psycopg.connect(dsn) as conn:
            for statement in BUILD.split(";\n\n"):
                conn.execute(statement, {"rows": rows, "runs": max(rows // 5, 1)})
            conn.commit()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) executions, task_queues, tasks")
    except BaseException:
        databases.drop(dsn)
        raise
    log(f"built {rows:,} task rows in {time.monotonic() - started:.1f}s")
    return dsn


# 2: preflight vs one scan -----------------------------------------------------------------
def time_scan(dsn: str, serial: bool = False) -> float:
    """The reference scan; `serial` runs it in one backend, as preflight runs its checks."""
    with psycopg.connect(dsn) as conn:
        if serial:
            conn.execute("SET max_parallel_workers_per_gather = 0")
        started = time.monotonic()
        conn.execute("SELECT sum(length(data::text)) FROM tasks").fetchone()
        return time.monotonic() - started


def time_preflight(dsn: str) -> tuple[float, PreflightReport]:
    started = time.monotonic()
    report = preflight(dsn)
    return time.monotonic() - started, report


# 3: the writer and the observer -----------------------------------------------------------
def writer_main(dsn: str, stop: Any, ready: Any, pid: Any, out: str) -> None:
    """A v0.3 host's spool path in its own process (no GIL shared with the observer).

    Each operation is one transaction: the range-checked id allocation, then the INSERT.
    Writes (start, seconds) pairs to `out` when stopped.
    """
    latencies: list[tuple[float, float]] = []
    with psycopg.connect(dsn, application_name="queueguard/3 host=bench-writer") as conn:
        pid.value = conn.info.backend_pid
        ready.set()
        payload = '{"task": {"runId": "x", "kind": "workflow"}}'
        while not stop.is_set():
            started = time.monotonic()
            with conn.transaction():
                row = conn.execute(
                    RUNTIME["allocate_ids"], {"key": WRITER_QUEUE, "range_id": 1, "n": 1}
                ).fetchone()
                assert row is not None
                conn.execute(
                    RUNTIME["insert_tasks"],
                    {"key": WRITER_QUEUE, "first_id": row[0], "payloads": [payload]},
                )
            latencies.append((started, time.monotonic() - started))
    Path(out).write_text("\n".join(f"{t} {s}" for t, s in latencies), encoding="utf-8")


def in_windows(
    latencies: list[tuple[float, float]], windows: list[tuple[float, float]]
) -> list[float]:
    return [s for t, s in latencies if any(a <= t and t + s <= b for a, b in windows)]


@dataclass
class Observer:
    dsn: str
    writer_pid: int
    stop: threading.Event = field(default_factory=threading.Event)
    modes: set[str] = field(default_factory=set)
    lock_waits: int = 0
    samples: int = 0

    def run(self) -> None:
        waiting = False
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                rows = conn.execute(
                    "SELECT l.mode FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE a.application_name = %s AND l.locktype = 'relation' "
                    "AND a.datname = current_database()",
                    (APPLICATION_NAME,),
                ).fetchall()
                self.modes |= {r[0] for r in rows}
                blocked = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM unnest(pg_blocking_pids(%s)) AS b(pid) "
                    "JOIN pg_stat_activity a USING (pid) WHERE a.application_name = %s "
                    "AND a.datname = current_database())",
                    (self.writer_pid, APPLICATION_NAME),
                ).fetchone()
                now_waiting = bool(blocked and blocked[0])
                if now_waiting and not waiting:
                    self.lock_waits += 1
                waiting = now_waiting
                self.samples += 1
                time.sleep(0.003)

    @property
    def strongest(self) -> str:
        return max(self.modes, key=LOCK_RANK.index) if self.modes else "none"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def contention(dsn: str, runs: int) -> dict[str, Any]:
    """`runs` rounds, each one preflight window and one idle window of the same length, in
    alternating order (so load drift on a shared machine hits both conditions alike)."""
    ctx = multiprocessing.get_context("spawn")
    stop, ready, pid = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "latencies.txt")
        proc = ctx.Process(target=writer_main, args=(dsn, stop, ready, pid, out))
        proc.start()
        if not ready.wait(30):
            proc.terminate()
            raise RuntimeError("the writer process did not connect")
        observer = Observer(dsn, int(pid.value))
        watcher = threading.Thread(target=observer.run)
        watcher.start()
        time.sleep(1.0)  # warm-up
        during: list[tuple[float, float]] = []
        alone: list[tuple[float, float]] = []
        reports = []
        for round_no in range(runs):
            order = ("preflight", "idle") if round_no % 2 == 0 else ("idle", "preflight")
            span = None
            for what in order:
                started = time.monotonic()
                if what == "preflight":
                    reports.append(preflight(dsn))
                    during.append((started, time.monotonic()))
                else:
                    time.sleep(span or 2.0)
                    alone.append((started, time.monotonic()))
                span = time.monotonic() - started
        observer.stop.set()
        watcher.join()
        stop.set()
        proc.join()
        latencies = [
            (float(a), float(b))
            for a, b in (line.split() for line in Path(out).read_text().splitlines())
        ]
    ops_during, ops_alone = in_windows(latencies, during), in_windows(latencies, alone)
    return {
        "runs": runs,
        "seconds": sum(b - a for a, b in during),
        "strongest": observer.strongest,
        "modes": sorted(observer.modes, key=LOCK_RANK.index),
        "lock_waits": observer.lock_waits,
        "observer_samples": observer.samples,
        "ops_during": len(ops_during),
        "ops_alone": len(ops_alone),
        "p50_during": percentile(ops_during, 50) * 1000,
        "p99_during": percentile(ops_during, 99) * 1000,
        "p50_alone": percentile(ops_alone, 50) * 1000,
        "p99_alone": percentile(ops_alone, 99) * 1000,
        "older_hosts_reported": all("runtime.older_hosts" in r.codes() for r in reports),
    }


# 4: calibration of the estimates ----------------------------------------------------------
def calibrate(databases: ScratchDatabases, dsn: str, report: PreflightReport) -> dict[str, Any]:
    clone = databases.create(template=scratch.dbname_of(dsn))
    try:
        with psycopg.connect(clone, autocommit=True) as conn:
            size_sql = "SELECT pg_table_size('tasks') + pg_indexes_size('tasks')"
            before = conn.execute(size_sql).fetchone()
            lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        started = time.monotonic()
        result = upgrade(clone, progress=False)
        seconds = time.monotonic() - started
        with psycopg.connect(clone, autocommit=True) as conn:
            after = conn.execute(size_sql).fetchone()
            wal = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn[0] if lsn else None,)
            ).fetchone()
    finally:
        databases.drop(clone)
    found = {f.code: f for f in report.findings}
    rows = found["estimate.rows_rewritten"].count
    return {
        "applied": result.applied,
        "seconds": seconds,
        "rows_per_s": rows / seconds if seconds else 0,
        "grown": int(after[0]) - int(before[0]) if after and before else 0,
        "wal": int(wal[0]) if wal else 0,
        "est_seconds": found["estimate.lock_hold"].samples[0]["seconds"],
        "est_disk": found["estimate.extra_disk"].samples[0]["bytes"],
        "est_wal": found["estimate.wal"].samples[0]["bytes"],
        "rows": rows,
        "relocated": found["estimate.rows_relocated"].count,
    }


def per_file(dsn: str) -> list[tuple[str, float]]:
    """Each applicable audit file timed alone, in preflight's transaction and settings."""
    from queueguard.queue_schema import audit
    from queueguard.queue_schema import preflight as module
    from queueguard.queue_schema.preflight_guard import Limits

    timings = []
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        for query in audit.for_revision("003", include_advisory=True):
            cur.execute(module.BEGIN)
            module._set_local(cur, "004", Limits())
            started = time.monotonic()
            audit.run(cur, query)
            timings.append((query.name, time.monotonic() - started))
            cur.execute("ROLLBACK")
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contention-runs", type=int, default=10)
    parser.add_argument("--admin-dsn", help="admin DSN (default: QUEUEGUARD_PG, embedded)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-docs", dest="docs", action="store_false")
    args = parser.parse_args()
    admin = args.admin_dsn or scratch.server_dsn()
    with psycopg.connect(admin) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        source = os.environ.get("QUEUEGUARD_PG", "embedded")
        server = f"PostgreSQL {row[0] if row else '?'} ({source})"
    load_start = os.getloadavg()[0]
    databases = ScratchDatabases(admin, prefix="qg_bench")
    dsn = build(databases, args.rows)
    try:
        time_scan(dsn)  # warm the cache for both
        scans, serial_scans, runs = [], [], []
        report: PreflightReport | None = None
        for _ in range(args.rounds):
            scans.append(time_scan(dsn))
            seconds, report = time_preflight(dsn)
            runs.append(seconds)
            serial_scans.append(time_scan(dsn, serial=True))
        assert report is not None
        log(f"scan {scans}, serial scan {serial_scans}, preflight {runs}; {report.codes()}")
        results: dict[str, Any] = {
            "scan_s": statistics.median(scans),
            "serial_scan_s": statistics.median(serial_scans),
            "preflight_s": statistics.median(runs),
            "per_file": per_file(dsn),
        }
        results["contention"] = contention(dsn, args.contention_runs)
        log(f"contention {results['contention']}")
        results["calibration"] = calibrate(databases, dsn, report)
        log(f"calibration {results['calibration']}")
    finally:
        if not args.keep:
            databases.drop_all()
    results["load"] = (load_start, os.getloadavg()[0])
    section = render(args, server, results)
    print(section)
    if args.docs:
        replace_section(DOCS, section)
        log(f"wrote the {SECTION!r} section of {DOCS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
