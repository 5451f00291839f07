"""Matching on both stores: sync match, backlog polling, History outcomes, membership."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from queueguard.core.history import FaultyHistory, task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import JSON, Execution, QueueState, StartOutcome, Store
from queueguard.errors import InvalidQueueKey, NotOwner, QueueUnloaded
from queueguard.runtime.matching import AddResult, Delivery, Matching
from queueguard.runtime.membership import StaticMembership
from queueguard.stores.memory import MemoryStore
from queueguard.stores.postgres import PostgresStore

StoreFactory = Callable[[], Store]
Q = PhysicalQueue("ns", "orders", "workflow", 0)
HOSTS = ("host-a", "host-b", "host-c")


def _payload(store: Store, event: int, status: str = "running") -> JSON:
    run_id = str(uuid.uuid4())
    store.history.add_execution(Execution(run_id, "ns", f"wf-{event}", status))
    store.history.schedule_task(run_id, event, "workflow")
    return task_payload("ns", f"wf-{event}", run_id, "workflow", event)


def _identity(data: JSON) -> tuple[str, int]:
    return data["task"]["runId"], data["task"]["scheduledEventId"]


def _table_counts(store: Store) -> tuple[int, int]:
    """(task_queues rows, tasks rows) as the backing database holds them."""
    if isinstance(store, MemoryStore):
        with store.db.lock:
            return len(store.db.queues), sum(len(q.tasks) for q in store.db.queues.values())
    assert isinstance(store, PostgresStore)
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM task_queues), (SELECT count(*) FROM tasks)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _wait_for_poller(matching: Matching, queue: PhysicalQueue) -> None:
    """Block until a poll() on `queue` is parked waiting for a sync match."""
    deadline = time.monotonic() + 10
    while not matching._waiters.get(queue):
        assert time.monotonic() < deadline, "poller never started waiting"
        time.sleep(0.005)


class _PollInThread:
    """Runs `matching.poll(queue, timeout)` in a thread and keeps its result."""

    def __init__(self, matching: Matching, queue: PhysicalQueue, timeout: float) -> None:
        self.result: Delivery | None = None
        self._thread = threading.Thread(target=self._run, args=(matching, queue, timeout))
        self._thread.start()

    def _run(self, matching: Matching, queue: PhysicalQueue, timeout: float) -> None:
        self.result = matching.poll(queue, timeout=timeout)

    def join(self) -> Delivery | None:
        self._thread.join(15)
        assert not self._thread.is_alive()
        return self.result


# sync match ------------------------------------------------------------------------------
def test_sync_match_delivers_to_a_waiting_poller_without_writing_tasks(
    new_store: StoreFactory,
) -> None:
    store = new_store()
    matching = Matching(store)
    data = _payload(store, 1)

    poller = _PollInThread(matching, Q, timeout=10)
    _wait_for_poller(matching, Q)
    result = matching.add_task(Q, data)
    delivery = poller.join()

    assert result == AddResult(True, None, StartOutcome.STARTED)
    assert delivery == Delivery(Q, None, data)
    # the poll loaded the queue (range 1); the delivery itself wrote nothing to tasks
    assert store.queue_state(Q) == QueueState(range_id=1, ack_level=0, last_task_id=0)
    assert store.task_ids(Q) == []
    assert _table_counts(store) == (1, 0)
    assert store.history.record_task_started(*_identity(data)) is StartOutcome.ALREADY_STARTED


def test_without_a_poller_the_task_is_spooled(new_store: StoreFactory) -> None:
    store = new_store()
    matching = Matching(store)
    result = matching.add_task(Q, _payload(store, 1))
    assert result == AddResult(False, 1)
    assert store.task_ids(Q) == [1]


def _gated_history(store: Store) -> tuple[FaultyHistory, threading.Event, threading.Event, dict]:
    """A History whose first RecordTaskStarted blocks until released, then fails if told."""
    entered, release = threading.Event(), threading.Event()
    control: dict[str, Any] = {"gate": True, "fail": False}

    def should_fail(run_id: str, event: int) -> bool:
        if control["gate"]:
            control["gate"] = False
            entered.set()
            release.wait(10)
        return bool(control["fail"])

    return FaultyHistory(store.history, should_fail), entered, release, control


@pytest.mark.parametrize("history_fails", [False, True], ids=["started", "retryable"])
def test_poller_timing_out_while_history_answers_loses_nothing(
    new_store: StoreFactory, history_fails: bool
) -> None:
    """add_task took the waiter; the poller's timeout passes while History is answering."""
    store = new_store()
    history, entered, release, control = _gated_history(store)
    matching = Matching(store, history=history)
    first, second = _payload(store, 1), _payload(store, 2)

    poller = _PollInThread(matching, Q, timeout=0.2)
    _wait_for_poller(matching, Q)
    adder_result: list[AddResult] = []
    adder = threading.Thread(target=lambda: adder_result.append(matching.add_task(Q, first)))
    adder.start()
    assert entered.wait(10)
    time.sleep(0.4)  # well past the poller's timeout
    control["fail"] = history_fails
    release.set()
    adder.join(10)
    delivery = poller.join()

    if history_fails:  # retryable: spooled, and no ghost waiter is left behind
        assert adder_result == [AddResult(False, 1)]
        assert delivery is None
        control["fail"] = False
        assert matching.add_task(Q, second) == AddResult(False, 2)
        assert store.task_ids(Q) == [1, 2]
    else:  # started: the poller that timed out still receives it
        assert adder_result == [AddResult(True, None, StartOutcome.STARTED)]
        assert delivery == Delivery(Q, None, first)
        assert store.task_ids(Q) == []


