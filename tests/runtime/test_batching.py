"""Batched mode keeps every guarantee of the contract, on both stores.

Batched append (group commit of concurrent arrivals), batched and interval checkpoints with a
flush on unload, and batched History starts. Each case runs on the memory store and on
PostgreSQL (`new_store` from conftest: independent handles on one backing database).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from queueguard.core.acks import AckTracker
from queueguard.core.history import FaultyHistory, task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import JSON, Execution, QueueState, StartOutcome, Store
from queueguard.errors import StaleRangeError
from queueguard.runtime.backlog import BacklogManager
from queueguard.runtime.matching import AddResult, Delivery, Matching
from queueguard.runtime.spooler import Spooler
from queueguard.stores.postgres import PostgresStore

StoreFactory = Callable[[], Store]
Q = PhysicalQueue("ns", "batched", "workflow", 0)
BATCHED: dict[str, Any] = {"spool_batch": 100, "checkpoint_every": 5}


def _runs(store: Store, events: Sequence[int], status: str = "running") -> list[JSON]:
    payloads = []
    for event in events:
        run_id = str(uuid.uuid4())
        store.history.add_execution(Execution(run_id, "ns", f"wf-{event}", status))
        store.history.schedule_task(run_id, event, "workflow")
        payloads.append(task_payload("ns", f"wf-{event}", run_id, "workflow", event))
    return payloads


def _identity(data: JSON) -> tuple[str, int]:
    return data["task"]["runId"], data["task"]["scheduledEventId"]


class CountingStore:
    """Delegates to a store; counts appends and checkpoints, and can hold appends at a gate."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.appends: list[int] = []  # batch sizes
        self.checkpoints: list[int] = []  # saved levels
        self.gate: threading.Event | None = None
        self.reads = 0
        self.entered = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, queue: PhysicalQueue, range_id: int, payloads: Sequence[JSON]) -> list[int]:
        if self.gate is not None:
            self.entered.set()
            assert self.gate.wait(10)
        ids = self.inner.append(queue, range_id, payloads)
        self.appends.append(len(payloads))
        return ids

    def checkpoint(self, queue: PhysicalQueue, range_id: int, ack_level: int) -> None:
        self.inner.checkpoint(queue, range_id, ack_level)
        self.checkpoints.append(ack_level)

    def read(self, queue: PhysicalQueue, above: int, limit: int) -> list[Any]:
        self.reads += 1
        return self.inner.read(queue, above, limit)


def _state(store: Store) -> QueueState:
    state = store.queue_state(Q)
    assert state is not None
    return state


def _wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


# batched append ---------------------------------------------------------------------------
def test_concurrent_arrivals_share_one_append(new_store: StoreFactory) -> None:
    """While the leader's append is in flight, later arrivals queue and go in ONE append."""
    store = CountingStore(new_store())
    mgr = BacklogManager(store, Q, store.history, spool_batch=100)  # type: ignore[arg-type]
    mgr.load()
    store.gate = threading.Event()
    results: dict[int, list[int]] = {}

    def spool(i: int) -> None:
        results[i] = mgr.spool_many([{"n": i, "k": k} for k in range(i % 3 + 1)])

    first = threading.Thread(target=spool, args=(0,))
    first.start()
    assert store.entered.wait(10)  # the leader is inside its append
    others = [threading.Thread(target=spool, args=(i,)) for i in range(1, 9)]
    for t in others:
        t.start()
    assert mgr.spooler is not None
    _wait_until(lambda: len(mgr.spooler._queue) == 8, "arrivals never queued")  # type: ignore[union-attr]
    store.gate.set()
    for t in [first, *others]:
        t.join(10)

    assert store.appends == [1, sum(i % 3 + 1 for i in range(1, 9))]  # two transactions
    every = sorted(i for ids in results.values() for i in ids)
    assert every == list(range(1, len(every) + 1))  # consecutive, none shared
    for i, ids in results.items():  # each caller's tasks are consecutive: never split
        assert ids == list(range(ids[0], ids[0] + i % 3 + 1))
        assert [t.data["n"] for t in store.read(Q, ids[0] - 1, len(ids))] == [i] * len(ids)
    assert _state(store).last_task_id == len(every)


