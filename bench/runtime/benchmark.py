"""Runtime benchmark: one-by-one vs batched Matching, a peer queue, raw commits.

In ONE run on one PostgreSQL server (the embedded one by default) it measures:

1. the machine's raw single-row commit rate: one connection in autocommit mode inserting one
   row per statement (each INSERT is its own committed transaction) — the physical
   reference, sampled before every workload and at the end (the median is reported, since
   it drifts with the machine's load);
2. queueguard one-by-one mode (Matching's defaults) and batched mode
   (group-committed spools, `poll_batch` History starts, checkpoints every 1,000 acks or
   50 ms): `--producers` threads call `Matching.add_task` once per task, `--consumers` threads
   poll (`poll` / `poll_batch`) without parking, so no task is sync-matched and every task
   takes the whole path spool → read → History start → ack → checkpoint. The clock stops
   when every task was delivered and the final checkpoint is saved (`shutdown` flushes);
   the run then checks the database: ack_level = last_task_id = N, no task row left, N
   starts recorded in History, and N rows were inserted into `tasks` (nothing sync-matched);
3. procrastinate (a well-known Python PostgreSQL queue) on the same workload: `--producers`
   coroutines `defer_async` one job per task, a worker with `--consumers` concurrency runs a
   no-op async task (it does not call History, which favours it), jobs deleted on completion.

Each workload runs in its own child process (`bench.runtime.workloads`; so peak RSS is per
workload: the client
process's `ru_maxrss`, not the server's) against its own fresh database; commits per task
come from `pg_stat_database.xact_commit` deltas of that database (every transaction of the
child, reads and startup included). Latency is spool → dispatch: from just before
`add_task`/`defer` to the moment the consumer holds the task, kept in a fixed log-bucket
histogram (2 % resolution) so memory does not grow with the task count.

The machine has 2 cores shared by the server, the benchmark and whatever else runs: ratios
within one run are what count.

    python -m bench.runtime                   # 20,000 tasks, writes docs
    python -m bench.runtime --tasks 5000 --no-docs
    python -m bench.runtime --modes batched --tasks 1000000 --no-docs

With `--docs` (default) the figures replace the "## Runtime" section of docs/benchmarks.md
(other sections are kept); `--from-json FILE` renders that section again from a run's saved
stdout. `--flat-memory-tasks N` adds a batched run of N tasks to show
that peak RSS does not grow with the number of tasks. Scratch databases are dropped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common.commands import ROOT, module_argv
from bench.common.doc_sections import replace_section
from bench.runtime.report import SECTION, Results, render, targets
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema.runner import upgrade

DOCS = ROOT / "docs" / "benchmarks.md"
ALL_MODES = ("raw", "one-by-one", "batched", "procrastinate")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def setup_history(dsn: str, tasks: int) -> None:
    """One running execution and one scheduled task per benchmark task, set-based."""
    with connection(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior)"
            " SELECT lpad(to_hex(i), 32, '0')::uuid, 'bench', 'wf-' || i, 'running',"
            " 'unversioned' FROM generate_series(1, %s) i",
            (tasks,),
        )
        conn.execute(
            "INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind)"
            " SELECT lpad(to_hex(i), 32, '0')::uuid, 1, 'workflow' FROM generate_series(1, %s) i",
            (tasks,),
        )
        conn.execute("VACUUM ANALYZE executions, scheduled_tasks")


def setup_procrastinate(dsn: str) -> None:
    from procrastinate.schema import SchemaManager

    with connection(dsn, autocommit=True) as conn:
        conn.execute(SchemaManager.get_schema())


def stats(admin_dsn: str, dbname: str) -> tuple[int, int]:
    """(xact_commit, tup_inserted) of `dbname` once none of its backends is left."""
    with connection(admin_dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while True:
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)
            ).fetchone()
            if (busy and busy[0] == 0) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        previous = None
        while True:  # exiting backends flush their counters: read until stable
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(
                "SELECT xact_commit, tup_inserted FROM pg_stat_database WHERE datname = %s",
                (dbname,),
            ).fetchone()
            assert row is not None
            if row == previous:
                return int(row[0]), int(row[1])
            previous = row
            time.sleep(0.3)


def raw_commit_rate(databases: ScratchDatabases, rows: int) -> dict[str, Any]:
    dsn = databases.create()
    try:
        with connection(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE raw_commits (id bigserial PRIMARY KEY, v int NOT NULL)")
            for i in range(200):  # warm up (prepared statement, caches)
                conn.execute("INSERT INTO raw_commits (v) VALUES (%s)", (i,))
            started = time.perf_counter()
            for i in range(rows):
                conn.execute("INSERT INTO raw_commits (v) VALUES (%s)", (i,))
            elapsed = time.perf_counter() - started
        return {"workload": "raw single-row commits", "rows": rows, "commits_per_s": rows / elapsed}
    finally:
        databases.drop(dsn)


def run_child(
    args: argparse.Namespace, databases: ScratchDatabases, mode: str, tasks: int
) -> dict[str, Any]:
    """One workload in its own process against its own fresh database."""
    dsn = databases.create()
    dbname = scratch.dbname_of(dsn)
    try:
        if mode == "procrastinate":
            setup_procrastinate(dsn)
        else:
            upgrade(dsn, progress=False)
            setup_history(dsn, tasks)
        commits0, inserted0 = stats(databases.admin_dsn, dbname)
        cmd = module_argv(
            "bench.runtime.workloads",
            mode,
            *("--dsn", dsn, "--tasks", str(tasks)),
            *("--producers", str(args.producers), "--consumers", str(args.consumers)),
        )
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"{mode} child failed:\n{done.stderr[-4000:]}")
        result: dict[str, Any] = json.loads(done.stdout)
        commits1, inserted1 = stats(databases.admin_dsn, dbname)
        result["commits_per_task"] = (commits1 - commits0) / tasks
        result["rows_inserted"] = inserted1 - inserted0
        if mode != "procrastinate":  # every task went through tasks: none sync-matched
            result["task_rows_inserted"] = _task_rows_inserted(dsn)
        return result
    finally:
        if not args.keep:
            databases.drop(dsn)


def _task_rows_inserted(dsn: str) -> int:
    with connection(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'tasks'"
        ).fetchone()
    return int(row[0]) if row else -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--producers", type=int, default=32)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--modes", default=",".join(ALL_MODES), help="comma-separated subset")
    parser.add_argument("--raw-rows", type=int, default=5_000, help="rows per raw sample")
    parser.add_argument("--flat-memory-tasks", type=int, default=0)
    parser.add_argument("--admin-dsn", help="server to use (default: the embedded one)")
    parser.add_argument("--docs", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--from-json", type=Path, help="re-render the docs from a saved run's JSON output"
    )
    parser.add_argument("--server", help=argparse.SUPPRESS)  # with --from-json
    args = parser.parse_args()

    if args.from_json:  # the figures of an earlier run (its stdout), rendered again
        saved: Results = json.loads(args.from_json.read_text(encoding="utf-8"))
        replace_section(DOCS, render(args, saved, args.server or "PostgreSQL"))
        log(f"wrote the {SECTION!r} section of {DOCS} from {args.from_json}")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(ALL_MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {ALL_MODES}")
    admin = args.admin_dsn or scratch.server_dsn()
    with connection(admin) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    server = f"PostgreSQL {row[0] if row else '?'}"
    databases = ScratchDatabases(admin, prefix="qgrtbench")
    results: Results = {}
    raws: list[float] = []

    def sample_raw() -> None:
        """The raw rate drifts with the machine's load: sample it around every workload."""
        if "raw" in modes:
            raws.append(raw_commit_rate(databases, args.raw_rows)["commits_per_s"])
            log(f"raw single-row commits: {raws[-1]:,.0f}/s")

    for mode in ("one-by-one", "batched", "procrastinate"):
        if mode not in modes:
            continue
        sample_raw()
        log(f"{mode}: {args.tasks:,} tasks ...")
        try:
            results[mode] = run_child(args, databases, mode, args.tasks)
        except (RuntimeError, ImportError, psycopg.Error) as exc:
            log(f"  {mode} failed: {exc}")
            continue
        r = results[mode]
        log(
            f"  {r['tasks_per_s']:,.0f} tasks/s, p50 {r['p50_ms']:.1f} ms, "
            f"p99 {r['p99_ms']:.1f} ms, {r['commits_per_task']:.2f} commits/task, "
            f"RSS {r['peak_rss_mb']:.1f} MiB, verified {r['verified']}"
        )
    if args.flat_memory_tasks:
        log(f"batched, flat memory: {args.flat_memory_tasks:,} tasks ...")
        results["flat-memory"] = run_child(args, databases, "batched", args.flat_memory_tasks)
        log(f"  RSS {results['flat-memory']['peak_rss_mb']:.1f} MiB")
    sample_raw()
    if raws:  # the reference: the median of the samples taken around the workloads
        results["raw"] = {
            "workload": "raw single-row commits",
            "rows": args.raw_rows,
            "commits_per_s": statistics.median(raws),
            "samples": raws,
        }
        log(f"raw reference: median {statistics.median(raws):,.0f}/s of {len(raws)} samples")
    raw = results["raw"]["commits_per_s"] if "raw" in results else float("nan")
    for text, value, goal in targets(results, raw):
        log(f"{text}: {value:.2f}x (target >= {goal}x)")
    print(json.dumps(results, indent=2))
    if args.docs:
        replace_section(DOCS, render(args, results, server))
        log(f"wrote the {SECTION!r} section of {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
