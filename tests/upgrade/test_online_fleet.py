"""A mixed fleet through every phase of the online upgrade: a v0.3 host and a v0.4 host
produce and dispatch while expand, migrate and contract run, and the v0.3 host is rolled away
in between. Nothing is lost, nothing starts twice, each source queue keeps its order."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.errors import ProtocolMismatch, QueueguardError
from queueguard.pg.connect import connect
from queueguard.queue_schema import online
from queueguard.queue_schema.legacy.workers import LegacyQueue, V03Worker
from queueguard.queue_schema.runner import upgrade
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore
from tests.upgrade.online_support import rows

NS = "fleet"
KNOBS = online.Knobs(batch_size=5, max_lag_s=None, lease_s=2, wait_s=5)
#: the v0.3 host's queues: a default queue and two legacy @auto backlogs
OLD_QUEUES = [
    LegacyQueue(NS, "f0"),
    LegacyQueue(NS, "f0", version="auto"),
    LegacyQueue(NS, "f1", version="auto"),
]
NEW_FAMILIES = ["f1", "f2"]  # the v0.4 host's default queues from the start


class Fleet:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.lock = threading.Lock()
        self.added: dict[str, str] = {}  # run id -> source queue key
        self.seq: dict[str, int] = {}  # run id -> its position in its source queue
        self.starts: dict[str, int] = defaultdict(int)  # run id -> starts handed to a worker
        self.delivered: dict[str, list[str]] = defaultdict(list)  # v0.4 queue -> run ids
        self.refusals: list[str] = []
        self.retry: list[dict[str, Any]] = []  # payloads a refused host could not add
        self.history = connect(dsn, autocommit=True)

    def new_task(self, source: str, behavior: str, directive: bool) -> dict[str, Any]:
        run = str(uuid.uuid4())
        self.history.execute(
            "INSERT INTO executions (run_id, namespace, workflow_id, status, "
            "versioning_behavior) VALUES (%s, %s, %s, 'running', %s)",
            (run, NS, f"wf-{run[:8]}", behavior),
        )
        self.history.execute(
            "INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind) "
            "VALUES (%s, 1, 'workflow')",
            (run,),
        )
        payload = task_payload(NS, f"wf-{run[:8]}", run, "workflow", 1)
        if directive:  # v0.4 producers carry History's directive
            payload["task"]["versionDirective"] = {"behavior": behavior, "deploymentVersion": None}
        with self.lock:
            self.seq[run] = sum(1 for s in self.added.values() if s == source)
            self.added[run] = source
        return payload

    def started(self, run: str) -> None:
        with self.lock:
            self.starts[run] += 1


def old_host(fleet: Fleet, stop: threading.Event) -> None:
    """A v0.3 host: appends to its queues and dispatches them, until stopped or fenced out."""
    with V03Worker(fleet.dsn, host_id="old") as worker:
        worker.start()
        acks = {q.key: worker.load(q).ack_level for q in OLD_QUEUES}
        pending: dict[str, dict[str, Any]] = {}  # a task whose append failed is retried
        try:
            _serve(worker, fleet, stop, acks, pending)
        finally:  # refused for good: History hands what it could not add to another host
            fleet.retry.extend(pending.values())


def _serve(
    worker: V03Worker,
    fleet: Fleet,
    stop: threading.Event,
    acks: dict[str, int],
    pending: dict[str, dict[str, Any]],
) -> None:
    while not stop.is_set():
        for queue in OLD_QUEUES:
            try:
                behavior = "auto_upgrade" if queue.version else "unversioned"
                if queue.key not in pending:
                    pending[queue.key] = fleet.new_task(queue.key, behavior, directive=False)
                worker.append(queue, pending[queue.key])
                del pending[queue.key]
                if queue.version:  # its @auto pollers are slow: a backlog builds up
                    continue
                tasks = worker.read(queue, acks[queue.key], 5)
                for task_id, data in tasks:
                    if worker.record_start(data["task"]["runId"], 1) == "started":
                        fleet.started(data["task"]["runId"])
                    acks[queue.key] = task_id
                if tasks:
                    worker.checkpoint(queue, acks[queue.key])
            except ProtocolMismatch:
                return
            except QueueguardError as exc:  # fenced (range conflict) or refused: reload
                fleet.refusals.append(f"{queue.key}: {type(exc).__name__}")
                try:
                    acks[queue.key] = worker.load(queue).ack_level
                except ProtocolMismatch:
                    return
        time.sleep(0.01)


def new_host(
    fleet: Fleet, families: list[str], stop: threading.Event, produce: threading.Event
) -> None:
    """A v0.4 host: produces to its queues (while `produce` is set) and dispatches them."""
    store = PostgresStore(fleet.dsn, host_id="new", pool_size=2, create_schema=False)
    matching = Matching(store, "new")
    try:
        while not stop.is_set():
            for family in list(families):
                queue = PhysicalQueue(NS, family, "workflow", 0)
                try:
                    while fleet.retry and family == "f0":  # History retries elsewhere
                        matching.add_task(queue, fleet.retry.pop())
                    if produce.is_set() and family in NEW_FAMILIES:
                        payload = fleet.new_task(queue.key, "unversioned", directive=True)
                        matching.add_task(queue, payload)
                    while (delivery := matching.poll(queue)) is not None:
                        run = delivery.data["task"]["runId"]
                        fleet.started(run)
                        assert matching.directive(delivery)["behavior"] in (
                            "unversioned",
                            "auto_upgrade",
                        )
                        fleet.delivered[queue.key].append(run)
                except QueueguardError as exc:
                    fleet.refusals.append(f"new {queue.key}: {exc}")
                    continue  # fenced: the manager reloads at the next call
            time.sleep(0.01)
    finally:
        matching.shutdown()
        store.close()


def test_mixed_fleet_through_every_phase(make_db: Callable[..., str]) -> None:
    db = make_db()
    upgrade(db, to="003", progress=False)
    fleet = Fleet(db)
    stop_old, stop_new, produce = threading.Event(), threading.Event(), threading.Event()
    old = threading.Thread(target=old_host, args=(fleet, stop_old), daemon=True)
    old.start()
    time.sleep(1.0)  # a backlog in every old queue, @auto ones included
    assert online.run(db, phase="expand", knobs=KNOBS).phase == "migrate"
    families = list(NEW_FAMILIES)
    produce.set()
    new = threading.Thread(target=new_host, args=(fleet, families, stop_new, produce))
    new.start()
    time.sleep(0.5)
    migrated = online.run(db, phase="migrate", knobs=KNOBS)
    assert migrated.phase == "contract" and migrated.rows_relocated > 0
    time.sleep(0.5)
    stop_old.set()  # roll the v0.3 host away: the v0.4 host takes its default queue
    old.join(30)
    families.append("f0")
    report = online.run(db, phase="contract", knobs=KNOBS)
    assert report.phase == "done"
    time.sleep(0.5)
    produce.clear()
    deadline = time.monotonic() + 30
    while rows(db, "SELECT count(*) FROM tasks")[0][0] and time.monotonic() < deadline:
        time.sleep(0.2)
    stop_new.set()
    new.join(30)
    fleet.history.close()

    left = rows(db, "SELECT physical_queue, count(*), min(task_id) FROM tasks GROUP BY 1")
    qs = rows(db, "SELECT physical_queue, range_id, ack_level, last_task_id FROM task_queues")
    assert left == [], f"stranded: {left} {qs} {fleet.refusals[-5:]}"
    started = {
        str(r)
        for (r,) in rows(db, "SELECT run_id FROM scheduled_tasks WHERE started_at IS NOT NULL")
    }
    assert started == set(fleet.added), "every added task started"
    assert all(n == 1 for n in fleet.starts.values()) and set(fleet.starts) == set(fleet.added)
    # each source queue's tasks reached the v0.4 host in their source order
    for queue, runs in fleet.delivered.items():
        by_source: dict[str, list[int]] = defaultdict(list)
        for run in runs:
            by_source[fleet.added[run]].append(fleet.seq[run])
        for source, order in by_source.items():
            assert order == sorted(order), f"{source} -> {queue}: out of order"
    assert rows(
        db, "SELECT count(*) FROM task_queues WHERE version = 'auto' AND ack_level <> last_task_id"
    ) == [(0,)]
    assert len(fleet.added) > 50 and fleet.refusals  # the migrator fenced the v0.3 host
