"""Benchmark: `upgrade --migrations DIR --online` against the plain upgrade, side by side in
one run, on a table shaped like Temporal's `executions_visibility` (docs/benchmarks.md,
"Online apply of an unchanged set").

What it does, on one server:

1. applies Temporal's real visibility files up to `--from` (default 1.12; pass the folder of
   a checkout of Temporal's public repository, `schema/postgresql/v12/visibility/versioned`:
   the files are read from there, never copied into this repository) to a database, fills
   `executions_visibility` with `--rows` rows, VACUUM ANALYZE, and clones it once per case;
2. on each clone, with `--writers` threads inserting, updating (a column set to NULL among
   them) and deleting rows from before the upgrade starts to after it ends, upgrades to
   `--to` (default 1.13: Temporal's combined 1.10–1.13 file, a stored generated column added
   to the filled table — a rewrite under ACCESS EXCLUSIVE):
   - plain: `upgrade --migrations DIR` (one transaction per version);
   - online: `upgrade --migrations DIR --online` (plan, proof, forms; the plain statement's
     rewrite becomes a shadow rebuild);
3. prints one table: the total time (online: plan and proof included) and its ratio to the
   plain run, the longest read- or write-blocking lock held on the table (sampled in
   pg_locks every 5 ms), the writers' longest wait, and the rebuild's fill rate.

Run from the repository root:

    python -m bench.engine.online --temporal PATH/schema/postgresql/v12/visibility/versioned
    python -m bench.engine.online --temporal … --rows 200000 --no-docs
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.numeric import Int8

from bench.common.commands import ROOT, shown
from bench.common.cpu_split import CpuSplit, shares
from bench.common.doc_sections import replace_section
from bench.common.sampler import Sampler
from bench.common.temporal_visibility import FILL, TABLE, build
from queueguard import sets
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.online.upgrade import upgrade_online
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets import temporal

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Online apply of an unchanged set"
BLOCKING = ("ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class Writers:
    """Threads inserting, updating and deleting rows until stopped; each statement's latency."""

    def __init__(self, dsn: str, n: int, rows: int) -> None:
        self.dsn, self.rows = dsn, rows
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.ops = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=300)

    def _run(self, index: int) -> None:
        rng = random.Random(index)
        mine: list[float] = []
        next_id = self.rows + 1 + index * 10_000_000
        try:
            with psycopg.connect(self.dsn, autocommit=True, application_name="bench-writer") as c:
                while not self._stop.is_set():
                    began = time.perf_counter()
                    choice = rng.random()
                    if choice < 0.4:
                        # bigint: generate_series(smallint, smallint) is ambiguous
                        c.execute(FILL, {"first": Int8(next_id), "last": Int8(next_id)})
                        next_id += 1
                    elif choice < 0.9:
                        c.execute(
                            f"UPDATE {TABLE} SET status = %s, close_time = NULL "
                            "WHERE namespace_id = %s AND run_id = md5(%s::text)",
                            (rng.randrange(7), f"ns{(k := rng.randrange(self.rows)) % 7}", k),
                        )
                    else:
                        k = rng.randrange(self.rows)
                        c.execute(
                            f"DELETE FROM {TABLE} "
                            "WHERE namespace_id = %s AND run_id = md5(%s::text)",
                            (f"ns{k % 7}", k),
                        )
                    mine.append(time.perf_counter() - began)
        except psycopg.Error as exc:
            with self._lock:
                self.errors.append(f"writer {index}: {exc}")
        with self._lock:
            self.latencies += mine
            self.ops += len(mine)


class LockSampler(Sampler):
    """The longest unbroken stretch a read- or write-blocking lock on the live table was
    seen granted to a queueguard session (polled every `interval_s`)."""

    def __init__(
        self, dsn: str, table: str = TABLE, interval_s: float = 0.005, app_name: str = "queueguard%"
    ) -> None:
        self.dsn, self.table, self.interval_s, self.app_name = dsn, table, interval_s, app_name
        self.longest_s = 0.0
        self.mode = ""
        #: the machine's 1-minute load average, read about once a second
        self.loads: list[float] = []
        super().__init__()

    def _run(self) -> None:
        query = (
            "SELECT l.pid, l.mode FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            f"WHERE l.locktype = 'relation' AND l.relation = to_regclass('public.{self.table}') "
            "AND l.granted AND l.mode = ANY(%s) AND a.application_name LIKE %s"
        )
        since: dict[tuple[int, str], float] = {}
        load_read = 0.0
        with psycopg.connect(self.dsn, autocommit=True, application_name="bench-sampler") as c:
            while not self._stop.is_set():
                now = time.perf_counter()
                if now - load_read >= 1.0:
                    self.loads.append(os.getloadavg()[0])
                    load_read = now
                found = c.execute(query, (list(BLOCKING), self.app_name)).fetchall()
                held = {(r[0], r[1]) for r in found}
                for key in list(since):
                    if key not in held:
                        del since[key]
                for key in held:
                    start = since.setdefault(key, now)
                    if now - start > self.longest_s:
                        self.longest_s, self.mode = now - start, key[1]
                time.sleep(self.interval_s)


