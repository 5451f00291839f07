"""Chaos scenario 4: lock contention during the upgrade.

A 003 database of `--rows` task rows serves `--writers` v0.3 hosts (the released statement
catalog, `queueguard.queue_schema.legacy.V03Worker`, each appending to its own queue as fast as it
can, every append timed) while long transactions hold locks that conflict with 004's
ACCESS EXCLUSIVE locks (task_queues, then tasks, then runtime_protocol):

- a reader's open transaction on tasks (ACCESS SHARE);
- a writer idle in transaction with a row of task_queues updated (ROW EXCLUSIVE);
- a long-running query on tasks;
- a SHARE lock on runtime_protocol (held after task_queues and tasks are already locked);
- a SHARE UPDATE EXCLUSIVE lock on tasks (what VACUUM/ANALYZE take).

For each blocker the upgrade (lock timeout 200 ms, 3 retries: 200, 300, 450, 675 ms with
jittered pauses; --force, since v0.3 hosts are connected on purpose) must retry within its
ladder and then fail cleanly: LockTimeout, the database byte-identical to before. The v0.3
writers keep committing throughout and are never blocked longer than the largest lock
timeout of the ladder (plus scheduling slack): their worst latency is the figure. Last, a
blocker released in the middle of the ladder: the upgrade succeeds with lock waits counted,
no writer row is lost (every committed append is in the upgraded tasks), and the writers
are fenced (their next append fails with a range conflict or the protocol handshake).

    python -m bench.chaos.lock_contention            # 100k rows, 4 writers
    python -m bench.chaos.lock_contention --rows 5000 --no-docs
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench.common.databases import query, scratch_databases
from bench.common.fingerprints import upgrade_state
from bench.common.report import record, say, seconds
from bench.common.v3_database import build_template
from queueguard.core.history import task_payload
from queueguard.engine.apply.report import UpgradeReport
from queueguard.errors import LockTimeout, QueueguardError
from queueguard.pg.scratch import dbname_of
from queueguard.queue_schema.legacy import LegacyQueue, V03Worker
from queueguard.queue_schema.runner import upgrade

CI_TEST = (
    "`tests/upgrade/migrations/test_locks.py::test_lock_contention_times_out_retries_fails_cleanly_and_"
    "never_stalls_writers`, `…::test_lock_timeout_then_success_counts_lock_waits` (existing)"
)
#: the upgrade's ladder: a 200 ms lock timeout, 3 retries (200, 300, 450, 675 ms)
LOCK_TIMEOUT_MS, RETRIES = 200, 3
LARGEST_TIMEOUT_S = LOCK_TIMEOUT_MS / 1000 * 1.5**RETRIES  # 675 ms
SLACK_S = 0.5  # a loaded 2-core machine: scheduling, commit fsync


class Writer(threading.Thread):
    def __init__(self, dsn: str, n: int) -> None:
        super().__init__(daemon=True)
        self.worker = V03Worker(dsn, host_id=f"writer-{n}", driver="psycopg")
        self.queue = LegacyQueue("contention", f"w{n}")
        self.latencies: list[tuple[float, float]] = []  # (started at, seconds)
        self.committed = 0
        self.fenced: str | None = None
        self.fenced_after_s = 0.0
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self.worker.start()
            self.worker.load(self.queue)
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    run_id = str(uuid.uuid4())  # a run History does not know: obsolete
                    self.worker.append(
                        self.queue,
                        task_payload("contention", f"wf-{run_id[:8]}", run_id, "workflow", 1),
                    )
                except QueueguardError as exc:  # fenced by 004: StaleRangeError / protocol
                    self.fenced = type(exc).__name__
                    self.fenced_after_s = time.monotonic() - started  # queued behind 004
                    return
                self.latencies.append((started, time.monotonic() - started))
                self.committed += 1
                time.sleep(0.002)
        except BaseException as exc:
            self.error = exc
        finally:
            self.worker.close()


@dataclass
class Round:
    blocker: str
    outcome: str
    elapsed_s: float
    lock_waits: int
    writer_worst_s: float
    unchanged: bool


@dataclass
class Result:
    rows: int
    writers: int
    rounds: list[Round] = field(default_factory=list)
    committed: int = 0
    lost: int = 0
    fenced: Counter[str] = field(default_factory=Counter)
    worst_s: float = 0.0
    fenced_wait_s: float = 0.0  # the longest append that waited for 004 and was then fenced
    violations: list[str] = field(default_factory=list)


BLOCKERS = {
    "reader's open transaction on tasks (ACCESS SHARE)": ["BEGIN", "SELECT count(*) FROM tasks"],
    "writer idle in transaction on task_queues (ROW EXCLUSIVE)": [
        "BEGIN",
        "UPDATE task_queues SET ack_level = ack_level WHERE physical_queue = 'bulk/f1/workflow/0'",
    ],
    "SHARE lock on runtime_protocol": ["BEGIN", "LOCK TABLE runtime_protocol IN SHARE MODE"],
    "SHARE UPDATE EXCLUSIVE on tasks (as VACUUM)": [
        "BEGIN",
        "LOCK TABLE tasks IN SHARE UPDATE EXCLUSIVE MODE",
    ],
}
LONG_QUERY = "long-running query on tasks"


class Blocker:
    def __init__(self, dsn: str, kind: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, application_name="chaos-blocker")
        self.kind = kind
        self.thread: threading.Thread | None = None
        if kind == LONG_QUERY:
            pid = self.conn.info.backend_pid
            self.pid = pid
            self.thread = threading.Thread(target=self._long, daemon=True)
            self.thread.start()
            time.sleep(0.3)
        else:
            for statement in BLOCKERS[kind]:
                self.conn.execute(statement)

    def _long(self) -> None:
        with contextlib.suppress(psycopg.Error):  # cancelled on release
            self.conn.execute("SELECT pg_sleep(60) FROM (SELECT 1 FROM tasks LIMIT 1) t")

    def release(self, admin: str) -> None:
        if self.thread is not None:
            query(admin, "SELECT pg_cancel_backend(%s)", (self.pid,))
            self.thread.join(10)
        else:
            self.conn.execute("ROLLBACK")
        self.conn.close()


def upgrade_on_the_ladder(dsn: str) -> UpgradeReport:
    """The upgrade under test: --force (v0.3 hosts are connected on purpose), the ladder."""
    return upgrade(
        dsn, force=True, progress=False, lock_timeout_ms=LOCK_TIMEOUT_MS, retries=RETRIES
    )


def worst_during(writers: list[Writer], start: float, end: float) -> float:
    """The worst latency of appends that started or were in flight during [start, end]."""
    worst = 0.0
    for w in writers:
        for began, took in list(w.latencies):
            if began <= end and began + took >= start:
                worst = max(worst, took)
    return worst


def run(*, rows: int = 100_000, writers: int = 4, log: Any = say) -> Result:
    with scratch_databases() as databases:
        template = build_template(databases, rows)
        dsn = databases.create(template=dbname_of(template))
        databases.drop(template)
        return contend(dsn, databases.admin_dsn, Result(rows, writers), log)


def contend(dsn: str, admin: str, result: Result, log: Any) -> Result:
    """The rounds on a 003 database: one per blocker, then one released mid-ladder."""
    writers = result.writers
    threads = [Writer(dsn, n) for n in range(writers)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        for kind in [*BLOCKERS, LONG_QUERY]:
            before = fingerprint_without_writers(dsn)
            blocker = Blocker(dsn, kind)
            started = time.monotonic()
            outcome, waits = "succeeded", 0
            try:
                report = upgrade_on_the_ladder(dsn)
                waits = report.lock_waits
            except LockTimeout:
                outcome = "LockTimeout"
            finally:
                elapsed = time.monotonic() - started
                blocker.release(admin)
            worst = worst_during(threads, started, started + elapsed)
            unchanged = fingerprint_without_writers(dsn) == before
            result.rounds.append(Round(kind, outcome, elapsed, waits, worst, unchanged))
            log(f"  {kind}: {outcome} after {elapsed:.2f} s; writers' worst {worst * 1000:.0f} ms")
            if outcome != "LockTimeout" or not unchanged:
                result.violations.append(f"{kind}: {outcome}, unchanged={unchanged}")
            time.sleep(0.5)
        # Released in the middle of the ladder: the upgrade goes through.
        blocker = Blocker(dsn, "reader's open transaction on tasks (ACCESS SHARE)")
        timer = threading.Timer(0.5, blocker.release, args=(admin,))
        started = time.monotonic()
        timer.start()
        report = upgrade_on_the_ladder(dsn)
        elapsed = time.monotonic() - started
        timer.join()
        worst = worst_during(threads, started, started + elapsed)
        result.rounds.append(
            Round(
                "blocker released mid-ladder", "succeeded", elapsed, report.lock_waits, worst, False
            )
        )
        log(f"  released mid-ladder: applied {report.applied} with {report.lock_waits} lock waits")
        if report.applied != ["004"] or report.lock_waits < 1:
            result.violations.append(f"mid-ladder release: {report.as_json()}")
        deadline = time.monotonic() + 30
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for t in threads:
            t.stop.set()
            t.join(10)
    for t in threads:
        if t.error is not None:
            result.violations.append(f"{t.worker.host_id}: {t.error!r}")
        if t.fenced is None:
            result.violations.append(f"{t.worker.host_id} was never fenced")
        result.fenced[str(t.fenced)] += 1
        result.fenced_wait_s = max(result.fenced_wait_s, t.fenced_after_s)
        result.committed += t.committed
    stored = query(dsn, "SELECT count(*) FROM tasks WHERE physical_queue LIKE 'contention/%'")
    result.lost = result.committed - stored[0][0]
    if result.lost:
        result.violations.append(f"{result.lost} committed v0.3 appends missing after the upgrade")
    # While the ladder waits, a writer queues behind the lock request at most one lock timeout;
    # once 004 holds its locks it migrates, and the writers queued behind it are fenced.
    result.worst_s = max(r.writer_worst_s for r in result.rounds if r.outcome == "LockTimeout")
    if result.worst_s > LARGEST_TIMEOUT_S + SLACK_S:
        result.violations.append(f"a writer was blocked {result.worst_s:.3f} s")
    return result


def fingerprint_without_writers(dsn: str) -> Any:
    """The fingerprint of everything the writers do not touch (they keep appending)."""
    fp = upgrade_state(dsn)
    fp["tasks"] = query(
        dsn,
        "SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM tasks t "
        "WHERE physical_queue NOT LIKE 'contention/%'",
    )[0]
    fp["task_queues"] = query(
        dsn,
        "SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM task_queues t "
        "WHERE physical_queue NOT LIKE 'contention/%'",
    )[0]
    return fp


def check(result: Result) -> None:
    assert not result.violations, result.violations


def report(result: Result) -> None:
    failed = [r for r in result.rounds if r.outcome == "LockTimeout"]
    row = {
        "Scenario": "Lock contention during upgrade",
        "Scale": f"003→004 on {result.rows:,} rows, {result.writers} v0.3 writers appending "
        "throughout, ladder 200/300/450/675 ms",
        "Faults injected": f"{len(failed)} kinds of long lock holder (each outlasting the "
        "ladder) + 1 released mid-ladder",
        "Tasks produced": f"{result.committed:,} v0.3 appends committed during the rounds",
        "Lost": result.lost,
        "Duplicated-and-rejected": "n/a",
        "Worst stall": f"{seconds(result.worst_s)} (a writer's worst append; bound "
        f"{LARGEST_TIMEOUT_S * 1000:.0f} ms + slack)",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        "| blocker | upgrade | elapsed | lock waits | writers' worst append | database unchanged |",
        "|---|---|---|---|---|---|",
    ]
    for r in result.rounds:
        unchanged = "yes" if r.unchanged else "n/a (upgraded)" if r.outcome == "succeeded" else "NO"
        details.append(
            f"| {r.blocker} | {r.outcome} | {seconds(r.elapsed_s)} | {r.lock_waits or '—'} "
            f"| {seconds(r.writer_worst_s)} | {unchanged} |"
        )
    details.append("")
    details.append(
        f"After the upgrade every v0.3 writer was fenced: {dict(result.fenced)}. While 004 itself "
        "ran (its ACCESS EXCLUSIVE locks held), writers' appends queued behind it for up to "
        f"{seconds(result.fenced_wait_s)} and were then refused (the fence): the lock-timeout "
        "bound applies while the upgrade waits for its locks, not while it migrates."
    )
    record(4, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 4: lock contention, {args.rows:,} rows, {args.writers} v0.3 writers")
    result = run(rows=args.rows, writers=args.writers)
    say(f"  violations: {result.violations}")
    check(result)
    if not args.no_docs:
        report(result)
    say("the upgrade failed cleanly under every blocker; writers never waited past the ladder")


if __name__ == "__main__":
    main()
