"""Chaos scenario 6: unknown commit outcome.

A private PostgreSQL server listens on 127.0.0.1 (password login); an in-process TCP proxy
sits between it and one Matching host. Two producer threads spool continuously and one
poller dispatches and acks, all through the proxy. Every few milliseconds the main thread
arms the proxy to cut the next connection that commits a chosen statement — an append, a
checkpoint, or a queue load's COMMIT — right after the client sent the commit message:

- `reply-lost`: the message is forwarded, the server commits, the answer never arrives;
- `request-lost`: the message is dropped, the server rolls back.

The client sees the same error in both cases (the outcome is unknown to the caller); half
of the producers retry the same task, half give it up. This is the case of Temporal's open
task-writer bug (a writer that allocates ids in memory can lose a write whose outcome is
unknown and let the reader move past the hole, or skip a row that committed late). Ours
allocates and inserts in one range-checked statement, and a row lock on the queue's metadata
makes ids visible in order, so:

- every read the poller makes returns exactly the ids readLevel+1, readLevel+2, … (the reader
  never skips a task: a skipped committed row would show up as a jump);
- the committed ids of the queue are exactly 1..last_task_id (consecutive, no hole);
- every committed task — confirmed to its producer or not — was started in History; a task
  whose append did not commit was never started; nothing confirmed is lost;
- the commit audit shows no stale write and ack levels that never move back.

    python -m bench.chaos.unknown_commit            # 500 cuts, writes the docs
    python -m bench.chaos.unknown_commit --faults 50 --no-docs
"""

from __future__ import annotations

import argparse
import logging
import secrets
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench.chaos.proxy import REPLY_LOST, REQUEST_LOST, TcpProxy, wait_backend_gone
from bench.common.audit import (
    check_audit,
    check_task_audit,
    committed_tasks,
    install_audit,
    read_audit,
)
from bench.common.databases import create_database, query
from bench.common.report import record, say, seconds
from bench.common.servers import ScratchServer
from bench.common.workload import identity, rng
from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import Execution
from queueguard.errors import QueueguardError
from queueguard.queue_schema.runner import upgrade
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore

Q = PhysicalQueue("chaos", "unknown-commit", "workflow", 0)
CI_TEST = "`tests/test_reliability_network.py::test_unknown_commit_outcome` (24 cuts)"
TARGETS: dict[str, Any] = {
    "append": lambda sql: "allocated AS" in sql,
    "checkpoint": lambda sql: "WITH saved AS" in sql,
    "load": lambda sql: sql.strip().upper() == "COMMIT",
}
#: how often each target is cut (appends are the case of Temporal's task-writer bug above)
WEIGHTS = {"append": 6, "checkpoint": 2, "load": 1}


class ReadRecorder:
    """The store, with every read recorded: (readLevel asked, ids returned)."""

    def __init__(self, inner: PostgresStore) -> None:
        self.inner = inner
        self.reads: list[tuple[int, list[int]]] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read(self, queue: PhysicalQueue, above: int, limit: int) -> Any:
        tasks = self.inner.read(queue, above, limit)
        with self._lock:
            self.reads.append((above, [t.task_id for t in tasks]))
        return tasks


class CountingHistory:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.answers: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def start_tasks(self, identities: Any) -> Any:
        starts = self.inner.start_tasks(identities)
        with self._lock:
            self.answers.update(s.outcome.value for s in starts)
        return starts

    def record_task_started(self, run_id: str, event: int) -> Any:
        return self.start_tasks([(run_id, event)])[0].outcome

    def record_tasks_started(self, identities: Any) -> Any:
        return [s.outcome for s in self.start_tasks(identities)]


@dataclass
class Result:
    faults: Counter[tuple[str, str]]
    #: arms that cut nothing (no matching commit within 30 s); a few on a loaded machine
    missed: Counter[str]
    committed_despite_error: int
    rolled_back: int
    confirmed: int
    produced: int
    lost: int
    duplicated_rejected: int
    orphaned_starts: int
    reads: int
    skips: list[str]
    worst_stall_s: float
    worst_append_s: float
    errors_seen: Counter[str]
    violations: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "faults": {f"{t}/{m}": n for (t, m), n in sorted(self.faults.items())},
            "missed": dict(self.missed),
            "committed_despite_error": self.committed_despite_error,
            "rolled_back": self.rolled_back,
            "confirmed": self.confirmed,
            "produced": self.produced,
            "lost": self.lost,
            "duplicated_rejected": self.duplicated_rejected,
            "orphaned_starts": self.orphaned_starts,
            "reads": self.reads,
            "skips": self.skips[:5],
            "worst_stall_s": round(self.worst_stall_s, 3),
            "worst_append_s": round(self.worst_append_s, 3),
            "errors_seen": dict(self.errors_seen),
            "violations": self.violations[:10],
        }