# backlog ---------------------------------------------------------------------------------
def test_poll_drains_the_backlog_in_id_order(new_store: StoreFactory) -> None:
    store = new_store()
    matching = Matching(store)
    payloads = [_payload(store, e) for e in range(1, 6)]
    assert [matching.add_task(Q, p).task_id for p in payloads[:2]] == [1, 2]
    assert matching.add_tasks(Q, payloads[2:]) == [3, 4, 5]

    deliveries = [matching.poll(Q) for _ in payloads]
    assert [(d.task_id, d.data) for d in deliveries if d] == list(
        zip([1, 2, 3, 4, 5], payloads, strict=True)
    )
    assert matching.poll(Q) is None
    assert store.queue_state(Q) == QueueState(range_id=1, ack_level=5, last_task_id=5)
    assert store.task_ids(Q) == []


def _lose_tasks_above(store: Store, queue: PhysicalQueue, keep: int) -> None:
    """The database goes back in time: the rows above `keep` and the counter that covered
    them are gone (a failover to a replica that had not received those commits)."""
    if isinstance(store, MemoryStore):
        with store.db.lock:
            record = store.db.queues[queue.key]
            record.last_task_id = keep
            for task_id in [t for t in record.tasks if t > keep]:
                del record.tasks[task_id]
        return
    assert isinstance(store, PostgresStore)
    with store.transaction() as conn:
        conn.execute(
            "UPDATE task_queues SET last_task_id = %s WHERE physical_queue = %s", (keep, queue.key)
        )
        conn.execute(
            "DELETE FROM tasks WHERE physical_queue = %s AND task_id > %s", (queue.key, keep)
        )