def test_spool_batch_limit_keeps_requests_whole(new_store: StoreFactory) -> None:
    """Partial batches: the batch limit splits the queue between requests, never inside one."""
    store = CountingStore(new_store())
    mgr = BacklogManager(store, Q, store.history, spool_batch=4)  # type: ignore[arg-type]
    mgr.load()
    assert mgr.spool_many([{"n": i} for i in range(10)]) == list(range(1, 11))  # > limit: whole
    store.gate = threading.Event()
    threads = [threading.Thread(target=mgr.spool, args=({"n": i},)) for i in range(7)]
    threads[0].start()
    assert store.entered.wait(10)
    for t in threads[1:]:
        t.start()
    _wait_until(lambda: len(mgr.spooler._queue) == 6, "arrivals never queued")  # type: ignore[union-attr]
    store.gate.set()
    for t in threads:
        t.join(10)
    assert store.appends == [10, 1, 4, 2]
    assert store.task_ids(Q) == list(range(1, 18))


def test_stale_owner_batch_fails_whole(new_store: StoreFactory) -> None:
    """Takeover mid-batch: the old owner's queued batch is one transaction; it fails whole
    and nothing of it is visible (ids, rows, counters)."""
    old_store = CountingStore(new_store())
    old = BacklogManager(old_store, Q, old_store.history, spool_batch=100)  # type: ignore[arg-type]
    old.load()
    old.spool_many([{"n": 0}, {"n": 1}])
    old_store.gate = threading.Event()
    errors: list[BaseException] = []

    def spool(i: int) -> None:
        try:
            old.spool_many([{"n": i}, {"n": i}])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=spool, args=(i,)) for i in range(2, 6)]
    threads[0].start()
    assert old_store.entered.wait(10)  # the old owner's append is in flight...
    for t in threads[1:]:
        t.start()
    _wait_until(lambda: len(old.spooler._queue) == 3, "arrivals never queued")  # type: ignore[union-attr]
    new_owner = new_store()
    successor = BacklogManager(new_owner, Q, new_owner.history, spool_batch=100)
    assert successor.load().range_id == 2  # ...when the queue is taken over
    before = (new_owner.queue_state(Q), new_owner.task_ids(Q))
    old_store.gate.set()
    for t in threads:
        t.join(10)

    assert len(errors) == 4 and all(isinstance(e, StaleRangeError) for e in errors)
    assert not old.loaded
    assert (new_owner.queue_state(Q), new_owner.task_ids(Q)) == before
    assert before[0] == QueueState(range_id=2, ack_level=0, last_task_id=2)
    assert successor.spool_many([{"n": 9}]) == [3]  # the new owner continues at 3


def test_stale_owner_cannot_flush_its_unsaved_acks(new_store: StoreFactory) -> None:
    store = new_store()
    old = BacklogManager(store, Q, store.history, checkpoint_every=100)
    old.load()
    old.spool_many(_runs(store, range(1, 5)))
    old.read()
    for task_id in (1, 2, 3):
        assert old.dispatch(task_id) is StartOutcome.STARTED
    assert _state(store).ack_level == 0  # acked, not yet saved
    other = new_store()
    successor = BacklogManager(other, Q, other.history)
    successor.load()
    with pytest.raises(StaleRangeError):
        old.flush()
    assert not old.loaded
    assert _state(other) == QueueState(range_id=2, ack_level=0, last_task_id=4)
    assert other.task_ids(Q) == [1, 2, 3, 4]
    old.unload()  # already unloaded: nothing to do, no error


# batched and interval checkpoints ---------------------------------------------------------
def test_checkpoint_every_n_acks_and_flush_on_unload(new_store: StoreFactory) -> None:
    """Partial checkpoint batch: fewer than N acks save nothing until the unload flushes."""
    store = CountingStore(new_store())
    mgr = BacklogManager(store, Q, store.history, checkpoint_every=3)  # type: ignore[arg-type]
    mgr.load()
    mgr.spool_many(_runs(store, range(1, 8)))
    mgr.read()
    for task_id in (2, 1):
        mgr.dispatch(task_id)
    assert store.checkpoints == [] and _state(store).ack_level == 0
    mgr.dispatch(3)  # the third ack: one checkpoint covers 1-3
    assert store.checkpoints == [3]
    assert store.task_ids(Q) == [4, 5, 6, 7]
    for task_id in (4, 6):
        mgr.dispatch(task_id)
    assert store.checkpoints == [3]  # partial batch: 2 acks, level 4 unsaved
    assert mgr.progress().ack_level == 4 and mgr.saved_ack_level == 3
    mgr.unload()
    assert store.checkpoints == [3, 4]  # the flush saved the handled prefix only
    assert _state(store) == QueueState(range_id=1, ack_level=4, last_task_id=7)
    assert store.task_ids(Q) == [5, 6, 7]  # 6 was handled above the gap at 5: stays stored


