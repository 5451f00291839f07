"""Shared pieces of the batched-mode tests: a counting store, payloads with History runs."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import JSON, Execution, QueueState, Store

StoreFactory = Callable[[], Store]
Q = PhysicalQueue("ns", "batched", "workflow", 0)
BATCHED: dict[str, Any] = {"spool_batch": 100, "checkpoint_every": 5}


def runs(store: Store, events: Sequence[int], status: str = "running") -> list[JSON]:
    payloads = []
    for event in events:
        run_id = str(uuid.uuid4())
        store.history.add_execution(Execution(run_id, "ns", f"wf-{event}", status))
        store.history.schedule_task(run_id, event, "workflow")
        payloads.append(task_payload("ns", f"wf-{event}", run_id, "workflow", event))
    return payloads


def identity(data: JSON) -> tuple[str, int]:
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


def state_of(store: Store) -> QueueState:
    state = store.queue_state(Q)
    assert state is not None
    return state


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)