class FillRate:
    """The rebuild's progress callback: rows per second of the target's fill phase, and the
    seconds spent in each phase. The proof's rebuild on its sample copy reports first; each
    rebuild starts with "capture", which starts the record over, so the target's stays."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.rows = 0
        self.seconds = 0.0
        #: (phase, when it was entered), in order; a phase entered again appears again
        self.timeline: list[tuple[str, float]] = []
        #: (step, when it began) of what comes before the rebuild: sample, plan, proof
        self.steps: list[tuple[str, float]] = []

    def tell(self, message: str) -> None:
        """upgrade_online's `tell`: each message starts with its step's name."""
        step = message.split(":", 1)[0]
        if not self.steps or self.steps[-1][0] != step:
            self.steps.append((step, time.perf_counter()))

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        now = time.perf_counter()
        if phase == "capture" and done == 1:
            self.started, self.rows, self.seconds, self.timeline = None, 0, 0.0, []
        if not self.timeline or self.timeline[-1][0] != phase:
            self.timeline.append((phase, now))
        if phase != "fill":
            return
        self.started = self.started or now
        self.rows, self.seconds = done, now - self.started

    def windows(self, began: float, end: float) -> list[tuple[str, float, float]]:
        """(phase, from, to) in order; before the target's rebuild, the steps upgrade_online
        told (sample, plan, proof); "swap" runs to the run's end (the old table's drop, the
        revision's statements after the rebuild)."""
        marks = [("before", began), *self.steps, *self.timeline, ("end", end)]
        return [(name, t, t_next) for (name, t), (_, t_next) in itertools.pairwise(marks)]

    def durations(self, began: float, end: float) -> dict[str, float]:
        """Seconds per phase, summed over its stretches."""
        spent: dict[str, float] = {}
        for name, t, t_next in self.windows(began, end):
            spent[name] = spent.get(name, 0.0) + t_next - t
        return {name: round(seconds, 1) for name, seconds in spent.items()}

    def cpu(self, split: CpuSplit, began: float, end: float) -> dict[str, dict[str, float]]:
        """The CPU seconds of each kind of process per phase, summed over its stretches."""
        spent: dict[str, dict[str, float]] = {}
        for name, t, t_next in self.windows(began, end):
            phase = spent.setdefault(name, {})
            for kind, seconds in split.between(t, t_next).items():
                phase[kind] = round(phase.get(kind, 0.0) + seconds, 1)
        return spent


def measured(name: str, total: float, sampler: LockSampler, writers: Writers) -> dict[str, Any]:
    """What every side-by-side case reports: its time, the longest blocking lock on the
    table, the writers' longest wait and how much they did."""
    return {
        "case": name,
        "total_s": round(total, 2),
        "longest_lock_ms": round(sampler.longest_s * 1000, 1),
        "lock_mode": sampler.mode,
        "writer_longest_ms": round(max(writers.latencies, default=0) * 1000, 1),
        "writer_ops": writers.ops,
    }


def case(name: str, dsn: str, folder: Path, to: str, rows: int, writers_n: int) -> dict[str, Any]:
    mset = sets.load(folder)
    writers, sampler, fill = Writers(dsn, writers_n, rows), LockSampler(dsn), FillRate()
    cpu = CpuSplit(dsn)
    sampler.start()
    cpu.start()
    writers.start()
    time.sleep(1.0)
    began = time.perf_counter()
    if name == "plain":
        upgrade(mset, dsn, to=to)
    else:
        upgrade_online(mset, dsn, to=to, options={"on_progress": fill}, tell=fill.tell)
    ended = time.perf_counter()
    total = ended - began
    time.sleep(1.0)
    writers.stop()
    sampler.stop()
    cpu.stop()
    if writers.errors:
        raise SystemExit(f"{name}: writers failed: {writers.errors[:3]}")
    return {
        **measured(name, total, sampler, writers),
        "fill_rows_s": round(fill.rows / fill.seconds) if fill.seconds else None,
        "phases_s": fill.durations(began, ended),
        "load": [round(min(sampler.loads), 1), round(max(sampler.loads), 1)],
        "cpu_s": cpu.between(began, ended),
        "phases_cpu_s": fill.cpu(cpu, began, ended),
    }


