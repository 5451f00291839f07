"""The v0.4 fleet of the online-upgrade benchmark: hosts that add and dispatch tasks on every
default queue while an upgrade runs, and the log of each dispatch (bench/online/benchmark.py).

Each host (its own PostgresStore and Matching) owns a disjoint share of the queues, so hosts
never fence one another: a gap in a queue's dispatches comes from the database (locks, the
upgrade), not from a takeover. Each queue has its own consumer thread, which polls it once per
`period_s` (`Matching.poll`, one task): every poll commits a History start, and one thread
walking 25 queues would add 25 commit latencies to each queue's gap, so a slow disk would
look like a blocked queue. One producer thread per host adds tasks at a fixed rate,
round-robin over its queues. `drain()` switches the consumers to `poll_batch` flat out until
every queue found nothing twice in a row.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from bench.online.database import FLEET
from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.errors import QueueguardError
from queueguard.runtime.matching import Delivery, Matching
from queueguard.stores.postgres import PostgresStore

NAMESPACE = "bulk"
DRAIN_BATCH = 500


def default_queues(families: int) -> list[PhysicalQueue]:
    """The default queues `seed_v3` builds (`bulk/f<n>/workflow/0`)."""
    return [PhysicalQueue(NAMESPACE, f"f{f}", "workflow", 0) for f in range(1, families + 1)]


@dataclass(frozen=True)
class FleetConfig:
    hosts: int = 4
    period_s: float = 0.25  # each queue is polled once per period
    produce_per_s: float = 100.0  # tasks added per second by the whole fleet
    pool_size: int = 12  # connections per host, shared by its consumer threads


@dataclass
class DispatchLog:
    """When each queue dispatched (monotonic seconds, one entry per non-empty poll) and what."""

    times: list[array[float]]
    added: list[int] = field(default_factory=list)  # fleet task indexes whose add committed
    delivered: list[int] = field(default_factory=list)  # fleet task indexes dispatched
    legacy: Counter[int] = field(default_factory=Counter)  # legacy rows dispatched, per host
    errors: Counter[str] = field(default_factory=Counter)
    first_error: dict[str, str] = field(default_factory=dict)

    def record(self, host: int, queue: int, batch: Sequence[Delivery]) -> None:
        self.times[queue].append(time.monotonic())  # only this queue's consumer appends here
        for delivery in batch:
            index = FLEET.index_of(str(delivery.data["task"]["workflowId"]))
            if index is not None:
                self.delivered.append(index)
            else:
                self.legacy[host] += 1

    def error(self, where: str, exc: BaseException) -> None:
        key = f"{where}: {type(exc).__name__}"
        self.errors[key] += 1
        self.first_error.setdefault(key, str(exc).strip().splitlines()[0][:200])


class _Host:
    def __init__(self, index: int, queues: list[tuple[int, PhysicalQueue]]) -> None:
        self.index, self.queues = index, queues
        self.store: PostgresStore | None = None
        self.matching: Matching | None = None
        self.ready_at: float | None = None
        #: per queue: consecutive polls that found nothing, while draining
        self.empty_passes = [0] * len(queues)


class Fleet:
    """`config.hosts` v0.4 hosts over `queues`; fleet task indexes below `runs` have History."""

    def __init__(
        self, dsn: str, queues: Sequence[PhysicalQueue], config: FleetConfig, *, runs: int
    ) -> None:
        self.dsn, self.config, self.runs = dsn, config, runs
        self.log = DispatchLog(times=[array("d") for _ in queues])
        hosts = min(config.hosts, len(queues))
        self.hosts = [
            _Host(h, [(i, q) for i, q in enumerate(queues) if i % hosts == h]) for h in range(hosts)
        ]
        self._stop, self._producing, self._draining = (threading.Event() for _ in range(3))
        self._threads: list[threading.Thread] = []

    # lifecycle ------------------------------------------------------------------------
    def start(self, *, retry: bool = False) -> None:
        """Start every host. `retry`: a host whose start-up the schema refuses (offline: the
        database is not at 004 yet) tries again every 50 ms, then goes to work."""
        self._producing.set()
        for host in self.hosts:
            self._spawn(self._run_host, host, retry)

    def wait_ready(self, timeout_s: float, dispatches: int = 3) -> bool:
        """Every host started and every queue dispatched `dispatches` times (its first page
        read and decoded: a burst the baseline must not count)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            started = all(h.ready_at is not None for h in self.hosts)
            if started and all(len(t) >= dispatches for t in self.log.times):
                return True
            time.sleep(0.05)
        return False

    def drain(self, timeout_s: float) -> bool:
        """Stop adding, then dispatch flat out until every host found nothing twice in a row
        on all its queues; False on timeout."""
        self._producing.clear()
        for host in self.hosts:
            host.empty_passes = [0] * len(host.queues)
        self._draining.set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(min(h.empty_passes) >= 2 for h in self.hosts):
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        """Stop the threads, then shut every host down (each flushes its checkpoints)."""
        self._producing.clear()
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        for host in self.hosts:
            try:
                if host.matching is not None:
                    host.matching.shutdown()
            except Exception as exc:  # a fenced flush: the next owner replays it
                self.log.error("shutdown", exc)
            if host.store is not None:
                host.store.close()

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _run_host(self, host: _Host, retry: bool) -> None:
        while not self._stop.is_set():
            try:
                host.store = PostgresStore(
                    self.dsn,
                    host_id=f"bench{host.index}",
                    pool_size=self.config.pool_size,
                    create_schema=False,
                )
                break
            except (QueueguardError, psycopg.Error) as exc:
                if not retry:
                    raise
                self.log.error("start-up (retried)", exc)
                time.sleep(0.05)
        if host.store is None:
            return
        # The runtime benchmark's batched checkpoints (every 1,000 acks or 50 ms): a
        # checkpoint per ack would measure commit latency, not the upgrade. Pages of 100 rows:
        # decoding a page holds the GIL, and 1,000-row pages on 100 queues stall every poller.
        host.matching = Matching(
            host.store,
            f"bench{host.index}",
            checkpoint_every=1000,
            checkpoint_interval=0.05,
            read_batch=100,
        )
        host.ready_at = time.monotonic()
        self._spawn(self._produce, host)
        for slot in range(len(host.queues)):
            self._spawn(self._consume, host, slot)

    # work -----------------------------------------------------------------------------
    def _consume(self, host: _Host, slot: int) -> None:
        matching = host.matching
        assert matching is not None
        index, queue = host.queues[slot]
        while not self._stop.is_set():
            begun = time.monotonic()
            draining = self._draining.is_set()
            try:
                if draining:
                    batch = matching.poll_batch(queue, DRAIN_BATCH)
                else:
                    one = matching.poll(queue)
                    batch = [one] if one is not None else []
            except Exception as exc:  # counted; the manager reloads on the next poll
                self.log.error("poll", exc)
                batch = []
            if batch:
                self.log.record(host.index, index, batch)
            if draining:
                host.empty_passes[slot] = 0 if batch else host.empty_passes[slot] + 1
                if not batch:
                    time.sleep(0.05)  # an empty queue: let the others have the cores
            else:
                time.sleep(max(0.0, self.config.period_s - (time.monotonic() - begun)))

    def _produce(self, host: _Host) -> None:
        matching = host.matching
        assert matching is not None
        hosts = len(self.hosts)
        interval = hosts / self.config.produce_per_s
        due, k = time.monotonic(), 0
        while self._producing.is_set() and not self._stop.is_set():
            index = host.index + hosts * k  # disjoint per host: each index added at most once
            if index >= self.runs:
                return
            _, queue = host.queues[k % len(host.queues)]
            payload = task_payload(
                NAMESPACE, FLEET.workflow(index), FLEET.run(index), "workflow", 1
            )
            try:
                matching.add_task(queue, payload)
                self.log.added.append(index)
            except Exception as exc:  # not stored (the append is one statement): not added
                self.log.error("add_task", exc)
            k += 1
            due = max(due + interval, time.monotonic() - 1.0)  # catch up at most one second
            time.sleep(max(0.0, due - time.monotonic()))