def test_appends_after_the_database_lost_some_are_delivered(new_store: StoreFactory) -> None:
    """Found by the failover scenario (docs/reliability.md, scenario 12): after an
    asynchronous failover lost the queue's last appends, the next appends reuse their ids.
    An owner whose read level was past them must not skip them and checkpoint over them
    (acknowledged appends never delivered): it drops its process state and reloads."""
    store = new_store()
    matching = Matching(store)
    old = [_payload(store, e) for e in range(1, 4)]
    assert matching.add_tasks(Q, old) == [1, 2, 3]
    first = matching.poll(Q)  # reads the page 1..3: read level 3
    assert first is not None and first.task_id == 1
    _lose_tasks_above(store, Q, keep=1)
    new = [_payload(store, e) for e in range(4, 6)]
    assert [matching.add_task(Q, p).task_id for p in new] == [2, 3]  # ids handed out again
    delivered = []
    while (delivery := matching.poll(Q)) is not None:
        delivered.append(delivery.data)
    assert all(p in delivered for p in new), delivered
    assert store.task_ids(Q) == []


def test_a_checkpoint_above_what_the_database_kept_reloads_instead_of_crashing(
    new_store: StoreFactory,
) -> None:
    """The consumer side of the same failover: acks held in memory reach above the queue's
    stored rows (the database lost the appends and the checkpoint that covered them). The
    checkpoint must not fail with ValueError (a poll would lose the delivery History just
    started): the owner drops its process state and the next call reloads."""
    store = new_store()
    matching = Matching(store, checkpoint_every=10)  # acks stay in memory
    assert matching.add_tasks(Q, [_payload(store, e) for e in range(1, 4)]) == [1, 2, 3]
    assert [d.task_id for d in iter(lambda: matching.poll(Q), None)] == [1, 2, 3]
    _lose_tasks_above(store, Q, keep=1)  # task 1's row is back, 2 and 3 are gone
    with pytest.raises(QueueUnloaded):
        matching.flush()
    assert matching.poll(Q) is None  # reloaded: task 1 again, History says already started
    new = _payload(store, 4)
    assert matching.add_task(Q, new).task_id == 2
    delivery = matching.poll(Q)
    assert delivery is not None and delivery.data == new


def test_retryable_history_failure_keeps_the_task_pending(new_store: StoreFactory) -> None:
    store = new_store()
    history = FaultyHistory(store.history)
    matching = Matching(store, history=history)
    first, second = _payload(store, 1), _payload(store, 2)
    matching.add_tasks(Q, [first])

    history.fail_next(1)
    assert matching.poll(Q) is None
    assert matching.manager(Q).pending() == [1]
    assert store.task_ids(Q) == [1]

    matching.add_tasks(Q, [second])
    history.fail_next(1)  # task 1 fails again; task 2 is delivered above the gap
    delivery = matching.poll(Q)
    assert delivery is not None and delivery.task_id == 2
    state = store.queue_state(Q)
    assert state is not None and state.ack_level == 0
    assert store.task_ids(Q) == [1, 2]

    delivery = matching.poll(Q)  # History recovered: the later poll delivers task 1
    assert delivery == Delivery(Q, 1, first)
    assert store.queue_state(Q) == QueueState(range_id=1, ack_level=2, last_task_id=2)
    assert store.task_ids(Q) == []


def test_already_started_and_obsolete_tasks_are_acked_and_skipped(
    new_store: StoreFactory,
) -> None:
    store = new_store()
    matching = Matching(store)
    started = _payload(store, 1)
    store.history.record_task_started(*_identity(started))
    completed = _payload(store, 2, status="completed")
    unknown_run = task_payload("ns", "wf-3", str(uuid.uuid4()), "workflow", 3)
    malformed: JSON = {"task": {}}
    fresh = _payload(store, 5)
    assert matching.add_tasks(Q, [started, completed, unknown_run, malformed, fresh]) == [
        1,
        2,
        3,
        4,
        5,
    ]

    assert matching.poll(Q) == Delivery(Q, 5, fresh)
    assert matching.poll(Q) is None
    assert store.queue_state(Q) == QueueState(range_id=1, ack_level=5, last_task_id=5)
    assert store.task_ids(Q) == []


# membership ------------------------------------------------------------------------------
QUEUES = [
    PhysicalQueue("ns", family, task_type, partition, version)
    for family in ("orders", "emails")
    for task_type in ("workflow", "activity")
    for partition in range(8)
    for version in ("", "deploy.b1", "deploy.b2")
]