def run(*, faults: int = 500, seed: int | None = None, log: Any = say) -> Result:
    rnd = rng(seed)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # "discarding closed connection"
    password = "pw-" + secrets.token_urlsafe(12)
    with ScratchServer(tcp=True) as server:
        admin = server.admin_dsn()
        query(admin, f"CREATE ROLE qg_writer LOGIN PASSWORD '{password}'")
        create_database(admin, "chaos", owner="qg_writer")
        direct = server.tcp_dsn("qg_writer", password, "chaos")
        upgrade(direct, progress=False)
        install_audit(direct)
        proxy = TcpProxy(server.port)
        setup = PostgresStore(direct, host_id="setup", pool_size=2)
        store = PostgresStore(
            server.tcp_dsn("qg_writer", password, "chaos", port=proxy.port),
            host_id="writer",
            pool_size=3,
            start_timeout=None,  # its poller reports no completions: a start is final
        )
        recorder = ReadRecorder(store)
        history = CountingHistory(store.history)
        matching = Matching(recorder, "writer", history=history)
        stop = threading.Event()
        lock = threading.Lock()
        confirmed: dict[tuple[str, int], int] = {}
        unknown: set[tuple[str, int]] = set()
        errors: Counter[str] = Counter()
        appends: list[float] = []
        delivered: set[tuple[str, int]] = set()

        def new_payload() -> dict[str, Any]:
            run_id = str(uuid.uuid4())
            setup.history.add_execution(Execution(run_id, Q.namespace, f"wf-{run_id[:8]}"))
            setup.history.schedule_task(run_id, 1, "workflow")
            return task_payload(Q.namespace, f"wf-{run_id[:8]}", run_id, "workflow", 1)

        def producer(seed: int) -> None:
            prnd = __import__("random").Random(seed)
            payload = None
            while not stop.is_set():
                payload = payload or new_payload()
                key = identity(payload)
                started = time.monotonic()
                try:
                    result = matching.add_task(Q, payload)
                except (psycopg.Error, QueueguardError) as exc:
                    with lock:
                        errors[type(exc).__name__] += 1
                        unknown.add(key)
                    if prnd.random() < 0.5:
                        payload = None  # give it up: its outcome stays unknown
                    continue
                with lock:
                    confirmed[key] = result.task_id or 0
                    appends.append(time.monotonic() - started)
                payload = None
                time.sleep(prnd.uniform(0, 0.004))

        def poller() -> None:
            while not stop.is_set():
                try:
                    delivery = matching.poll(Q)
                    if delivery is None:
                        time.sleep(0.002)
                    else:
                        delivered.add(identity(delivery.data))
                except (psycopg.Error, QueueguardError) as exc:
                    with lock:
                        errors[type(exc).__name__] += 1

        threads = [threading.Thread(target=producer, args=(i,), daemon=True) for i in range(2)]
        threads.append(threading.Thread(target=poller, daemon=True))
        cuts: Counter[tuple[str, str]] = Counter()
        missed: Counter[str] = Counter()
        t0 = time.time()
        for t in threads:
            t.start()
        try:
            for i in range(faults):
                time.sleep(rnd.uniform(0.005, 0.03))
                target = rnd.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
                mode = rnd.choice([REPLY_LOST, REQUEST_LOST])
                if target == "load":  # its next user loads it again: that load is cut
                    try:
                        matching.unload(Q)
                    except (psycopg.Error, QueueguardError) as exc:
                        errors[type(exc).__name__] += 1
                proxy.arm(TARGETS[target], mode)
                cut = proxy.try_cut(30)
                if cut is None:  # nothing committed that statement in 30 s: say so, go on
                    missed[target] += 1
                    log(f"  cut {i + 1}: no {target} committed within 30 s (missed)")
                    continue
                wait_backend_gone(admin, cut.backend_pid)
                cuts[(target, mode)] += 1
                if (i + 1) % 100 == 0:
                    log(f"  {i + 1}/{faults} cuts")
            time.sleep(0.2)
        finally:
            proxy.disarm()
            t1 = time.time()
            stop.set()
            for t in threads:
                t.join(30)
        # Drain what is left, as a new owner would after a restart (through the proxy).
        matching.unload(Q)
        while (delivery := matching.poll(Q)) is not None:
            delivered.add(identity(delivery.data))
        matching.shutdown()

        started = {
            (str(r), e)
            for r, e in query(
                direct,
                "SELECT run_id, scheduled_event_id FROM scheduled_tasks "
                "WHERE started_at IS NOT NULL",
            )
        }
        committed = {(r, e) for rows in committed_tasks(direct).values() for _, r, e in rows}
        audit = check_audit(read_audit(direct), (t0, t1))
        violations = list(audit.violations) + check_task_audit(direct, started)
        skips = [
            f"read above {above} returned {ids[:5]}"
            for above, ids in recorder.reads
            if ids != list(range(above + 1, above + 1 + len(ids)))
        ]
        lost = [k for k in confirmed if k not in started]
        never_committed = unknown - committed - set(confirmed)
        started_uncommitted = never_committed & started
        violations += [f"lost {k}" for k in lost[:5]]
        violations += [f"started but never committed {k}" for k in sorted(started_uncommitted)[:5]]
        violations += skips[:5]
        state = setup.queue_state(Q)
        if state is None or state.ack_level != state.last_task_id or setup.task_ids(Q):
            violations.append(f"not drained: {state}")
        setup.close()
        store.close()
        proxy.close()
    return Result(
        faults=cuts,
        missed=missed,
        committed_despite_error=len((unknown & committed) - set(confirmed)),
        rolled_back=len(never_committed),
        confirmed=len(confirmed),
        produced=len(committed | set(confirmed)),
        lost=len(lost),
        duplicated_rejected=history.answers["already-started"],
        orphaned_starts=len(started - delivered),
        reads=len(recorder.reads),
        skips=skips,
        worst_stall_s=audit.worst_gap_s,
        worst_append_s=max(appends, default=0.0),
        errors_seen=errors,
        violations=violations,
    )


