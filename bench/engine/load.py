"""Writers keep inserting into `events` while a revision that locks it is applied: the driver
the test and the benchmark share.

- the set (`write_set`): a sqldir directory; V1 creates `events`, V2 takes ACCESS EXCLUSIVE on
  it (`ADD COLUMN x int DEFAULT 0`, then `ALTER COLUMN payload TYPE bigint`, which rewrites
  the table: its time grows with the rows `build` loads);
- the writers (`Writers`): N threads, each on its own autocommit connection, inserting one row
  per statement in a loop and recording every insert's latency; the longest is the writers'
  longest wait;
- the long reader (`Reader`): a transaction that read `events` (ACCESS SHARE) and stays open;
- the appliers: `queueguard.engine.apply.runner.upgrade` (one transaction per revision,
  `lock_timeout`, the retry ladder) or `apply_like_temporal_sql_tool`, an emulation written
  here of how temporal-sql-tool applies a version's statements (each on its own in
  autocommit, no lock or statement timeout, an error saying "already exists" skipped);
- `HoldSampler`: polls pg_locks for the ACCESS EXCLUSIVE lock the applier holds on `events`
  (the same measure for both appliers);
- `run_case`: one case on one database, in this order: writers warm up, the reader (if any)
  opens, the applier runs, the reader is released `reader_s` after the applier started (for
  queueguard: or when the upgrade returns, if later, so the reader outlives the whole ladder),
  the writers run a little longer and stop.

With the reader, an ALTER that waits without a lock_timeout queues behind it, and every
writer queues behind the ALTER (PostgreSQL grants locks in queue order): the writers stall
for as long as the reader stays, the outage of temporalio/temporal#6273. queueguard's ALTER
gives up after each attempt's lock_timeout, so the writers wait at most that long.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.common.sampler import Sampler
from queueguard import sets
from queueguard.engine import catalog
from queueguard.engine.apply.report import Step
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import APPLICATION_NAME, Limits
from queueguard.errors import LockTimeout
from queueguard.sets import MigrationSet

QUEUEGUARD = "queueguard"
EMULATION = "temporal-sql-tool (emulated)"
EMULATION_APPLICATION = "bench-temporal-sql-tool-emulation"
WRITER_APPLICATION = "bench-writer"
READER_APPLICATION = "bench-long-reader"
#: the revision the cases apply: V2 (V1 is the table, applied when the database is built)
SET_FILES = {
    "V1__events.sql": "CREATE TABLE events (\n"
    "    id bigserial PRIMARY KEY,\n"
    "    payload int NOT NULL,\n"
    "    at timestamptz NOT NULL DEFAULT now()\n"
    ");\n",
    "V2__events_wider.sql": "ALTER TABLE events ADD COLUMN x int DEFAULT 0;\n"
    "ALTER TABLE events ALTER COLUMN payload TYPE bigint;\n",
}
BASE = "1"
INSERT = "INSERT INTO events (payload) VALUES (%s)"


def write_set(folder: Path) -> MigrationSet:
    """The sqldir set in `folder` (created), loaded."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in SET_FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return sets.load(folder, "sqldir")


def build(mset: MigrationSet, dsn: str, rows: int) -> None:
    """`dsn` at V1 (by queueguard, so its ledger records it) with `rows` events, analysed."""
    upgrade(mset, dsn, to=BASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO events (payload) SELECT g FROM generate_series(1, %s) AS g", (rows,)
        )
        conn.execute("VACUUM (ANALYZE) events")


def apply_like_temporal_sql_tool(mset: MigrationSet, dsn: str, after: str | None = BASE) -> None:
    """The revisions after `after`, applied the way temporal-sql-tool applies a version's
    statements, as modelled here: each statement on its own in autocommit, no
    lock_timeout and no statement_timeout, an error whose message says "already exist(s)"
    skipped. An emulation written for this benchmark, not Temporal's code; it writes no
    bookkeeping (the cases compare what the statements do to the writers)."""
    with psycopg.connect(dsn, autocommit=True, application_name=EMULATION_APPLICATION) as conn:
        conn.execute("SET lock_timeout = 0")
        conn.execute("SET statement_timeout = 0")
        for rev in mset.pending(after, None):
            for statement in rev.statements or ():
                try:
                    conn.execute(statement)
                except psycopg.Error as exc:
                    if "already exist" not in str(exc):
                        raise


class Writers:
    """`n` threads inserting into `events` until stopped, each insert's latency recorded."""

    def __init__(self, dsn: str, n: int) -> None:
        self.dsn = dsn
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Barrier(n + 1)
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        self._ready.wait(timeout=60)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _run(self, index: int) -> None:
        mine: list[float] = []
        try:
            with psycopg.connect(
                self.dsn, autocommit=True, application_name=WRITER_APPLICATION
            ) as conn:
                self._ready.wait(timeout=60)
                n = index * 1_000_000_000
                while not self._stop.is_set():
                    n += 1
                    began = time.perf_counter()
                    conn.execute(INSERT, (n % 2_000_000_000,))
                    mine.append(time.perf_counter() - began)
        except (psycopg.Error, threading.BrokenBarrierError) as exc:
            with self._lock:
                self.errors.append(f"writer {index}: {exc}")
        with self._lock:
            self.latencies += mine