def test_interval_checkpoint_with_a_clock(new_store: StoreFactory) -> None:
    now = [100.0]
    store = CountingStore(new_store())
    mgr = BacklogManager(
        store,  # type: ignore[arg-type]
        Q,
        store.history,
        checkpoint_every=1000,
        checkpoint_interval=2.0,
        clock=lambda: now[0],
    )
    mgr.load()
    mgr.spool_many(_runs(store, range(1, 4)))
    mgr.read()
    mgr.dispatch(1)
    mgr.tick()
    assert store.checkpoints == []
    now[0] += 2.5
    mgr.tick()  # a quiet queue: the interval passed, the flusher's tick saves it
    assert store.checkpoints == [1]
    mgr.dispatch(2)
    assert store.checkpoints == [1]
    now[0] += 2.0
    mgr.dispatch(3)  # the ack after the interval saves
    assert store.checkpoints == [1, 3]
    assert store.task_ids(Q) == []


def test_matching_flusher_saves_a_quiet_queue(new_store: StoreFactory) -> None:
    store = new_store()
    matching = Matching(store, checkpoint_every=1000, checkpoint_interval=0.05, spool_batch=50)
    try:
        matching.add_tasks(Q, _runs(store, range(1, 4)))
        assert len(matching.poll_batch(Q, 10)) == 3
        _wait_until(lambda: _state(store).ack_level == 3, "the flusher never checkpointed")
        assert store.task_ids(Q) == []
    finally:
        matching.shutdown()
    assert matching.loaded() == []


def test_shutdown_flushes_every_queue(new_store: StoreFactory) -> None:
    store = new_store()
    other = PhysicalQueue("ns", "batched", "activity", 0)
    matching = Matching(store, checkpoint_every=1000, spool_batch=50)
    for queue in (Q, other):
        matching.add_tasks(queue, _runs(store, range(1, 3)))
        assert len(matching.poll_batch(queue, 10)) == 2
        assert store.queue_state(queue) == QueueState(1, 0, 2)
    matching.shutdown()
    for queue in (Q, other):
        assert store.queue_state(queue) == QueueState(1, 2, 2)
        assert store.task_ids(queue) == []


# crash between batches --------------------------------------------------------------------
def test_crash_between_batches_loses_no_acknowledged_task(new_store: StoreFactory) -> None:
    """Acks after the last batched checkpoint are process state: after a crash the next owner
    re-reads them and History rejects each replay as already started."""
    store = CountingStore(new_store())
    payloads = _runs(store, range(1, 13))
    host = Matching(store, checkpoint_every=5, spool_batch=100)  # type: ignore[arg-type]
    assert host.add_tasks(Q, payloads[:6]) == [1, 2, 3, 4, 5, 6]
    assert host.add_tasks(Q, payloads[6:]) == list(range(7, 13))
    assert store.appends == [6, 6]
    delivered = host.poll_batch(Q, 7)
    assert [d.task_id for d in delivered] == [1, 2, 3, 4, 5, 6, 7]
    assert store.checkpoints == [7]  # 7 acks >= 5: one checkpoint for the batch
    more = host.poll_batch(Q, 3)
    assert [d.task_id for d in more] == [8, 9, 10]
    assert store.checkpoints == [7]  # 3 acks: below the batch size, unsaved
    # crash: no unload, no flush; process state vanishes
    successor_store = new_store()
    successor = Matching(successor_store, checkpoint_every=5, spool_batch=100)
    assert successor.manager(Q).range_id == 2
    assert _state(successor_store) == QueueState(range_id=2, ack_level=7, last_task_id=12)
    mgr = successor.manager(Q)
    replayed = mgr.claim(100)
    assert [t.task_id for t in replayed] == [8, 9, 10, 11, 12]  # above the saved level only
    outcomes = mgr.dispatch_claimed(replayed)
    assert outcomes == [StartOutcome.ALREADY_STARTED] * 3 + [StartOutcome.STARTED] * 2
    successor.shutdown()
    assert _state(successor_store) == QueueState(range_id=2, ack_level=12, last_task_id=12)
    assert successor_store.task_ids(Q) == []
    # the crashed owner, had it kept running, is fenced: its late checkpoint changes nothing
    with pytest.raises(StaleRangeError):
        host.manager(Q).checkpoint()
    assert _state(successor_store) == QueueState(range_id=2, ack_level=12, last_task_id=12)


