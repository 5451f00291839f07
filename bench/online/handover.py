"""Scenario (b) of the online-upgrade benchmark: one queue's host rolled from v0.3 to v0.4
inside the protocol window, overlapping.

A v0.3 host (`V03Worker`, pg8000) adds and dispatches on `bulk/handover/workflow/0`; after
`lead_s` a v0.4 host (Matching) starts on the same queue while the v0.3 one still runs. The
v0.4 load takes the range and marks it (`protocol4_range`); the v0.3 host's next append or
checkpoint gets a range conflict, and its reload violates `queue_owned_by_protocol_4`. The
handover gap is the longest time the queue went without a dispatch, from the v0.4 start until
the v0.3 host is out. Every task either host added must be started once.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.online.database import HANDOVER, started
from bench.online.gaps import longest_gap
from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.queue_schema.legacy import LegacyQueue, V03Worker
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore

QUEUE = PhysicalQueue("bulk", "handover", "workflow", 0)
LEGACY_QUEUE = LegacyQueue("bulk", "handover")


@dataclass
class HandoverResult:
    gap_s: float  # the queue's longest dispatch gap from the v0.4 start until v0.3 was out
    v03_last_to_v04_first_s: float  # the last v0.3 dispatch to the next v0.4 one
    v03_out_after_s: float  # from the v0.4 start to the v0.3 host's failed write
    v03_failure: str  # what ended the v0.3 host's ownership
    v03_reload: str  # what its reload got
    dispatched: dict[str, int] = field(default_factory=dict)  # per host version
    added: int = 0
    delivered: int = 0
    started: int = 0
    duplicates: int = 0
    lost: int = 0  # added, never started
    unexpected: int = 0  # started, never added

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Runs:
    """Task indexes shared by the two hosts; each index is added at most once."""

    def __init__(self, limit: int) -> None:
        self.limit, self.next, self.lock = limit, 0, threading.Lock()
        self.added: list[int] = []
        self.delivered: list[tuple[float, str, int]] = []  # (when, host version, index)

    def take(self) -> int | None:
        with self.lock:
            if self.next >= self.limit:
                return None
            self.next += 1
            return self.next - 1


def _payload(index: int) -> dict[str, Any]:
    return task_payload("bulk", HANDOVER.workflow(index), HANDOVER.run(index), "workflow", 1)


class _OldHost(threading.Thread):
    """The v0.3 host: append one task, read, start what it read, checkpoint; every period,
    until a write is refused; then it reloads once, as the released host did on next use."""

    def __init__(self, dsn: str, runs: _Runs, period_s: float) -> None:
        super().__init__(daemon=True)
        self.dsn, self.runs, self.period_s = dsn, runs, period_s
        self.failure, self.reload = "", ""
        self.failed_at: float | None = None  # monotonic time of the refused write, if any
        self.stop = threading.Event()

    def run(self) -> None:
        worker = V03Worker(self.dsn, host_id="old1")
        try:
            worker.start()
            above = worker.load(LEGACY_QUEUE).ack_level
            while not self.stop.is_set():
                above = self._round(worker, above)
                time.sleep(self.period_s)
        except Exception as exc:  # the refused write: ownership ends here
            self.failed_at = time.monotonic()
            self.failure = f"{type(exc).__name__}: {exc}"
            try:
                worker.load(LEGACY_QUEUE)
                self.reload = "accepted (the fence did not hold)"
            except Exception as again:
                self.reload = f"{type(again).__name__}: {again}"
        finally:
            worker.close()

    def _round(self, worker: V03Worker, above: int) -> int:
        index = self.runs.take()
        if index is not None:
            worker.append(LEGACY_QUEUE, _payload(index))
            self.runs.added.append(index)
        rows = worker.read(LEGACY_QUEUE, above, 100)
        for task_id, data in rows:
            task = (json.loads(data) if isinstance(data, str) else data)["task"]
            if worker.record_start(task["runId"], task["scheduledEventId"]) == "started":
                found = HANDOVER.index_of(task["workflowId"])
                self.runs.delivered.append((time.monotonic(), "v0.3", found or -1))
            above = int(task_id)
        if rows:
            worker.checkpoint(LEGACY_QUEUE, above)
        return above


def _new_round(matching: Matching, runs: _Runs, produce: bool) -> int:
    index = runs.take() if produce else None
    if index is not None:
        matching.add_task(QUEUE, _payload(index))
        runs.added.append(index)
    found = 0
    while (delivery := matching.poll(QUEUE)) is not None:
        index = HANDOVER.index_of(str(delivery.data["task"]["workflowId"]))
        runs.delivered.append((time.monotonic(), "v0.4", -1 if index is None else index))
        found += 1
    return found


def run_handover(
    dsn: str, *, runs: int, lead_s: float = 2.0, tail_s: float = 2.0, period_s: float = 0.02
) -> HandoverResult:
    """The handover on `dsn`, which must be inside the window (phase migrate or contract)."""
    shared = _Runs(runs)
    old = _OldHost(dsn, shared, period_s)
    old.start()
    time.sleep(lead_s)
    store = PostgresStore(dsn, host_id="new1", create_schema=False)
    matching = Matching(store, "new1")
    v04_start = time.monotonic()
    try:
        deadline = v04_start + 60
        while time.monotonic() < deadline and (
            old.is_alive()
            or (old.failed_at is not None and time.monotonic() < old.failed_at + tail_s)
        ):
            _new_round(matching, shared, produce=True)
            time.sleep(period_s)
        old.stop.set()
        old.join(timeout=30)
        while _new_round(matching, shared, produce=False):  # what is left, until a round finds none
            pass
    finally:
        matching.shutdown()
        store.close()
    end = time.monotonic()
    times = sorted(t for t, _, _ in shared.delivered)
    out = end if old.failed_at is None else old.failed_at
    last_old = max((t for t, v, _ in shared.delivered if v == "v0.3"), default=v04_start)
    first_new = min(
        (t for t, v, _ in shared.delivered if v == "v0.4" and t >= last_old), default=end
    )
    delivered = [i for _, _, i in shared.delivered]
    done = started(dsn, HANDOVER)
    return HandoverResult(
        gap_s=longest_gap(times, v04_start, out, end),
        v03_last_to_v04_first_s=first_new - last_old,
        v03_out_after_s=out - v04_start,
        v03_failure=old.failure[:300],
        v03_reload=old.reload[:300],
        dispatched={
            version: sum(1 for _, v, _ in shared.delivered if v == version)
            for version in ("v0.3", "v0.4")
        },
        added=len(shared.added),
        delivered=len(delivered),
        started=len(done),
        duplicates=len(delivered) - len(set(delivered)),
        lost=len(set(shared.added) - set(done)),
        unexpected=len(set(done) - set(shared.added)),
    )