class Reader:
    """A transaction that read `events` (ACCESS SHARE on it) and stays open until released."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, application_name=READER_APPLICATION)
        self.conn.execute("SELECT count(*) FROM events").fetchone()
        self.opened = time.perf_counter()
        self.held_s = 0.0
        self._once = threading.Lock()

    def release(self) -> None:
        with self._once:
            if self.conn.closed:
                return
            self.conn.rollback()
            self.held_s = time.perf_counter() - self.opened
            self.conn.close()


class HoldSampler(Sampler):
    """Polls pg_locks every `interval_s` for a granted ACCESS EXCLUSIVE lock on `events` held
    by the applier's session: the longest unbroken stretch it was seen (to within one
    interval)."""

    def __init__(self, dsn: str, applications: tuple[str, ...], interval_s: float = 0.005):
        self.dsn = dsn
        self.applications = list(applications)
        self.interval_s = interval_s
        self.longest_s = 0.0
        self.samples = 0
        super().__init__()

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT 'events'::regclass::oid").fetchone()
            assert row is not None
            relation = row[0]
            query = (
                "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE l.locktype = 'relation' AND l.relation = %s AND l.granted "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.mode = 'AccessExclusiveLock' AND a.application_name = ANY(%s))"
            )
            since: float | None = None
            while not self._stop.is_set():
                now = time.perf_counter()
                found = conn.execute(query, (relation, self.applications)).fetchone()
                self.samples += 1
                if found and found[0]:
                    since = now if since is None else since
                    self.longest_s = max(self.longest_s, now - since)
                else:
                    since = None
                time.sleep(self.interval_s)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class CaseResult:
    applier: str  # QUEUEGUARD or EMULATION
    reader_s: float | None  # how long the reader was asked to stay (None: no reader)
    outcome: str  # "applied" or the error's class and message
    applied: bool
    apply_s: float  # the applier's wall time
    longest_s: float  # the writers' longest insert
    p99_s: float
    inserts: int
    #: ACCESS EXCLUSIVE on events as sampled in pg_locks (longest unbroken stretch)
    sampled_hold_s: float
    #: queueguard's own measure: its first statement's start to its commit (Step.held_s)
    held_s: float | None = None
    reader_held_s: float | None = None  # how long the reader's transaction actually stayed
    catalog_unchanged: bool = False
    lock_waits: int = 0
    writer_errors: list[str] = field(default_factory=list)

    @property
    def case(self) -> str:
        reader = f"long reader ({self.reader_s:g} s)" if self.reader_s else "no reader"
        return f"{self.applier}, {reader}"

    def as_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "applier": self.applier,
            "reader_s": self.reader_s,
            "reader_held_s": self.reader_held_s,
            "outcome": self.outcome,
            "applied": self.applied,
            "apply_s": self.apply_s,
            "writers_longest_s": self.longest_s,
            "writers_p99_s": self.p99_s,
            "inserts": self.inserts,
            "lock_hold_sampled_s": self.sampled_hold_s,
            "lock_hold_runner_s": self.held_s,
            "catalog_unchanged": self.catalog_unchanged,
            "lock_waits": self.lock_waits,
            "writer_errors": self.writer_errors,
        }


def run_case(
    mset: MigrationSet,
    dsn: str,
    applier: str,
    *,
    reader_s: float | None,
    limits: Limits,
    writers: int = 3,
    warmup_s: float = 0.5,
    cooldown_s: float = 0.3,
) -> CaseResult:
    """One case on `dsn` (a database at V1, see `build`); see the module doc."""
    before = catalog.fingerprint(dsn)
    sampler = HoldSampler(dsn, (APPLICATION_NAME, EMULATION_APPLICATION))
    load = Writers(dsn, writers)
    load.start()
    sampler.start()
    reader: Reader | None = None
    timer: threading.Timer | None = None
    steps: list[Step] = []
    lock_waits = 0
    try:
        time.sleep(warmup_s)
        if reader_s is not None:
            reader = Reader(dsn)
        started = time.perf_counter()
        if reader is not None and reader_s is not None and applier != QUEUEGUARD:
            timer = threading.Timer(reader_s, reader.release)  # the emulation waits for it
            timer.start()
        try:
            if applier == QUEUEGUARD:
                report = upgrade(mset, dsn, limits=limits, on_step=steps.append)
                lock_waits = report.lock_waits
            else:
                apply_like_temporal_sql_tool(mset, dsn)
            outcome, applied = "applied", True
        except LockTimeout as exc:
            outcome, applied = f"LockTimeout: {exc}", False
            lock_waits = limits.retries + 1
        apply_s = time.perf_counter() - started
        if timer is not None:
            timer.join()
        if reader is not None and reader_s is not None:
            # queueguard's reader stays its full time even if the upgrade gave up sooner, and
            # past it if the upgrade took longer: it outlives every attempt of the ladder
            time.sleep(max(0.0, started + reader_s - time.perf_counter()))
            reader.release()
        time.sleep(cooldown_s)
    finally:
        if timer is not None:
            timer.cancel()
        if reader is not None:
            reader.release()
        sampler.stop()
        load.stop()
    return CaseResult(
        applier=applier,
        reader_s=reader_s,
        outcome=outcome,
        applied=applied,
        apply_s=apply_s,
        longest_s=max(load.latencies, default=0.0),
        p99_s=percentile(load.latencies, 99),
        inserts=len(load.latencies),
        sampled_hold_s=sampler.longest_s,
        held_s=max((s.held_s for s in steps), default=0.0) if applier == QUEUEGUARD else None,
        reader_held_s=reader.held_s if reader is not None else None,
        catalog_unchanged=catalog.fingerprint(dsn) == before,
        lock_waits=lock_waits,
        writer_errors=load.errors,
    )
