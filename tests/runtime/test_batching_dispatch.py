"""Batched mode, continued: batched dispatch and History starts, sync match, concurrency,
ack-tracking cost, and a SIGKILL between batches (on both stores where a store is involved).
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
from pathlib import Path
from typing import Any

import pytest

from queueguard.core.acks import AckTracker
from queueguard.core.history import FaultyHistory, task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import JSON, QueueState, StartOutcome
from queueguard.runtime.backlog import BacklogManager
from queueguard.runtime.matching import AddResult, Delivery, Matching
from queueguard.runtime.spooler import Spooler
from queueguard.stores.postgres import PostgresStore

from .batching_support import (
    BATCHED,
    CountingStore,
    Q,
    StoreFactory,
    identity,
    runs,
    state_of,
    wait_until,
)


# dispatch batches -------------------------------------------------------------------------
def test_poll_batch_answers_as_one_by_one(new_store: StoreFactory) -> None:
    """One History call for the batch, each task its own answer; a partial batch (fewer
    stored than asked) delivers what there is."""
    store = new_store()
    started = runs(store, [1])[0]
    store.history.record_task_started(*identity(started))
    completed = runs(store, [2], status="completed")[0]
    unknown = task_payload("ns", "wf-3", str(uuid.uuid4()), "workflow", 3)
    fresh = runs(store, [4, 5])
    duplicate = dict(fresh[0])  # the same start spooled twice
    matching = Matching(store, spool_batch=10, checkpoint_every=100)
    matching.add_tasks(Q, [started, completed, unknown, {"task": {}}, *fresh, duplicate])
    deliveries = matching.poll_batch(Q, 50)
    assert deliveries == [Delivery(Q, 5, fresh[0]), Delivery(Q, 6, fresh[1])]
    assert matching.poll_batch(Q, 50) == []
    assert matching.manager(Q).progress().ack_level == 7
    matching.shutdown()
    assert state_of(store) == QueueState(range_id=1, ack_level=7, last_task_id=7)


def test_batched_history_matches_single_calls(new_store: StoreFactory) -> None:
    store = new_store()
    a, b = runs(store, [1, 2])
    gone = runs(store, [3], status="terminated")[0]
    ids = [identity(a), identity(b), identity(a), identity(gone), ("nope", 1)]
    ids += [(str(uuid.uuid4()), 7), (identity(b)[0], 99), identity(b)]
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
    c, d = runs(store, [4, 5])
    faulty.fail_next(1)
    assert faulty.record_tasks_started([identity(c), identity(d)]) == [
        StartOutcome.RETRYABLE,
        StartOutcome.STARTED,
    ]


def test_retryable_in_a_batch_leaves_a_gap_that_later_closes(new_store: StoreFactory) -> None:
    store = new_store()
    history = FaultyHistory(store.history)
    matching = Matching(store, history=history, spool_batch=10, checkpoint_every=1)
    payloads = runs(store, range(1, 5))
    matching.add_tasks(Q, payloads)
    history.fail_next(1)  # task 1 fails retryably, 2-4 start in the same History call
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [2, 3, 4]
    assert state_of(store).ack_level == 0 and store.task_ids(Q) == [1, 2, 3, 4]
    assert matching.manager(Q).pending() == [1]
    assert matching.poll_batch(Q, 10) == [Delivery(Q, 1, payloads[0])]
    assert state_of(store) == QueueState(range_id=1, ack_level=4, last_task_id=4)
    assert store.task_ids(Q) == []


# sync match -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["one-by-one", "batched"])
def test_sync_matched_tasks_cost_zero_writes_to_tasks(new_store: StoreFactory, mode: str) -> None:
    store = CountingStore(new_store())
    kwargs = BATCHED if mode == "batched" else {}
    matching = Matching(store, **kwargs)  # type: ignore[arg-type]
    payloads = runs(store, range(1, 6))
    for data in payloads:
        result: list[Delivery | None] = []
        poller = threading.Thread(
            target=lambda out=result: out.append(matching.poll(Q, timeout=10))
        )
        poller.start()
        wait_until(lambda: bool(matching._waiters.get(Q)), "poller never waited")
        assert matching.add_task(Q, data) == AddResult(True, None, StartOutcome.STARTED)
        poller.join(10)
        assert result == [Delivery(Q, None, data)]
    assert store.appends == []  # no append at all: zero writes to tasks
    assert store.checkpoints == []
    assert state_of(store) == QueueState(range_id=1, ack_level=0, last_task_id=0)
    assert store.task_ids(Q) == []
    matching.shutdown()
    assert store.checkpoints == []


def test_one_by_one_is_the_default_path(new_store: StoreFactory) -> None:
    """The default: one append per spooled task, one checkpoint per moved ack."""
    store = CountingStore(new_store())
    matching = Matching(store)  # type: ignore[arg-type]
    for data in runs(store, range(1, 5)):
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
    setup.append(Q, state.range_id, runs(setup, range(1, 4)))  # stored before this owner
    store = CountingStore(new_store())
    kwargs = dict(BATCHED, read_batch=2) if mode == "batched" else {"read_batch": 2}
    matching = Matching(store, **kwargs)  # type: ignore[arg-type]
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [1, 2]  # one page
    assert [d.task_id for d in matching.poll_batch(Q, 10)] == [3]
    reads = store.reads
    for _ in range(5):
        assert matching.poll(Q) is None and matching.poll_batch(Q, 10) == []
    assert store.reads == reads  # idle: no round trip
    matching.add_task(Q, runs(store, [4])[0])
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
    payloads = runs(store, range(1, total + 1))
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
    assert sorted(identity(d.data) for d in delivered) == sorted(map(identity, payloads))
    task_ids = [d.task_id for d in delivered]
    assert None not in task_ids and len(set(task_ids)) == total
    assert state_of(store) == QueueState(range_id=1, ack_level=total, last_task_id=total)
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
        payloads = runs(setup, range(1, 401))
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
