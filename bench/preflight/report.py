"""The preflight benchmark's section of docs/benchmarks.md, rendered from a run's figures."""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

from bench.common.commands import shown

SECTION = "## Preflight"


def mb(n: float) -> str:
    return f"{n / 1024 / 1024:,.0f} MB"


def render(args: argparse.Namespace, server: str, t: dict[str, Any]) -> str:
    c, k = t["contention"], t["calibration"]
    ratio = t["preflight_s"] / t["scan_s"]
    lines = [
        SECTION,
        "",
        f"Command: `{shown('bench.preflight', '--rows', str(args.rows))}` "
        f"({time.strftime('%Y-%m-%d')}; {server}; {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; load average {t['load'][0]:.1f} at the start, "
        f"{t['load'][1]:.1f} at the end: the machine was shared).",
        "",
        f"v0.3 database: {args.rows:,} task rows in 1,000 queues (100 legacy `@auto` queues "
        f"holding {k['relocated']:,} rows), {max(args.rows // 5, 1):,} executions; "
        "VACUUM ANALYZE after loading. Medians of "
        f"{args.rounds} alternating rounds.",
        "",
        "| measure | result | target |",
        "|---|---|---|",
        f"| preflight, whole (connect, every audit file, rollback) | {t['preflight_s']:.2f} s | |",
        f"| one sequential scan reading every payload (`SELECT sum(length(data::text)) FROM "
        f"tasks`) | {t['scan_s']:.2f} s | |",
        f"| ratio preflight / scan | **{ratio:.2f}** | <= 3 |",
        f"| the same scan in one backend (`max_parallel_workers_per_gather = 0`, as preflight "
        f"runs; the scan above may use parallel workers) | {t['serial_scan_s']:.2f} s | |",
        f"| ratio preflight / one-backend scan | {t['preflight_s'] / t['serial_scan_s']:.2f} | |",
        f"| strongest lock preflight held (pg_locks, sampled every ~3 ms, "
        f"{c['observer_samples']:,} samples) | **{c['strongest']}** "
        f"(seen: {', '.join(c['modes'])}) | ACCESS SHARE |",
        f"| times the concurrent v0.3 writer waited on a lock held by preflight "
        f"(`pg_blocking_pids`) | **{c['lock_waits']}** | 0 |",
        f"| writer p50 / p99 without preflight ({c['runs']} idle windows as long, "
        f"interleaved; {c['ops_alone']:,} ops) | "
        f"{c['p50_alone']:.2f} / {c['p99_alone']:.2f} ms | |",
        f"| writer p50 / p99 during preflight ({c['runs']} runs) "
        f"({c['ops_during']:,} ops) | {c['p50_during']:.2f} / **{c['p99_during']:.2f}** ms | "
        "p99 <= 2x |",
        f"| p99 ratio during / without | **{c['p99_during'] / max(c['p99_alone'], 1e-9):.2f}** "
        "| <= 2 |",
        "",
        "Per-check time of one preflight, each file alone in preflight's transaction and "
        "settings (the one pass over tasks, `003_task_rows.sql`, dominates):",
        "",
        "| check file | seconds |",
        "|---|---|",
        *[f"| `{name}` | {s:.3f} |" for name, s in t["per_file"]],
        "",
        "Calibration of the `estimate.*` findings against 004 applied to a clone of the same "
        "database (`queueguard.queue_schema.runner.upgrade`):",
        "",
        "| | preflight estimated | measured |",
        "|---|---|---|",
        f"| ACCESS EXCLUSIVE hold (004's transaction) | {k['est_seconds']} s | "
        f"{k['seconds']:.1f} s whole upgrade ({k['rows_per_s']:,.0f} rows/s) |",
        f"| extra disk (tasks heap + indexes) | {mb(k['est_disk'])} | {mb(k['grown'])} |",
        f"| WAL | {mb(k['est_wal'])} | {mb(k['wal'])} |",
        "",
        "Notes: the writer is a protocol-3 host, so each preflight also reported "
        "`runtime.older_hosts` (as it should"
        + (")." if c["older_hosts_reported"] else "; it did NOT, investigate).")
        + " Latency during preflight rises with CPU and I/O sharing on this "
        f"{os.cpu_count()}-CPU machine, not with locks: the writer never waited on one. "
        "The rate behind `estimate.lock_hold` (`queueguard.rewrite_rows_per_s`, default in "
        "`audit_queries/003_estimate_cost.sql`) comes from this calibration; measure yours "
        "with `queueguard rehearse` on a copy and set it for a better estimate. Figures move "
        "with the load of the machine: see the spread over several runs in docs/preflight.md, "
        '"Cost".',
        "",
    ]
    return "\n".join(lines)