def test_static_membership_routes_each_partition_to_one_host() -> None:
    membership = StaticMembership(HOSTS)
    owners: dict[tuple[str, str, str, int], set[str]] = {}
    for queue in QUEUES:
        owners.setdefault(queue.partition_key, set()).add(membership.owner(queue))
        assert StaticMembership(HOSTS).owner(queue) == membership.owner(queue)  # stable
    assert all(len(hosts) == 1 for hosts in owners.values())  # every version on one host
    assert {h for hosts in owners.values() for h in hosts} == set(HOSTS)  # all hosts used
    with pytest.raises(ValueError):
        StaticMembership(("a", "a"))


def test_each_queue_loads_on_exactly_its_owner(new_store: StoreFactory) -> None:
    membership = StaticMembership(HOSTS)
    hosts = {h: Matching(new_store(), h, membership) for h in HOSTS}
    for queue in QUEUES[::5]:
        owner = membership.owner(queue)
        assert hosts[owner].manager(queue).range_id == 1
        for host, matching in hosts.items():
            if host == owner:
                continue
            with pytest.raises(NotOwner) as err:
                matching.add_task(queue, {"task": {}})
            assert (err.value.owner, err.value.host) == (owner, host)
    counts = _table_counts(hosts[HOSTS[0]].store)
    assert counts == (len(QUEUES[::5]), 0)  # non-owners wrote nothing


def test_set_membership_unloads_lost_queues_and_keeps_metadata(new_store: StoreFactory) -> None:
    old_view = StaticMembership(HOSTS)
    queues = [q for q in QUEUES if old_view.owner(q) == "host-a"][:6]
    store = new_store()
    host_a = Matching(store, "host-a", old_view)
    for queue in queues:
        host_a.add_task(queue, {"task": {}})
    assert set(host_a.loaded()) == set(queues)

    new_view = StaticMembership(("host-b", "host-c"))
    lost = host_a.set_membership(new_view)
    assert set(lost) == set(queues)
    assert host_a.loaded() == []
    for queue in queues:  # unloading keeps range, ack level and rows
        assert store.queue_state(queue) == QueueState(range_id=1, ack_level=0, last_task_id=1)
        assert store.task_ids(queue) == [1]
        with pytest.raises(NotOwner):
            host_a.poll(queue)

    successor = Matching(new_store(), new_view.owner(queues[0]), new_view)
    assert successor.manager(queues[0]).range_id == 2
    delivery = successor.poll(queues[0])
    assert delivery is None  # the payload's run is unknown: obsolete, acked and skipped
    assert store.queue_state(queues[0]) == QueueState(range_id=2, ack_level=1, last_task_id=1)


# runtime bad input -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "components",
    [
        ("ns", "orders", "nexus", 0, ""),
        ("ns", "orders", "workflow", -1, ""),
        ("", "orders", "workflow", 0, ""),
        ("ns", "", "workflow", 0, ""),
        ("ns", "orders", "workflow", 0, "v1"),
        ("ns", "orders", "workflow", 2**31, ""),
        ("n\x00s", "orders", "workflow", 0, ""),
    ],
    ids=["task-type", "partition", "namespace", "family", "version", "int4", "nul"],
)
def test_bad_queue_components_are_rejected_before_any_write(
    new_store: StoreFactory, components: tuple[str, str, str, int, str]
) -> None:
    store = new_store()
    matching = Matching(store)
    data = _payload(store, 1)
    with pytest.raises(InvalidQueueKey):
        matching.add_task(PhysicalQueue(*components), data)
    with pytest.raises(InvalidQueueKey):
        matching.poll(PhysicalQueue(*components))
    with pytest.raises(InvalidQueueKey):
        store.load_queue(PhysicalQueue(*components))
    assert _table_counts(store) == (0, 0)
    assert matching.loaded() == []
