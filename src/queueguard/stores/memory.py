"""The memory store: a product feature with the same contract as PostgreSQL.

A `MemoryDatabase` holds the state; every `MemoryStore` is an independent handle on it (the
analogue of an independent connection pool), so fencing is checked across handles.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from queueguard.core.history import version_directive
from queueguard.core.keys import PhysicalQueue
from queueguard.core.protocol import PROTOCOL
from queueguard.core.store import (
    JSON,
    Execution,
    QueueState,
    StartOutcome,
    Task,
    UserData,
    require_json_object,
)
from queueguard.errors import ProtocolMismatch, StaleRangeError, UserDataConflict

#: How timestamps appear in snapshots (the PostgreSQL export renders the same shape).
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass
class QueueRecord:
    """A `task_queues` row plus its `tasks` rows."""

    range_id: int
    ack_level: int
    last_task_id: int
    tasks: dict[int, JSON] = field(default_factory=dict)


@dataclass
class ScheduledTask:
    kind: str
    started_at: str | None = None


@dataclass
class MemoryDatabase:
    """The whole store's state, guarded by one lock."""

    queues: dict[str, QueueRecord] = field(default_factory=dict)
    user_data: dict[tuple[str, str], tuple[int, JSON]] = field(default_factory=dict)
    executions: dict[str, Execution] = field(default_factory=dict)
    scheduled: dict[tuple[str, int], ScheduledTask] = field(default_factory=dict)
    protocol: tuple[int, int] = (PROTOCOL, PROTOCOL)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)


class MemoryHistory:
    """History over a MemoryDatabase."""

    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    def add_execution(self, execution: Execution) -> None:
        with self._db.lock:
            self._db.executions[execution.run_id] = execution

    def schedule_task(self, run_id: str, scheduled_event_id: int, kind: str) -> None:
        with self._db.lock:
            if run_id not in self._db.executions:
                raise KeyError(f"unknown run {run_id}")
            self._db.scheduled[(run_id, scheduled_event_id)] = ScheduledTask(kind)

    def set_status(self, run_id: str, status: str) -> None:
        with self._db.lock:
            execution = self._db.executions[run_id]
            self._db.executions[run_id] = dataclasses.replace(execution, status=status)

    def version_directive(self, run_id: str) -> JSON:
        with self._db.lock:
            return version_directive(self._db.executions.get(run_id))

    def record_task_started(self, run_id: str, scheduled_event_id: int) -> StartOutcome:
        with self._db.lock:
            execution = self._db.executions.get(run_id)
            task = self._db.scheduled.get((run_id, scheduled_event_id))
            if execution is None or execution.status != "running" or task is None:
                return StartOutcome.OBSOLETE
            if task.started_at is not None:
                return StartOutcome.ALREADY_STARTED
            task.started_at = datetime.now(UTC).strftime(TIMESTAMP_FORMAT)
            return StartOutcome.STARTED

    def record_tasks_started(self, identities: Sequence[tuple[str, int]]) -> list[StartOutcome]:
        with self._db.lock:  # one atomic step, answers as if asked one by one
            return [self.record_task_started(run_id, event) for run_id, event in identities]


class MemoryStore:
    """A Store over a MemoryDatabase; several stores may share one database."""

    def __init__(self, db: MemoryDatabase | None = None) -> None:
        self.db = db if db is not None else MemoryDatabase()
        self.history = MemoryHistory(self.db)

    def check_protocol(self) -> None:
        low, high = self.db.protocol
        if not low <= PROTOCOL <= high:
            raise ProtocolMismatch(PROTOCOL, low, high)

    def load_queue(self, queue: PhysicalQueue) -> QueueState:
        with self.db.lock:
            self.check_protocol()
            record = self.db.queues.get(queue.key)
            if record is None:
                record = self.db.queues[queue.key] = QueueRecord(1, 0, 0)
            else:
                record.range_id += 1
            return QueueState(record.range_id, record.ack_level, record.last_task_id)

    def _owned(self, queue: PhysicalQueue, range_id: int) -> QueueRecord:
        record = self.db.queues.get(queue.key)
        if record is None or record.range_id != range_id:
            raise StaleRangeError(queue.key, range_id, record.range_id if record else None)
        return record

    def append(self, queue: PhysicalQueue, range_id: int, payloads: Sequence[JSON]) -> list[int]:
        copies = [copy.deepcopy(require_json_object(p)) for p in payloads]
        with self.db.lock:
            record = self._owned(queue, range_id)
            first = record.last_task_id + 1
            ids = list(range(first, first + len(copies)))
            record.tasks.update(zip(ids, copies, strict=True))
            record.last_task_id += len(copies)
            return ids

    def read(self, queue: PhysicalQueue, above: int, limit: int) -> list[Task]:
        with self.db.lock:
            record = self.db.queues.get(queue.key)
            if record is None:
                return []
            ids = sorted(t for t in record.tasks if t > above)[:limit]
            return [Task(t, copy.deepcopy(record.tasks[t])) for t in ids]

    def checkpoint(self, queue: PhysicalQueue, range_id: int, ack_level: int) -> None:
        with self.db.lock:
            record = self._owned(queue, range_id)
            if not record.ack_level <= ack_level <= record.last_task_id:
                raise ValueError(
                    f"ack level {ack_level} outside [{record.ack_level}, {record.last_task_id}]"
                )
            record.ack_level = ack_level
            for task_id in [t for t in record.tasks if t <= ack_level]:
                del record.tasks[task_id]

    def queue_state(self, queue: PhysicalQueue) -> QueueState | None:
        with self.db.lock:
            record = self.db.queues.get(queue.key)
            if record is None:
                return None
            return QueueState(record.range_id, record.ack_level, record.last_task_id)

    def task_ids(self, queue: PhysicalQueue) -> list[int]:
        with self.db.lock:
            record = self.db.queues.get(queue.key)
            return sorted(record.tasks) if record else []

    def get_user_data(self, namespace: str, task_queue: str) -> UserData:
        with self.db.lock:
            found = self.db.user_data.get((namespace, task_queue))
            if found is None:
                return UserData(0, None)
            return UserData(found[0], copy.deepcopy(found[1]))

    def put_user_data(
        self, namespace: str, task_queue: str, expected_version: int, data: JSON
    ) -> int:
        with self.db.lock:
            current = self.db.user_data.get((namespace, task_queue), (0, {}))[0]
            if current != expected_version:
                raise UserDataConflict(namespace, task_queue, expected_version, current)
            self.db.user_data[(namespace, task_queue)] = (current + 1, copy.deepcopy(data))
            return current + 1

    def close(self) -> None:
        """Nothing to release: the database outlives its handles."""