# dispatch batches -------------------------------------------------------------------------
def test_poll_batch_answers_as_one_by_one(new_store: StoreFactory) -> None:
    """One History call for the batch, each task its own answer; a partial batch (fewer
    stored than asked) delivers what there is."""
    store = new_store()
    started = _runs(store, [1])[0]
    store.history.record_task_started(*_identity(started))
    completed = _runs(store, [2], status="completed")[0]
    unknown = task_payload("ns", "wf-3", str(uuid.uuid4()), "workflow", 3)
    fresh = _runs(store, [4, 5])
    duplicate = dict(fresh[0])  # the same start spooled twice
    matching = Matching(store, spool_batch=10, checkpoint_every=100)
    matching.add_tasks(Q, [started, completed, unknown, {"task": {}}, *fresh, duplicate])
    deliveries = matching.poll_batch(Q, 50)
    assert deliveries == [Delivery(Q, 5, fresh[0]), Delivery(Q, 6, fresh[1])]
    assert matching.poll_batch(Q, 50) == []
    assert matching.manager(Q).progress().ack_level == 7
    matching.shutdown()
    assert _state(store) == QueueState(range_id=1, ack_level=7, last_task_id=7)


def test_batched_history_matches_single_calls(new_store: StoreFactory) -> None:
    store = new_store()
    a, b = _runs(store, [1, 2])
    gone = _runs(store, [3], status="terminated")[0]
    ids = [_identity(a), _identity(b), _identity(a), _identity(gone), ("nope", 1)]
    ids += [(str(uuid.uuid4()), 7), (_identity(b)[0], 99), _identity(b)]
    expected = [
        StartOutcome.STARTED,
        StartOutcome.STARTED,
        StartOutcome.ALREADY_STARTED,
        StartOutcome.OBSOLETE,
        StartOutcome.OBSOLETE,
        StartOutcome.OBSOLETE,
        StartOutcome.OBSOLETE,
        StartOutcome.ALREADY_STARTED,
    ]
    assert store.history.record_tasks_started(ids) == expected
    assert store.history.record_tasks_started(ids[:2]) == [StartOutcome.ALREADY_STARTED] * 2
    assert store.history.record_tasks_started([]) == []
    faulty = FaultyHistory(store.history)
    c, d = _runs(store, [4, 5])
    faulty.fail_next(1)
    assert faulty.record_tasks_started([_identity(c), _identity(d)]) == [
        StartOutcome.RETRYABLE,
        StartOutcome.STARTED,
    ]


def test_retryable_in_a_batch_leaves_a_gap_that_later_closes(new_store: StoreFactory) -> None:
    store = new_store()
    history = FaultyHistory(store.history)
    matching = Matching(store, history=history, spool_batch=10, checkpoint_every=1)
    payloads = _runs(store, range(1, 5))
    matching.add_tasks(Q, payloads)
    history.fail_next(1)  # task 1 fails retryably, 2-4 start in the same History call
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [2, 3, 4]
    assert _state(store).ack_level == 0 and store.task_ids(Q) == [1, 2, 3, 4]
    assert matching.manager(Q).pending() == [1]
    assert matching.poll_batch(Q, 10) == [Delivery(Q, 1, payloads[0])]
    assert _state(store) == QueueState(range_id=1, ack_level=4, last_task_id=4)
    assert store.task_ids(Q) == []


# sync match -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["one-by-one", "batched"])
def test_sync_matched_tasks_cost_zero_writes_to_tasks(new_store: StoreFactory, mode: str) -> None:
    store = CountingStore(new_store())
    kwargs = BATCHED if mode == "batched" else {}
    matching = Matching(store, **kwargs)  # type: ignore[arg-type]
    payloads = _runs(store, range(1, 6))
    for data in payloads:
        result: list[Delivery | None] = []
        poller = threading.Thread(
            target=lambda out=result: out.append(matching.poll(Q, timeout=10))
        )
        poller.start()
        _wait_until(lambda: bool(matching._waiters.get(Q)), "poller never waited")
        assert matching.add_task(Q, data) == AddResult(True, None, StartOutcome.STARTED)
        poller.join(10)
        assert result == [Delivery(Q, None, data)]
    assert store.appends == []  # no append at all: zero writes to tasks
    assert store.checkpoints == []
    assert _state(store) == QueueState(range_id=1, ack_level=0, last_task_id=0)
    assert store.task_ids(Q) == []
    matching.shutdown()
    assert store.checkpoints == []


