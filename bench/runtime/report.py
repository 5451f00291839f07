"""The runtime benchmark's section of docs/benchmarks.md, rendered from a run's figures."""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from typing import Any

from bench.common.commands import shown

SECTION = "## Runtime"
Results = dict[str, dict[str, Any]]


def _fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def command(args: argparse.Namespace) -> str:
    """How to reproduce the run (no path of this machine)."""
    flat = ["--flat-memory-tasks", str(args.flat_memory_tasks)] if args.flat_memory_tasks else []
    return shown("bench.runtime", "--tasks", str(args.tasks), *flat)


def render(args: argparse.Namespace, results: Results, server: str) -> str:
    raw = results["raw"]["commits_per_s"] if "raw" in results else float("nan")
    lines = [
        SECTION,
        "",
        f"Command: `{command(args)}` ({time.strftime('%Y-%m-%d')}; {server}; "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"producers {args.producers}, consumers {args.consumers}; synchronous_commit on).",
        "",
        "What is compared: queueguard **one-by-one** (Matching's defaults and what "
        "`queueguard demo` shows: one append transaction per spooled task, one History "
        "start per delivery, a checkpoint after every ack that moves the ack level) and "
        "**batched** (`Matching(spool_batch=1000, checkpoint_every=1000, "
        "checkpoint_interval=0.05)` with consumers calling `poll_batch(queue, 100)`: "
        "concurrent `add_task` calls share one range-checked append (group commit), up to 100 "
        "starts go to History in one statement, and the ack level is saved every 1,000 acks "
        "or 50 ms, and on unload). Producers call `add_task` once per task in both modes; "
        "consumers never park, so nothing is sync-matched and every task takes the spool path. "
        "procrastinate runs the same arrival pattern (`defer_async` per task) with a no-op "
        "async task, `delete_jobs='always'`, LISTEN/NOTIFY on.",
        "",
        "Each workload runs in its own process against its own fresh database on the same "
        "server, one after the other in one run. `tasks/s` is end to end: from the first "
        "spool until every task was dispatched and the final checkpoint saved. Latency is "
        "spool → dispatch under saturation (producers run flat out, so it includes queueing "
        "behind the backlog). Commits/task is the database's `xact_commit` delta over the "
        "workload (reads and startup included) ÷ tasks. RSS is the client process's peak.",
        "",
        "| workload | tasks/s | p50 ms | p99 ms | commits/task | peak RSS MiB | checked |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    if "raw" in results:
        r = results["raw"]
        spread = f"{_fmt(min(r['samples']))}–{_fmt(max(r['samples']))}"
        lines.append(
            f"| raw single-row commits (1 connection, autocommit INSERT; median of "
            f"{len(r['samples'])} samples of {r['rows']:,} rows, range {spread}) | "
            f"{_fmt(r['commits_per_s'])} commits/s | | | 1 | | |"
        )
    for key in ("one-by-one", "batched", "procrastinate", "flat-memory"):
        if key not in results:
            continue
        r = results[key]
        label = r["workload"] + (f" ({r['tasks']:,} tasks)" if key == "flat-memory" else "")
        lines.append(
            f"| {label} | {_fmt(r['tasks_per_s'])} | {_fmt(r['p50_ms'], 1)} | "
            f"{_fmt(r['p99_ms'], 1)} | {r['commits_per_task']:.2f} | "
            f"{_fmt(r['peak_rss_mb'], 1)} | {'yes' if r['verified'] else 'NO'} |"
        )
    lines += ["", "Targets (ratios within this run):", ""]
    for text, value, goal in targets(results, raw):
        verdict = "met" if value >= goal else "NOT met"
        lines.append(f"- {text}: **{value:.2f}x** (target >= {goal}x) — {verdict}")
    if "one-by-one" in results and "batched" in results:
        ob, b = results["one-by-one"], results["batched"]
        lines += [
            f"- sync-matched tasks in the workloads: {ob['sync_matched']} / "
            f"{b['sync_matched']}; rows inserted into `tasks`: {ob['task_rows_inserted']:,} / "
            f"{b['task_rows_inserted']:,} (every task took the spool path). Zero writes for a "
            "sync match is asserted in `tests/runtime/test_batching_dispatch.py` "
            "(`test_sync_matched_tasks_cost_zero_writes_to_tasks`, both modes, both stores).",
            f"- batched append transactions: {b['append_transactions']:,} for {b['tasks']:,} "
            f"tasks (group commit of {args.producers} producer threads); one-by-one: "
            f"{ob['append_transactions']:,}.",
        ]
    if "flat-memory" in results and "batched" in results:
        small, big = results["batched"], results["flat-memory"]
        lines.append(
            f"- memory: batched peak RSS {small['peak_rss_mb']:.1f} MiB at {small['tasks']:,} "
            f"tasks vs {big['peak_rss_mb']:.1f} MiB at {big['tasks']:,} tasks."
        )
    lines += ["", "Reading the figures:", ""]
    if "one-by-one" in results:
        lines.append(
            "- one-by-one is bounded near half the raw commit rate: every append (producers) "
            "and every checkpoint (consumers) updates the queue's one `task_queues` row and "
            "holds its row lock until its commit, so per task two commits are serialised; "
            "History starts run in parallel (appends are also serialised in-process, one "
            "per queue at a time, which is cheaper than a pile of backends waiting on the row)."
        )
    if "batched" in results:
        b = results["batched"]
        lines.append(
            f"- batched carries {b['tasks'] / max(b['append_transactions'], 1):.0f} tasks per "
            "append, up to 100 History starts per statement and 1,000 acks per checkpoint, "
            f"so {b['commits_per_task']:.2f} commits per task: it is bound by CPU (client and "
            "server share 2 cores), not by commits. Its latency is the group-commit wait plus "
            "the consumers' idle back-off (≤ 10 ms). The price is crash replay: acks after the "
            "last checkpoint (≤ 1,000 or 50 ms) are re-read by the next owner, and History "
            "answers already-started for each (`tests/runtime/test_batching*.py`, both stores, "
            "and a SIGKILL test)."
        )
    if "procrastinate" in results:
        lines.append(
            "- procrastinate's latency is its backlog: producers defer every job within "
            "seconds while the worker completes them at the rate shown (a fetch, a finish, "
            "the defer and LISTEN/NOTIFY traffic: "
            f"{results['procrastinate']['commits_per_task']:.1f} commits per job)."
        )
    lines += [
        "",
        "The machine has 2 cores shared by PostgreSQL, the benchmark client and whatever "
        "else runs (other engineers run test suites concurrently), so absolute figures move "
        "a lot from run to run, and even within one run (see the raw samples' range: the "
        "commit rate follows the disk's and CPU's load); compare the ratios within one run.",
        "",
    ]
    return "\n".join(lines)


def targets(results: Results, raw: float) -> list[tuple[str, float, float]]:
    out = []
    ob, b, p = (results.get(k) for k in ("one-by-one", "batched", "procrastinate"))
    if ob and b:
        out.append(("batched / one-by-one", b["tasks_per_s"] / ob["tasks_per_s"], 5.0))
    if b and p:
        out.append(("batched / procrastinate", b["tasks_per_s"] / p["tasks_per_s"], 3.0))
    if ob and not math.isnan(raw):
        out.append(("one-by-one / raw commit rate", ob["tasks_per_s"] / raw, 0.25))
    return out
