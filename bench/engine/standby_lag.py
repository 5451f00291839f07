"""Benchmark: a real streaming standby's lag while a table is rewritten plain, rebuilt online,
and rebuilt online with `--max-lag` (docs/benchmarks.md, "Standby lag: plain and online").

A private primary with a hot standby (bench/topology/standby.py, the embedded binaries).
Each case on a database of its own: `items` (`--rows` rows, its key and an index), two
writers updating and inserting rows throughout, and the standby's replay paused `--pause` s in
every `--period` s (`pg_wal_replay_pause()` / `pg_wal_replay_resume()` on the standby: a
standby that falls behind now and then, as one under read load or across a slow link does;
not `recovery_min_apply_delay`, which holds the lag flat at the delay). The statement:
`ALTER TABLE items ALTER COLUMN v TYPE bigint` — plain, in one transaction; online, the shadow
rebuild (`rebuild.run`) with and without a lag limit. A sampler on the primary reads the
slowest standby's lag every 0.1 s as `--max-lag` reads it (`topology.LagWatch`: seconds
behind) and the WAL not yet replayed (`pg_stat_replication`: bytes behind).

    python -m bench.engine.standby_lag                 # 1,000,000 rows, --max-lag 1s
    python -m bench.engine.standby_lag --rows 100000 --no-docs
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import psycopg

from bench.common.commands import ROOT
from bench.common.doc_sections import replace_section
from bench.topology.standby import PrimaryWithStandby
from queueguard.engine import topology
from queueguard.engine.apply.session import Limits
from queueguard.engine.online import rebuild
from queueguard.engine.online.choose import REBUILD, Form
from queueguard.engine.online.context import Context
from queueguard.engine.online.rebuild.copy import Throttle

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Standby lag: plain and online"
STATEMENT = "ALTER TABLE items ALTER COLUMN v TYPE bigint"
BYTES_BEHIND = (
    "SELECT coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)), 0) "
    "FROM pg_stat_replication"
)


def log(message: str) -> None:
    print(f"[standby_lag] {message}", flush=True)


@dataclass
class Case:
    name: str
    seconds: float = 0.0
    lag_s: float = 0.0
    lag_bytes: int = 0
    waits: int = 0


class _Loop(threading.Thread):
    """`step` again and again until stopped."""

    def __init__(self, step: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.step, self.done = step, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.step()

    def stop(self) -> None:
        self.done.set()
        self.join()


def _fill(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, w text)")
        conn.execute(
            "INSERT INTO items SELECT g, g, md5(g::text) FROM generate_series(1, %s) g", (rows,)
        )
        conn.execute("CREATE INDEX items_w ON items (w)")
        conn.execute("VACUUM ANALYZE items")


def _writer(dsn: str, rows: int, seed: int) -> _Loop:
    conn = psycopg.connect(dsn, autocommit=True)
    pick = random.Random(seed)
    counter = iter(range(rows + 1 + seed * 10_000_000, 2**62))

    def step() -> None:
        if pick.random() < 0.5:
            conn.execute(
                "UPDATE items SET w = md5(random()::text) WHERE id = %s", (pick.randint(1, rows),)
            )
        else:
            conn.execute("INSERT INTO items VALUES (%s, 1, 'new')", (next(counter),))
        time.sleep(0.005)

    return _Loop(step)


def _duty(standby: str, pause_s: float, period_s: float) -> _Loop:
    conn = psycopg.connect(standby, autocommit=True)

    def step() -> None:
        conn.execute("SELECT pg_wal_replay_pause()")
        time.sleep(pause_s)
        conn.execute("SELECT pg_wal_replay_resume()")
        time.sleep(period_s - pause_s)

    return _Loop(step)


def _sampler(primary: str, case: Case) -> _Loop:
    conn = psycopg.connect(primary, autocommit=True)
    watch = topology.LagWatch()

    def step() -> None:
        with conn.cursor() as cursor:
            case.lag_s = max(case.lag_s, watch.read(cursor).seconds)
        row = conn.execute(BYTES_BEHIND).fetchone()
        case.lag_bytes = max(case.lag_bytes, int(row[0]) if row else 0)
        time.sleep(0.1)

    return _Loop(step)


def run_case(pair: PrimaryWithStandby, name: str, args: argparse.Namespace) -> Case:
    database = name.replace(" ", "_").replace("-", "")
    with psycopg.connect(pair.primary_dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    dsn = pair.primary_dsn(database)
    _fill(dsn, args.rows)
    pair.wait_replayed(120)
    case = Case(name)
    loops = [
        _writer(dsn, args.rows, 1),
        _writer(dsn, args.rows, 2),
        _duty(pair.standby_dsn(), args.pause, args.period),
        _sampler(pair.primary_dsn(), case),
    ]
    for loop in loops:
        loop.start()
    time.sleep(args.period)  # the lag the writers and the duty cycle cause alone, first
    began = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        if name == "plain":
            conn.execute(STATEMENT)
            conn.commit()
        else:
            limit = args.max_lag if name.endswith("--max-lag") else None

            def said(phase: str, done: int, total: int | None) -> None:
                if phase == "standby lag" and total is not None and done > total:
                    case.waits += 1

            rebuild.run(
                Context(conn, Limits()),
                Form(REBUILD, "items", STATEMENT),
                Throttle(max_lag_s=limit),
                said,
            )
    case.seconds = time.perf_counter() - began
    for loop in reversed(loops):
        loop.stop()
    with psycopg.connect(pair.standby_dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()")
    pair.wait_replayed(300)
    mib = case.lag_bytes / 2**20
    log(f"{name}: {case.seconds:.1f} s, largest lag {case.lag_s:.2f} s / {mib:.1f} MiB, "
        f"waited for the standby {case.waits} time(s)")  # fmt: skip
    return case


def render(cases: list[Case], args: argparse.Namespace, load: tuple[float, float]) -> str:
    lines = [
        SECTION,
        "",
        f"Command: `python -m bench.engine.standby_lag --rows {args.rows} --max-lag "
        f"{args.max_lag:g}` ({date.today().isoformat()}; a private primary and hot standby from "
        f"the embedded PostgreSQL binaries; {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; 1-minute load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end).",
        "",
        f"`items`: {args.rows:,} rows, its key and an index; two writers (updates and inserts, "
        f"one every 5 ms each); the standby's replay paused {args.pause:g} s in every "
        f"{args.period:g} s throughout. The statement: `{STATEMENT}` — plain, then the shadow "
        "rebuild without and with a lag limit, each on a database of its own. Lag sampled on "
        "the primary every 0.1 s: seconds behind as `--max-lag` reads them "
        "(`topology.LagWatch`), bytes of WAL not yet replayed (`pg_stat_replication`).",
        "",
        "| case | total | standby's largest lag | WAL not replayed, largest | checks over "
        "the limit |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in cases:
        lines.append(
            f"| {c.name} | {c.seconds:.1f} s | {c.lag_s:.2f} s | {c.lag_bytes / 2**20:.1f} MiB "
            f"| {c.waits} |"
        )
    plain, limited = cases[0], cases[-1]
    share = limited.lag_bytes / plain.lag_bytes if plain.lag_bytes else 0.0
    lines += [
        "",
        "The duty cycle alone keeps the standby up to its pause behind in seconds, whatever "
        "runs; what a case adds shows past that, and in the WAL waiting to be replayed. With "
        "the limit the rebuild's fill and replays wait while the standby is further behind than "
        "it (the progress line says `standby lag`; it never swaps then: "
        f"`tests/topology/test_standby_throttle.py`): the WAL not replayed peaked at "
        f"{share:.0%} of the plain statement's, for {limited.seconds / plain.seconds:.1f}× its "
        "time.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--max-lag", type=float, default=1.0, help="seconds")
    parser.add_argument("--pause", type=float, default=2.0)
    parser.add_argument("--period", type=float, default=3.0)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    start_load = os.getloadavg()[0]
    with PrimaryWithStandby() as pair:
        cases = [run_case(pair, n, args) for n in ("plain", "online", "online --max-lag")]
    text = render(cases, args, (start_load, os.getloadavg()[0]))
    print(text)
    if not args.no_docs:
        replace_section(DOCS, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
