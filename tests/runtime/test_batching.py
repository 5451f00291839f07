"""Batched mode keeps every guarantee of the contract, on both stores.

Batched append (group commit of concurrent arrivals), batched and interval checkpoints with a
flush on unload, and batched History starts. Each case runs on the memory store and on
PostgreSQL (`new_store` from conftest: independent handles on one backing database).
"""

from __future__ import annotations

import threading

import pytest

from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import QueueState, StartOutcome
from queueguard.errors import StaleRangeError
from queueguard.runtime.backlog import BacklogManager
from queueguard.runtime.matching import Matching

from .batching_support import (
    CountingStore,
    Q,
    StoreFactory,
    runs,
    state_of,
    wait_until,
)


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
    wait_until(lambda: len(mgr.spooler._queue) == 8, "arrivals never queued")  # type: ignore[union-attr]
    store.gate.set()
    for t in [first, *others]:
        t.join(10)

    assert store.appends == [1, sum(i % 3 + 1 for i in range(1, 9))]  # two transactions
    every = sorted(i for ids in results.values() for i in ids)
    assert every == list(range(1, len(every) + 1))  # consecutive, none shared
    for i, ids in results.items():  # each caller's tasks are consecutive: never split
        assert ids == list(range(ids[0], ids[0] + i % 3 + 1))
        assert [t.data["n"] for t in store.read(Q, ids[0] - 1, len(ids))] == [i] * len(ids)
    assert state_of(store).last_task_id == len(every)


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
    wait_until(lambda: len(mgr.spooler._queue) == 6, "arrivals never queued")  # type: ignore[union-attr]
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
    wait_until(lambda: len(old.spooler._queue) == 3, "arrivals never queued")  # type: ignore[union-attr]
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
    old.spool_many(runs(store, range(1, 5)))
    old.read()
    for task_id in (1, 2, 3):
        assert old.dispatch(task_id) is StartOutcome.STARTED
    assert state_of(store).ack_level == 0  # acked, not yet saved
    other = new_store()
    successor = BacklogManager(other, Q, other.history)
    successor.load()
    with pytest.raises(StaleRangeError):
        old.flush()
    assert not old.loaded
    assert state_of(other) == QueueState(range_id=2, ack_level=0, last_task_id=4)
    assert other.task_ids(Q) == [1, 2, 3, 4]
    old.unload()  # already unloaded: nothing to do, no error


# batched and interval checkpoints ---------------------------------------------------------
def test_checkpoint_every_n_acks_and_flush_on_unload(new_store: StoreFactory) -> None:
    """Partial checkpoint batch: fewer than N acks save nothing until the unload flushes."""
    store = CountingStore(new_store())
    mgr = BacklogManager(store, Q, store.history, checkpoint_every=3)  # type: ignore[arg-type]
    mgr.load()
    mgr.spool_many(runs(store, range(1, 8)))
    mgr.read()
    for task_id in (2, 1):
        mgr.dispatch(task_id)
    assert store.checkpoints == [] and state_of(store).ack_level == 0
    mgr.dispatch(3)  # the third ack: one checkpoint covers 1-3
    assert store.checkpoints == [3]
    assert store.task_ids(Q) == [4, 5, 6, 7]
    for task_id in (4, 6):
        mgr.dispatch(task_id)
    assert store.checkpoints == [3]  # partial batch: 2 acks, level 4 unsaved
    assert mgr.progress().ack_level == 4 and mgr.saved_ack_level == 3
    mgr.unload()
    assert store.checkpoints == [3, 4]  # the flush saved the handled prefix only
    assert state_of(store) == QueueState(range_id=1, ack_level=4, last_task_id=7)
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
    mgr.spool_many(runs(store, range(1, 4)))
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
        matching.add_tasks(Q, runs(store, range(1, 4)))
        assert len(matching.poll_batch(Q, 10)) == 3
        wait_until(lambda: state_of(store).ack_level == 3, "the flusher never checkpointed")
        assert store.task_ids(Q) == []
    finally:
        matching.shutdown()
    assert matching.loaded() == []


def test_shutdown_flushes_every_queue(new_store: StoreFactory) -> None:
    store = new_store()
    other = PhysicalQueue("ns", "batched", "activity", 0)
    matching = Matching(store, checkpoint_every=1000, spool_batch=50)
    for queue in (Q, other):
        matching.add_tasks(queue, runs(store, range(1, 3)))
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
    payloads = runs(store, range(1, 13))
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
    assert state_of(successor_store) == QueueState(range_id=2, ack_level=7, last_task_id=12)
    mgr = successor.manager(Q)
    replayed = mgr.claim(100)
    assert [t.task_id for t in replayed] == [8, 9, 10, 11, 12]  # above the saved level only
    outcomes = mgr.dispatch_claimed(replayed)
    assert outcomes == [StartOutcome.ALREADY_STARTED] * 3 + [StartOutcome.STARTED] * 2
    successor.shutdown()
    assert state_of(successor_store) == QueueState(range_id=2, ack_level=12, last_task_id=12)
    assert successor_store.task_ids(Q) == []
    # the crashed owner, had it kept running, is fenced: its late checkpoint changes nothing
    with pytest.raises(StaleRangeError):
        host.manager(Q).checkpoint()
    assert state_of(successor_store) == QueueState(range_id=2, ack_level=12, last_task_id=12)