def test_one_by_one_is_the_default_path(new_store: StoreFactory) -> None:
    """The default: one append per spooled task, one checkpoint per moved ack."""
    store = CountingStore(new_store())
    matching = Matching(store)  # type: ignore[arg-type]
    for data in _runs(store, range(1, 5)):
        matching.add_task(Q, data)
    assert store.appends == [1, 1, 1, 1]
    assert [d.task_id for d in iter(lambda: matching.poll(Q), None)] == [1, 2, 3, 4]
    assert store.checkpoints == [1, 2, 3, 4]


@pytest.mark.parametrize("mode", ["one-by-one", "batched"])
def test_an_idle_poll_costs_no_read(new_store: StoreFactory, mode: str) -> None:
    """The owner is its queue's only writer: with nothing stored above readLevel, a poll
    answers from process state; after an append it reads again (in pages)."""
    setup = new_store()
    state = setup.load_queue(Q)
    setup.append(Q, state.range_id, _runs(setup, range(1, 4)))  # stored before this owner
    store = CountingStore(new_store())
    kwargs = dict(BATCHED, read_batch=2) if mode == "batched" else {"read_batch": 2}
    matching = Matching(store, **kwargs)  # type: ignore[arg-type]
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [1, 2]  # one page
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [3]
    reads = store.reads
    for _ in range(5):
        assert matching.poll(Q) is None and matching.poll_batch(Q, 10) == []
    assert store.reads == reads  # idle: no round trip
    matching.add_task(Q, _runs(store, [4])[0])
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [4]
    assert store.reads == reads + 1
    matching.shutdown()


# concurrency ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["one-by-one", "batched"])
def test_concurrent_producers_and_pollers_deliver_each_task_once(
    new_store: StoreFactory, mode: str
) -> None:
    store = new_store()
    total, producers, pollers = 120, 4, 3
    payloads = _runs(store, range(1, total + 1))
    kwargs: dict[str, Any] = BATCHED if mode == "batched" else {}
    matching = Matching(store, **kwargs)
    delivered: list[Delivery] = []
    lock = threading.Lock()
    done = threading.Event()

    def produce(k: int) -> None:
        for data in payloads[k::producers]:
            matching.add_task(Q, data)

    def consume() -> None:
        while not done.is_set():
            batch = matching.poll_batch(Q, 8) if mode == "batched" else [matching.poll(Q)]
            got = [d for d in batch if d is not None]
            with lock:
                delivered.extend(got)
                if len(delivered) >= total:
                    done.set()
            if not got:
                time.sleep(0.001)

    watcher_store, saved_levels = new_store(), [0]

    def watch() -> None:  # another handle samples the saved ack level throughout
        while not done.is_set():
            state = watcher_store.queue_state(Q)
            saved_levels.append(state.ack_level if state else 0)
            time.sleep(0.002)

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
    threads += [threading.Thread(target=consume) for _ in range(pollers)]
    threads.append(threading.Thread(target=watch))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    matching.shutdown()
    assert saved_levels == sorted(saved_levels)  # the saved ack level never moved back
    assert sorted(_identity(d.data) for d in delivered) == sorted(map(_identity, payloads))
    task_ids = [d.task_id for d in delivered]
    assert None not in task_ids and len(set(task_ids)) == total
    assert _state(store) == QueueState(range_id=1, ack_level=total, last_task_id=total)
    assert store.task_ids(Q) == []


# AckTracker cost --------------------------------------------------------------------------
def test_ack_tracker_is_constant_time_per_ack() -> None:
    """A long gap used to cost a full scan per completion (quadratic); now each ack is O(1)
    amortised: 200,000 completions above a gap, then one that closes it."""
    n = 200_000
    tracker = AckTracker()
    for task_id in range(1, n + 1):
        tracker.read(task_id)
    started = time.perf_counter()
    for task_id in range(2, n + 1):
        assert tracker.complete(task_id) == 0
    assert tracker.outstanding == 1
    assert tracker.complete(1) == n
    elapsed = time.perf_counter() - started
    assert tracker.outstanding == 0 and tracker.pending() == []
    assert elapsed < 5, f"{elapsed:.1f}s for {n} acks"  # quadratic would take hours


def test_spooler_reports_errors_to_every_request_of_the_batch() -> None:
    calls: list[int] = []

    def append(payloads: list[JSON]) -> list[int]:
        calls.append(len(payloads))
        raise RuntimeError("database went away")

    spooler = Spooler(append, max_batch=10)
    with pytest.raises(RuntimeError):
        spooler.submit([{"a": 1}])
    assert spooler.submit([]) == []
    assert calls == [1]
    with pytest.raises(ValueError):
        Spooler(append, max_batch=0)


