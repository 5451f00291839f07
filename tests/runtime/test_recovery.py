"""Full-process SIGKILL recovery on PostgreSQL.

A child process owns a queue and spools, dispatches and acknowledges continuously, logging
each task id (fsync'd) before dispatch and after its acknowledgement. The parent SIGKILLs it
mid-stream; a new owner loads the queue, resumes above the saved ack level and drains it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import Execution, StartOutcome
from queueguard.runtime.backlog import BacklogManager
from queueguard.stores.postgres import PostgresStore

Q = PhysicalQueue("ns", "recovery", "workflow", 3)
TASKS = 400
KILL_AFTER_ACKS = 50

CHILD = r"""
import json, os, random, sys, time
from queueguard.runtime.backlog import BacklogManager
from queueguard.core.keys import decode
from queueguard.stores.postgres import PostgresStore

dsn, key, payload_file, out = sys.argv[1:5]
payloads = json.loads(open(payload_file).read())

def log(name, value):
    with open(os.path.join(out, name), "a") as f:
        f.write(f"{value}\n")
        f.flush()
        os.fsync(f.fileno())

store = PostgresStore(dsn, host_id="recovery-child", pool_size=1)
mgr = BacklogManager(store, decode(key), store.history, checkpoint_every=1)
log("range", mgr.load().range_id)
shuffle = random.Random(7).shuffle
for start in range(0, len(payloads), 8):
    mgr.spool_many(payloads[start:start + 8])
    mgr.read()
    order = mgr.pending()
    shuffle(order)  # out-of-order dispatch leaves handled rows above ack gaps
    for task_id in order:
        log("dispatching", task_id)
        outcome = mgr.dispatch(task_id)  # History, then ack (+ checkpoint if it moved)
        assert outcome.value == "started", outcome
        log("acked", task_id)
log("finished", 1)
time.sleep(3600)
"""


def _ids(folder: Path, name: str) -> list[int]:
    path = folder / name
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _spawn_child(dsn: str, folder: Path) -> subprocess.Popen[bytes]:
    setup = PostgresStore(dsn, host_id="recovery-setup", pool_size=1)
    try:
        payloads = []
        for event in range(1, TASKS + 1):
            run_id = str(uuid.uuid4())
            setup.history.add_execution(Execution(run_id, "ns", f"wf-{event}"))
            setup.history.schedule_task(run_id, event, "workflow")
            payloads.append(task_payload("ns", f"wf-{event}", run_id, "workflow", event))
    finally:
        setup.close()
    (folder / "payloads.json").write_text(json.dumps(payloads))
    args = [sys.executable, "-c", CHILD, dsn, Q.key, str(folder / "payloads.json"), str(folder)]
    with (folder / "child.err").open("wb") as err:
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)


def _kill_mid_stream(proc: subprocess.Popen[bytes], dsn: str, folder: Path) -> list[int]:
    """Wait for enough acks, sampling the saved ack level, then SIGKILL; returns samples."""
    watcher = PostgresStore(dsn, host_id="recovery-watcher", pool_size=1)
    samples: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(_ids(folder, "acked")) < KILL_AFTER_ACKS:
            assert proc.poll() is None, (folder / "child.err").read_text()
            assert time.monotonic() < deadline, "child made no progress"
            state = watcher.queue_state(Q)
            if state is not None:
                samples.append(state.ack_level)
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        state = watcher.queue_state(Q)
        assert state is not None
        samples.append(state.ack_level)
    finally:
        watcher.close()
    return samples


def test_sigkill_mid_stream_loses_no_acknowledged_task(head_db: str, tmp_path: Path) -> None:
    proc = _spawn_child(head_db, tmp_path)
    try:
        samples = _kill_mid_stream(proc, head_db, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (child_range,) = _ids(tmp_path, "range")
    dispatching, acked = _ids(tmp_path, "dispatching"), set(_ids(tmp_path, "acked"))
    in_flight = set(dispatching) - acked
    assert not (tmp_path / "finished").exists() and len(acked) < TASKS  # killed mid-stream
    assert acked <= set(dispatching) and len(in_flight) <= 1
    assert samples == sorted(samples)  # the saved ack level never moved backwards

    owner = PostgresStore(head_db, host_id="recovery-successor", pool_size=2)
    try:
        successor = BacklogManager(owner, Q, owner.history)
        state = successor.load()
        saved_ack, spooled = state.ack_level, state.last_task_id
        assert state.range_id > child_range
        assert saved_ack == samples[-1]
        assert set(range(1, saved_ack + 1)) <= set(dispatching)  # never acked undispatched work
        assert max(acked) <= spooled

        outcomes: dict[int, StartOutcome] = {}
        levels = [saved_ack]
        while batch := successor.read():
            for task in batch:
                outcomes[task.task_id] = successor.dispatch(task.task_id)
                levels.append(successor.progress().ack_level)

        # resumed strictly above the saved ack level, with every row above it still stored
        assert sorted(outcomes) == list(range(saved_ack + 1, spooled + 1))
        # no acknowledged task lost: each spooled task was acked before the kill or delivered
        assert set(range(1, spooled + 1)) == set(range(1, saved_ack + 1)) | set(outcomes)
        for task_id, outcome in outcomes.items():
            if task_id in acked:  # History accepted it before the kill: a replay is rejected
                assert outcome is StartOutcome.ALREADY_STARTED, task_id
            elif task_id in in_flight:  # killed during its History call: either answer
                assert outcome in (StartOutcome.STARTED, StartOutcome.ALREADY_STARTED)
            else:
                assert outcome is StartOutcome.STARTED, task_id
        assert levels == sorted(levels) and levels[-1] == spooled
        final = owner.queue_state(Q)
        assert final is not None
        assert (final.range_id, final.ack_level, final.last_task_id) == (
            child_range + 1,
            spooled,
            spooled,
        )
        assert owner.task_ids(Q) == []
    finally:
        owner.close()
