"""Online upgrade benchmark: `queueguard upgrade --online` while a v0.4 fleet dispatches, next
to the offline upgrade of a clone of the same database (docs/benchmarks.md, "Online upgrade").

    python -m bench.online  # 1,000,000 rows, 100 queues, docs
    python -m bench.online --rows 5000 --queues 20 --no-docs

In ONE run, on one PostgreSQL server (the embedded one by default):

1. builds a 003 database (`seed_v3`): `--rows` legacy task rows over `--queues` default
   queues, half of them in their `@auto` siblings, History for 90 % of the runs, a stale
   counter on every third queue; plus History for the tasks the benchmark's hosts will add.
   It is cloned twice (`CREATE DATABASE … TEMPLATE`): one clone per side.
2. online clone: `upgrade --online --phase expand`, then a fleet of v0.4 hosts
   (bench/online/fleet.py) starts on every default queue; a quiet baseline window; then
   `--phase migrate` (meanwhile scenario (b), bench/online/handover.py, rolls one queue's
   host from v0.3 to v0.4) and `--phase contract`, each a process of its own (its wall time,
   peak RSS from `os.wait4`, the server's WAL position around it, its JSON report); then the
   fleet drains every queue and the count check runs against History.
3. offline clone: the fleet's clients start with the offline `queueguard upgrade --force`
   and retry until the database is at 004 (a v0.4 host cannot start against 003 without a
   rollout); each queue's gap runs from the upgrade's start to its first dispatch after it.

Gaps are per queue: the longest time between two consecutive dispatches of one queue that
overlaps the window (bench/online/gaps.py), summarised across queues (p50, p99, max).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.commands import ROOT
from bench.common.doc_sections import replace_section
from bench.online.database import FLEET, build, legacy_counts, started
from bench.online.fleet import Fleet, FleetConfig, default_queues
from bench.online.gaps import summarize
from bench.online.handover import HandoverResult, run_handover
from bench.online.measure import upgrade_command, wal_bytes, wal_lsn
from bench.online.report import render
from bench.online.results import Counts, Results, Settings
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases

DOCS = ROOT / "docs" / "benchmarks.md"
HANDOVER_RUNS = 20_000  # History for the handover's tasks (it adds a few hundred)


def log(message: str) -> None:
    print(f"[online] {message}", file=sys.stderr, flush=True)


def _errors(fleet: Fleet) -> dict[str, Any]:
    return {k: {"count": n, "first": fleet.log.first_error[k]} for k, n in fleet.log.errors.items()}


def _wait_for_v03_gone(dsn: str, timeout_s: float = 10.0) -> None:
    """Contract refuses while a protocol-3 host is connected: the handover's v0.3 host has
    closed its connection, wait until the server has let its backend go."""
    deadline = time.monotonic() + timeout_s
    with connection(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name LIKE 'queueguard/3 %'"
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.05)


def _online(dsn: str, settings: Settings, results: Results) -> None:
    batch = ("--batch-size", str(settings.batch_size))
    log("online: expand")
    results.phases["expand"] = upgrade_command(dsn, "--online", "--phase", "expand", *batch)
    queues = default_queues(settings.queues)
    config = FleetConfig(settings.hosts, settings.period_s, settings.produce_per_s)
    fleet = Fleet(dsn, queues, config, runs=settings.fleet_runs)
    fleet.start()
    try:
        if not fleet.wait_ready(300):
            raise RuntimeError("the v0.4 fleet did not start (or dispatch) after expand")
        log(f"online: fleet of {len(fleet.hosts)} hosts running; baseline {settings.baseline_s}s")
        b0, lsn = time.monotonic(), wal_lsn(dsn)
        time.sleep(settings.baseline_s)
        b1 = time.monotonic()
        results.fleet_wal_per_s = wal_bytes(dsn, lsn, wal_lsn(dsn)) / (b1 - b0)
        handover: list[HandoverResult] = []
        rolled = threading.Thread(
            target=lambda: handover.append(run_handover(dsn, runs=HANDOVER_RUNS)),
            daemon=True,
        )
        log("online: migrate (and the v0.3 -> v0.4 handover on one queue)")
        m0 = time.monotonic()
        rolled.start()
        results.phases["migrate"] = upgrade_command(dsn, "--online", "--phase", "migrate", *batch)
        m1 = time.monotonic()
        rolled.join(timeout=300)
        results.handover = handover[0] if handover else None
        _wait_for_v03_gone(dsn)
        log("online: contract")
        c0 = time.monotonic()
        results.phases["contract"] = upgrade_command(dsn, "--online", "--phase", "contract", *batch)
        c1 = time.monotonic()
        time.sleep(settings.tail_s)
        seen = time.monotonic()
        times = fleet.log.times
        results.gaps["baseline"] = summarize(times, b0, b1, seen)
        results.gaps["online"] = summarize(times, m0, c1, seen)
        results.gaps["migrate"] = summarize(times, m0, m1, seen)
        results.gaps["contract"] = summarize(times, c0, c1, seen)
        log(f"online: baseline gaps {results.gaps['baseline']}")
        log(f"online: gaps {results.gaps['online']}; draining")
        d0 = time.monotonic()
        if not fleet.drain(settings.drain_timeout_s):
            log("online: the drain timed out")
        results.drain_s = time.monotonic() - d0
        log(f"online: drained in {results.drain_s:.0f}s")
    finally:
        fleet.stop()
    results.fleet_errors = _errors(fleet)
    results.counts = _count(dsn, fleet)


def _count(dsn: str, fleet: Fleet) -> Counts:
    added, delivered = set(fleet.log.added), fleet.log.delivered
    done = set(started(dsn, FLEET))
    with_history, legacy_started, rows_left = legacy_counts(dsn)
    return Counts(
        added=len(fleet.log.added),
        delivered=len(delivered),
        started=len(done),
        duplicates=len(delivered) - len(set(delivered)),
        lost=len(added - done),
        unexpected=len(done - added),
        legacy_with_history=with_history,
        legacy_delivered=sum(fleet.log.legacy.values()),
        legacy_started=legacy_started,
        rows_left=rows_left,
    )


def _offline(dsn: str, settings: Settings, results: Results) -> None:
    queues = default_queues(settings.queues)
    config = FleetConfig(settings.hosts, settings.period_s, settings.produce_per_s)
    fleet = Fleet(dsn, queues, config, runs=settings.fleet_runs)
    log("offline: upgrade --force, the fleet's clients retrying meanwhile")
    try:
        run = upgrade_command(dsn, "--force", started=lambda: fleet.start(retry=True))
        results.offline = run
        t0, t1 = run.started, run.started + run.wall_s
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not all(len(t) for t in fleet.log.times):
            time.sleep(0.05)
        results.offline_first_dispatch_s = time.monotonic() - t0
        time.sleep(settings.tail_s)
        results.gaps["offline"] = summarize(fleet.log.times, t0, t1, time.monotonic())
        log(f"offline: gaps {results.gaps['offline']}")
    finally:
        fleet.stop()
    results.fleet_errors.update({f"offline {k}": v for k, v in _errors(fleet).items()})


def run(
    rows: int = 1_000_000,
    queues: int = 100,
    *,
    docs: bool = False,
    admin_dsn: str | None = None,
    **overrides: Any,
) -> Results:
    """The whole benchmark; writes the "## Online upgrade" section when `docs`."""
    settings = Settings(rows=rows, queues=queues, **overrides)
    admin = admin_dsn or scratch.server_dsn()
    with connection(admin) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    results = Results(settings, f"PostgreSQL {row[0] if row else '?'}")
    results.measured_on = f"{datetime.now(UTC):%Y-%m-%d}"
    load_start = os.getloadavg()[0]
    with ScratchDatabases(admin, prefix="qg_online") as databases:
        log(f"building the 003 database: {rows:,} rows over {queues} queues")
        started_at = time.monotonic()
        template = build(
            databases, rows, queues, fleet_runs=settings.fleet_runs, handover_runs=HANDOVER_RUNS
        )
        name = scratch.dbname_of(template)
        online_dsn = databases.create(template=name)
        offline_dsn = databases.create(template=name)
        log(f"built and cloned in {time.monotonic() - started_at:.0f}s")
        _online(online_dsn, settings, results)
        _offline(offline_dsn, settings, results)
    results.load = (load_start, os.getloadavg()[0])
    # the figures first: a failure while writing the docs must not lose them
    print(json.dumps(results.as_json(), indent=2, default=str), flush=True)
    if docs:
        write_docs(results)
    return results


def write_docs(results: Results, compare: Results | None = None) -> None:
    replace_section(DOCS, render(results, compare))
    log(f"wrote the 'Online upgrade' section of {DOCS}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=100, help="default queues (+ @auto each)")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds")
    parser.add_argument("--admin-dsn", help="server to use (default: the embedded one)")
    parser.add_argument("--docs", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--from-json", type=Path, help="render the docs from a saved run")
    parser.add_argument("--compare-json", type=Path, help="with --from-json: a second run")
    args = parser.parse_args()
    if args.from_json:  # the figures of earlier runs (their stdout), rendered again

        def saved(path: Path) -> Results:
            return Results.from_json(json.loads(path.read_text(encoding="utf-8")))

        write_docs(saved(args.from_json), saved(args.compare_json) if args.compare_json else None)
        return 0
    results = run(
        args.rows,
        args.queues,
        docs=args.docs,
        admin_dsn=args.admin_dsn,
        hosts=args.hosts,
        batch_size=args.batch_size,
        baseline_s=args.baseline,
    )
    return 0 if results.counts is not None and results.counts.ok else 1


if __name__ == "__main__":
    sys.exit(main())
