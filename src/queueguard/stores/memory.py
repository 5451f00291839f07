"""The memory store: a product feature with the same contract as PostgreSQL.

A `MemoryDatabase` holds the state; every `MemoryStore` is an independent handle on it (the
analogue of an independent connection pool), so fencing is checked across handles.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from queueguard.core.history import version_directive
from queueguard.core.keys import PhysicalQueue
from queueguard.core.protocol import PROTOCOL
from queueguard.core.store import (
    DEFAULT_START_TIMEOUT,
    JSON,
    CompletionOutcome,
    Execution,
    ExpiredStart,
    QueueState,
    Start,
    StartOutcome,
    Task,
    UserData,
    require_json_object,
    validate_start_timeout,
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


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _instant(started_at: str) -> datetime:
    """A stored `started_at` (TIMESTAMP_FORMAT, or an imported ISO 8601 instant)."""
    found = datetime.fromisoformat(started_at)
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


class MemoryHistory:
    """History over a MemoryDatabase. `clock` (aware datetimes, UTC by default) stamps starts
    and judges the start timeout: tests inject one instead of sleeping."""

    def __init__(
        self,
        db: MemoryDatabase,
        *,
        start_timeout: float | None = DEFAULT_START_TIMEOUT,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._db = db
        self._start_timeout = validate_start_timeout(start_timeout)
        self._clock = clock

    @property
    def start_timeout(self) -> float | None:
        return self._start_timeout

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

    def _expired(self, started_at: str, now: datetime) -> bool:
        timeout = self._start_timeout
        return timeout is not None and _instant(started_at) <= now - timedelta(seconds=timeout)

    def _running_task(self, run_id: str, scheduled_event_id: int) -> ScheduledTask | None:
        execution = self._db.executions.get(run_id)
        if execution is None or execution.status != "running":
            return None
        return self._db.scheduled.get((run_id, scheduled_event_id))

    def _start(self, run_id: str, scheduled_event_id: int) -> Start:
        task = self._running_task(run_id, scheduled_event_id)
        if task is None:
            return Start(StartOutcome.OBSOLETE)
        now = self._clock()
        if task.started_at is not None and not self._expired(task.started_at, now):
            return Start(StartOutcome.ALREADY_STARTED)
        task.started_at = now.astimezone(UTC).strftime(TIMESTAMP_FORMAT)
        return Start(StartOutcome.STARTED, _instant(task.started_at))

    def start_tasks(self, identities: Sequence[tuple[str, int]]) -> list[Start]:
        with self._db.lock:  # one atomic step, answers as if asked one by one
            return [self._start(run_id, event) for run_id, event in identities]

    def record_task_started(self, run_id: str, scheduled_event_id: int) -> StartOutcome:
        return self.start_tasks([(run_id, scheduled_event_id)])[0].outcome

    def record_tasks_started(self, identities: Sequence[tuple[str, int]]) -> list[StartOutcome]:
        return [start.outcome for start in self.start_tasks(identities)]

    def record_task_completed(
        self, run_id: str, scheduled_event_id: int, started_at: datetime | None
    ) -> CompletionOutcome:
        with self._db.lock:
            task = self._running_task(run_id, scheduled_event_id)
            if (
                task is None
                or task.started_at is None
                or started_at is None
                or _instant(task.started_at) != started_at
            ):
                return CompletionOutcome.OBSOLETE
            del self._db.scheduled[(run_id, scheduled_event_id)]
            return CompletionOutcome.COMPLETED

    def expired_starts(self, limit: int) -> list[ExpiredStart]:
        with self._db.lock:
            now = self._clock()
            found = []
            for (run_id, event), task in self._db.scheduled.items():
                execution = self._db.executions[run_id]
                if task.started_at is None or execution.status != "running":
                    continue
                if self._expired(task.started_at, now):
                    found.append(
                        ExpiredStart(
                            run_id,
                            event,
                            task.kind,
                            execution.namespace,
                            execution.workflow_id,
                            _instant(task.started_at),
                            version_directive(execution),
                        )
                    )
            found.sort(key=lambda s: (s.started_at, s.run_id, s.scheduled_event_id))
            return found[: max(limit, 0)]

    def reschedule_expired(self, start: ExpiredStart) -> bool:
        with self._db.lock:
            task = self._running_task(start.run_id, start.scheduled_event_id)
            if task is None or task.started_at is None:
                return False
            if _instant(task.started_at) != start.started_at:
                return False
            if not self._expired(task.started_at, self._clock()):
                return False
            task.started_at = None
            return True


class MemoryStore:
    """A Store over a MemoryDatabase; several stores may share one database."""

    def __init__(
        self,
        db: MemoryDatabase | None = None,
        *,
        start_timeout: float | None = DEFAULT_START_TIMEOUT,
        history_clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        """`start_timeout`: History's (seconds, None for none); `history_clock`: what History
        stamps starts with and judges their age by (tests inject one)."""
        self.db = db if db is not None else MemoryDatabase()
        self.history = MemoryHistory(self.db, start_timeout=start_timeout, clock=history_clock)

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