# full-process crash in batched mode -------------------------------------------------------
CRASH_Q = PhysicalQueue("ns", "batched-recovery", "workflow", 1)
CHILD = r"""
import json, os, sys, time
from queueguard.runtime.backlog import BacklogManager
from queueguard.core.keys import decode
from queueguard.stores.postgres import PostgresStore

dsn, key, payload_file, out = sys.argv[1:5]
payloads = json.loads(open(payload_file).read())

def log(name, values):
    with open(os.path.join(out, name), "a") as f:
        f.write("".join(f"{v}\n" for v in values))
        f.flush()
        os.fsync(f.fileno())

store = PostgresStore(dsn, host_id="batched-child", pool_size=2)
mgr = BacklogManager(store, decode(key), store.history, spool_batch=64, checkpoint_every=16)
log("range", [mgr.load().range_id])
for start in range(0, len(payloads), 24):
    mgr.spool_many(payloads[start:start + 24])
    while claimed := mgr.claim(10):
        log("dispatching", [t.task_id for t in claimed])
        outcomes = mgr.dispatch_claimed(claimed)  # one History call, acks, maybe checkpoint
        assert all(o.value == "started" for o in outcomes), outcomes
        log("acked", [t.task_id for t in claimed])
        progress = mgr.progress()
        if progress.ack_level >= 100 and mgr.saved_ack_level < progress.ack_level:
            log("between_batches", [mgr.saved_ack_level])  # acked, not yet checkpointed
            time.sleep(3600)  # the parent kills us here
log("finished", [1])
time.sleep(3600)
"""


def test_sigkill_between_batches_loses_no_acknowledged_task(head_db: str, tmp_path: Path) -> None:
    """Batched mode under a real SIGKILL: acks after the last checkpoint are replayed by the
    next owner and History answers already-started for every one of them."""
    setup = PostgresStore(head_db, host_id="batched-setup", pool_size=1)
    try:
        payloads = _runs(setup, range(1, 401))
    finally:
        setup.close()
    (tmp_path / "payloads.json").write_text(json.dumps(payloads))
    args = [sys.executable, "-c", CHILD, head_db, CRASH_Q.key, str(tmp_path / "payloads.json")]
    with (tmp_path / "child.err").open("wb") as err:
        proc = subprocess.Popen([*args, str(tmp_path)], stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while not _logged(tmp_path, "between_batches"):
            assert proc.poll() is None, (tmp_path / "child.err").read_text()
            assert time.monotonic() < deadline, "child made no progress"
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / "finished").exists()
    acked = set(_logged(tmp_path, "acked"))
    dispatching = set(_logged(tmp_path, "dispatching"))
    owner = PostgresStore(head_db, host_id="batched-successor", pool_size=2)
    try:
        successor = BacklogManager(owner, CRASH_Q, owner.history, checkpoint_every=16)
        state = successor.load()
        saved, spooled = state.ack_level, state.last_task_id
        assert state.range_id == 2 and spooled % 24 == 0 and spooled >= max(acked)
        assert set(range(1, saved + 1)) <= acked  # nothing saved that was not handled
        outcomes: dict[int, StartOutcome] = {}
        while claimed := successor.claim(50):
            answers = successor.dispatch_claimed(claimed)
            outcomes.update((t.task_id, o) for t, o in zip(claimed, answers, strict=True))
        assert sorted(outcomes) == list(range(saved + 1, spooled + 1))  # resumed above it
        for task_id, outcome in outcomes.items():
            if task_id in acked:  # History accepted it before the kill: the replay is rejected
                assert outcome is StartOutcome.ALREADY_STARTED, task_id
            elif task_id in dispatching:  # killed during its History call: either answer
                assert outcome in (StartOutcome.STARTED, StartOutcome.ALREADY_STARTED)
            else:
                assert outcome is StartOutcome.STARTED, task_id
        assert saved == _logged(tmp_path, "between_batches")[0]
        assert {t for t in outcomes if t in acked} == set(range(saved + 1, max(acked) + 1))
        successor.unload()  # flushes
        assert owner.queue_state(CRASH_Q) == QueueState(2, spooled, spooled)
        assert owner.task_ids(CRASH_Q) == []
    finally:
        owner.close()


def _logged(folder: Path, name: str) -> list[int]:
    path = folder / name
    return [int(line) for line in path.read_text().split()] if path.exists() else []
