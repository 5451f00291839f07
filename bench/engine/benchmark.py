"""Benchmark: a revision that locks a table, applied while writers insert into it
(docs/benchmarks.md, "Upgrade of a migration set under load").

What it does, in one run on one server (the driver: bench/engine/load.py):

1. builds a database at V1 of a sqldir set (`events`, `--rows` rows, VACUUM ANALYZE) and
   clones it once per case;
2. runs each case on its own clone with `--writers` threads inserting into `events` from
   before the revision starts to after it ends, and a long reader (a transaction that read
   `events`, held `--reader-s` seconds from the revision's start) where the case has one:
   - queueguard (`upgrade(mset, dsn, limits=Limits(--lock-timeout-ms, retries=--retries))`)
     with the reader (held past the upgrade's end if that is later): LockTimeout expected;
   - queueguard without the reader: the revision applies;
   - the same statements applied the way temporal-sql-tool applies them (an emulation:
     autocommit, no lock_timeout, "already exists" errors skipped) with the reader;
   - the emulation without the reader (for reference: with nothing in the way both appliers
     hold the lock about as long);
3. prints one table: outcome, the writers' longest insert and p99, inserts done, and the
   ACCESS EXCLUSIVE hold on `events` (sampled in pg_locks; for queueguard also its own
   measure, first statement to commit).

Run from the repository root (the server tests use, embedded by default, or `--admin-dsn`):

    python -m bench.engine                  # 1,000,000 rows
    python -m bench.engine --rows 200000 --json --no-docs

With docs (default) the table replaces the section of docs/benchmarks.md. Scratch databases
are dropped unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common.commands import ROOT, shown
from bench.common.doc_sections import replace_section
from bench.engine import load
from queueguard.engine.apply.ladder import RETRY_GROWTH, ladder_s
from queueguard.engine.apply.session import Limits
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Upgrade of a migration set under load"


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace, admin: str) -> list[load.CaseResult]:
    limits = Limits(lock_timeout_ms=args.lock_timeout_ms, retries=args.retries)
    cases = [
        (load.QUEUEGUARD, args.reader_s),
        (load.QUEUEGUARD, None),
        (load.EMULATION, args.reader_s),
        (load.EMULATION, None),
    ]
    results = []
    databases = ScratchDatabases(admin, prefix="qg_bench")
    try:
        with tempfile.TemporaryDirectory() as folder:
            mset = load.write_set(Path(folder) / "set")
            template = databases.create()
            started = time.monotonic()
            load.build(mset, template, args.rows)
            log(f"built {args.rows:,} events in {time.monotonic() - started:.1f}s")
            for applier, reader_s in cases:
                dsn = databases.create(template=scratch.dbname_of(template))
                result = load.run_case(
                    mset, dsn, applier, reader_s=reader_s, limits=limits, writers=args.writers
                )
                log(f"{result.case}: {json.dumps(result.as_json())}")
                results.append(result)
                if not args.keep:
                    databases.drop(dsn)
    finally:
        if not args.keep:
            databases.drop_all()
    return results


def ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:,.0f} ms"


def outcome(result: load.CaseResult) -> str:
    if result.applied:
        return f"applied in {result.apply_s:.2f} s"
    name = result.outcome.split(":", 1)[0]
    changed = "catalog unchanged" if result.catalog_unchanged else "CATALOG CHANGED"
    return f"{name} after {result.apply_s:.2f} s, {result.lock_waits} attempts; {changed}"


def hold(result: load.CaseResult) -> str:
    sampled = ms(result.sampled_hold_s)
    return sampled if result.held_s is None else f"{sampled} (runner: {ms(result.held_s)})"


def render(args: argparse.Namespace, server: str, meta: dict[str, Any]) -> str:
    results: list[load.CaseResult] = meta["results"]
    largest = args.lock_timeout_ms * RETRY_GROWTH**args.retries
    command = shown("bench.engine", "--rows", str(args.rows))
    lines = [
        SECTION,
        "",
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}; {server}; {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; 1-minute load average {meta['load'][0]:.1f} at "
        f"the start, {meta['load'][1]:.1f} at the end: the machine was shared).",
        "",
        f"A sqldir set at V1: `events` (bigserial id, int payload, timestamptz) with "
        f"{args.rows:,} rows. V2, the revision applied: `ALTER TABLE events ADD COLUMN x int "
        "DEFAULT 0; ALTER TABLE events ALTER COLUMN payload TYPE bigint;` (ACCESS EXCLUSIVE; "
        f"the type change rewrites the table). {args.writers} writer threads insert one row per "
        "autocommit statement throughout each case (from 0.5 s before the revision to 0.3 s "
        "after it and the reader end); the long reader is a transaction that read `events` "
        f"(ACCESS SHARE) and stays open {args.reader_s:g} s from the revision's start. Each "
        "case on its own clone of the same database, one after the other, in the order shown.",
        "",
        f"queueguard: `upgrade(mset, dsn, limits=Limits(lock_timeout_ms={args.lock_timeout_ms}, "
        f"retries={args.retries}))`; its attempts wait at most {args.lock_timeout_ms}, …, "
        f"{largest:,.0f} ms for the lock, {ladder_s(args.lock_timeout_ms, args.retries):.2f} s "
        "with the sleeps between them (`ladder_s`). temporal-sql-tool (emulated): the same "
        "statements each on its own in autocommit, no lock_timeout or statement_timeout, "
        'errors saying "already exists" skipped (`bench/engine/load.py`: a model of '
        "temporal-sql-tool's way of applying a version's statements written for this "
        "benchmark, not Temporal's code).",
        "",
        "| case | outcome | writers' longest wait | writers' p99 | inserts done "
        "| ACCESS EXCLUSIVE hold on `events` |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.case} | {outcome(r)} | **{ms(r.longest_s)}** | {ms(r.p99_s)} | "
            f"{r.inserts:,} | {hold(r)} |"
        )
    lines += ["", "Notes:", ""]
    for r in results:
        if r.applier == load.EMULATION and r.reader_held_s is not None:
            both = r.longest_s >= r.reader_held_s + r.sampled_hold_s / 2
            lines.append(
                f"- Emulated, with the reader: the longest insert took {ms(r.longest_s)}, "
                f"against the reader's {r.reader_held_s:.2f} s and the longest hold "
                f"({ms(r.sampled_hold_s)}, the rewrite): "
                + (
                    "one insert waited through both (queued behind the first ALTER, itself "
                    "behind the reader, it was still waiting when the rewrite took the lock)."
                    if both
                    else "the writers stalled for the reader's whole time; no single insert "
                    "waited through the rewrite as well in this run (depending on timing, one "
                    "can: about their sum)."
                )
            )
    lines += [
        "- The writers' longest wait is the longest single insert; p99 is over every insert of "
        "the case (most run while nothing is locked); inserts done count the whole case, and "
        "the cases with the reader last longer. A writer queued behind an ALTER that "
        "waits for the reader waits as long as the ALTER does: with no lock_timeout, until the "
        "reader ends (the lock-queue outage of temporalio/temporal#6273); with queueguard, at "
        "most one attempt's lock_timeout, after which the ALTER leaves the queue and the "
        "writers go on.",
        "- The hold is sampled in pg_locks every ~5 ms (the longest unbroken stretch the "
        "applier's session held ACCESS EXCLUSIVE on `events`); queueguard's own measure is "
        "`Step.held_s`, from the revision's first statement to its commit. The emulation "
        "commits each statement, so its hold is the longest single statement's; queueguard's "
        "covers both statements (one transaction: a failure leaves V1 whole). Each row is one "
        "sample on a shared machine: compare the two no-reader rows with care.",
        "- Two cores serve PostgreSQL, the writers and the sampler: read latencies against the "
        "no-reader rows of the same run. `tests/engine/test_upgrade_under_load.py` holds the "
        "same bounds at 100,000 rows: queueguard behind the reader gives up with the "
        "catalog unchanged and its writers wait at most the largest attempt plus 1.5 s slack; "
        "without the reader writers wait at most its hold plus 1.5 s; the emulation's writers "
        "wait at least the reader's time.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--reader-s", type=float, default=5.0)
    parser.add_argument("--lock-timeout-ms", type=int, default=200)
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
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
    results = run(args, admin)
    meta = {"results": results, "load": (load_start, os.getloadavg()[0])}
    if args.json:
        print(json.dumps({"rows": args.rows, "cases": [r.as_json() for r in results]}, indent=2))
    section = render(args, server, meta)
    if not args.json:
        print(section)
    if args.docs:
        replace_section(DOCS, section)
        log(f"wrote the {SECTION!r} section of {DOCS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