def render(results: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    plain = next(r for r in results if r["case"] == "plain")
    lines = [
        SECTION,
        "",
        f"`{command}` — {args.rows:,} rows in `{TABLE}` at Temporal's {args.start} "
        f"(its real files and indexes), upgraded to {args.to} while {args.writers} writers insert, "
        "update (setting a column to NULL) and delete; both cases in one run on one server "
        f"({platform.machine()}, {platform.python_version()}). Goals: online's longest blocking "
        "lock < 1 s, writers' longest wait < 1.5 s, total ≤ 2× plain.",
        "",
        "| case | total | vs plain | longest blocking lock on the table | writers' longest wait "
        "| writer statements | fill | load average (1 min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = r["total_s"] / plain["total_s"] if plain["total_s"] else 0
        fill = f"{r['fill_rows_s']:,} rows/s" if r["fill_rows_s"] else "—"
        lines.append(
            f"| {r['case']} | {r['total_s']:.1f} s | {ratio:.2f}× | "
            f"{r['longest_lock_ms']:,.0f} ms {r['lock_mode']} | {r['writer_longest_ms']:,.0f} ms "
            f"| {r['writer_ops']:,} | {fill} | {r['load'][0]}–{r['load'][1]} |"
        )
    online = next(r for r in results if r["case"] == "online")
    # the rebuild says "indexes" before each build and "replay" after it: the builds'
    # seconds, the analyses and the deduplication before the key's, and the replays after
    phases = dict(online["phases_s"])
    names = {"indexes": "index builds", "replay": "replays after them"}
    phases = {names.get(name, name): seconds for name, seconds in phases.items()}
    spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases.items())
    cpu_lines = [f"- {r['case']}, the whole case: {shares(r['cpu_s'])}" for r in results]
    builds = online["phases_cpu_s"].get("indexes")
    if builds:
        cpu_lines.append(f"- online, its index builds: {shares(builds)}")
    lines += [
        "",
        "Online's total includes `plan` (a sample copied and every statement traced) and the "
        "proof (two more scratch copies, plain and online, their dumps and rows compared). "
        "Anchors: pg-osc copies ≈ 110 k rows/s and swaps in 0.45–0.84 s at 2 M rows; pgroll "
        "backfills 9.4 k rows/s at 300 k.",
        "",
        f"Online's time by phase: {spent} (sample: the target's schema and a sample of its "
        "rows copied; plan: every statement traced on a clone; proof: plain and online on two "
        "more clones, their dumps and rows compared; swap: to the "
        "run's end, the old table's drop and the revision's statements after the rebuild "
        "included). Load average: the machine's, sampled each second during the case (2 "
        "cores, shared with other work).",
        "",
        "Where the cores went — CPU seconds of the server's processes by kind, read from "
        "/proc each second (`bench/common/cpu_split.py`; queueguard: the upgrade's sessions — "
        "its own, its pg_dump's and psql's — and their parallel workers; I/O workers: "
        "PostgreSQL 18's `io_method = worker`; other: the bench's samplers, the checkpointer, "
        "the WAL writer):",
        "",
        *cpu_lines,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine.online", description=__doc__)
    parser.add_argument("--temporal", type=Path, required=True, help="Temporal's versioned dir")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--start", default="1.12")
    parser.add_argument("--to", default="1.13")
    parser.add_argument("--admin-dsn", default=None)
    parser.add_argument(
        "--template",
        help="a database built by an earlier run (at --start, --rows rows): cloned, not built",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    admin = args.admin_dsn or scratch.server_dsn()
    command = shown(
        "bench.engine.online", "--temporal", "…/visibility/versioned", "--rows", str(args.rows)
    )
    with ScratchDatabases(admin, prefix="qgbench") as databases:
        template = args.template
        if template is None:
            log(f"building {args.rows:,} rows at {args.start}")
            template = build(admin, databases, args.temporal, args.start, args.rows)
        results = []
        for name in ("plain", "online"):
            dsn = databases.create(template=template)
            with psycopg.connect(dsn) as conn:  # Temporal keys its version row on the name
                temporal.take_over_version(conn, template)
            log(f"case {name}")
            results.append(case(name, dsn, args.temporal, args.to, args.rows, args.writers))
            log(json.dumps(results[-1]))
            databases.drop(dsn)  # at 1 M rows a clone takes ~16 GB: one at a time
    if args.json:
        print(json.dumps(results, indent=2))
    section = render(results, args, command)
    print(section)
    if not args.no_docs:
        replace_section(DOCS, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