def check(result: Result) -> None:
    assert not result.violations, "\n".join(result.violations[:20])
    assert result.lost == 0 and not result.skips
    assert result.committed_despite_error > 0, "no append committed after its connection was cut"
    assert result.rolled_back > 0, "no cut append rolled back"


def report(result: Result) -> None:
    total = sum(result.faults.values())
    by_target = Counter[str]()
    for (target, _), n in result.faults.items():
        by_target[target] += n
    row = {
        "Scenario": "Unknown commit outcome",
        "Scale": "1 host (2 producers, 1 poller) behind a TCP proxy, private server on 127.0.0.1",
        "Faults injected": f"{total} connections cut right after the commit was sent "
        f"({', '.join(f'{n} {t}' for t, n in by_target.most_common())}; half reply-lost, "
        "half request-lost)",
        "Tasks produced": f"{result.produced:,} committed ({result.confirmed:,} confirmed)",
        "Lost": result.lost,
        "Duplicated-and-rejected": f"{result.duplicated_rejected:,}",
        "Worst stall": f"{seconds(result.worst_stall_s)} (no commit); slowest confirmed "
        f"append {seconds(result.worst_append_s)}",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        "- cuts by statement and mode: "
        + ", ".join(f"{t}/{m} {n}" for (t, m), n in sorted(result.faults.items())),
        f"- appends whose producer saw an error but which committed: "
        f"{result.committed_despite_error} (all read and started); that never committed: "
        f"{result.rolled_back} (never started)",
        f"- reads by the poller: {result.reads:,}; reads that skipped an id: {len(result.skips)}",
        f"- started in History but never handed to the poller: {result.orphaned_starts} (a cut "
        'checkpoint after the start makes `poll` raise; see "Findings")',
        f"- errors the host's callers saw: {dict(result.errors_seen)}",
    ]
    record(6, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=500)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 6: {args.faults} connections cut after the commit was sent")
    result = run(faults=args.faults, seed=args.seed)
    say(f"  {result.as_json()}")
    check(result)
    if not args.no_docs:
        report(result)
    say("the reader never skipped a committed task; ids consecutive; nothing lost")


if __name__ == "__main__":
    main()
