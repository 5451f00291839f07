"""The store contract: what the runtime needs from persistence, implemented twice.

`MemoryStore` and `PostgresStore` implement it; one contract test suite runs against both.
Every write that changes a queue's backlog is range-checked: a stale owner gets
`StaleRangeError` and nothing it tried becomes visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from queueguard.core import jsonb
from queueguard.core.keys import PhysicalQueue

JSON = dict[str, Any]


@dataclass(frozen=True)
class QueueState:
    """Durable metadata of one physical queue (a `task_queues` row)."""

    range_id: int
    ack_level: int
    last_task_id: int
    #: set by a load while an online rollout is in progress (its window, or contract still
    #: moving older hosts' rows): the owner is not the queue's only writer (the migrator
    #: appends relocated rows), so it must not trust its counter
    shared: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Task:
    """One spooled task row."""

    task_id: int
    data: JSON


@dataclass(frozen=True)
class UserData:
    """Per-family configuration; version 0 means absent."""

    version: int
    data: JSON | None


class StartOutcome(Enum):
    """History's answer to RecordTaskStarted."""

    STARTED = "started"
    ALREADY_STARTED = "already-started"
    OBSOLETE = "obsolete"
    RETRYABLE = "retryable"

    @property
    def acks(self) -> bool:
        """Every outcome but a retryable failure lets Matching acknowledge the delivery."""
        return self is not StartOutcome.RETRYABLE


@dataclass(frozen=True)
class Start:
    """History's answer to one RecordTaskStarted, with the start it recorded."""

    outcome: StartOutcome
    #: STARTED only: when History recorded this start (its `started_at`), which is also the
    #: start's identity (Temporal's started id): a completion names it, and a later start of
    #: the same task (after the start timeout) has another one
    started_at: datetime | None = None


class CompletionOutcome(Enum):
    """History's answer to RecordTaskCompleted."""

    COMPLETED = "completed"
    #: the start it names is not the task's current start (it timed out and the task was
    #: dispatched again, or the task completed already), or the run is gone or not running
    OBSOLETE = "obsolete"


#: History's default start timeout in seconds (Temporal's default workflow task timeout): a
#: start older than this without a completion may be dispatched again.
DEFAULT_START_TIMEOUT = 10.0


@dataclass(frozen=True)
class ExpiredStart:
    """A start older than History's start timeout, not completed: what a start timer
    dispatches again (`runtime.timer`)."""

    run_id: str
    scheduled_event_id: int
    kind: str
    namespace: str
    workflow_id: str
    started_at: datetime
    directive: JSON  # the run's version directive, as tasks carry it


def validate_start_timeout(timeout: float | None) -> float | None:
    """A start timeout is a positive number of seconds, or None (no timeout)."""
    if timeout is not None and not timeout > 0:  # also refuses NaN
        raise ValueError(f"start_timeout must be > 0 seconds (or None), got {timeout!r}")
    return timeout


@dataclass(frozen=True)
class Execution:
    run_id: str
    namespace: str
    workflow_id: str
    status: str = "running"
    versioning_behavior: str = "unversioned"
    deployment_version: str | None = None

    def as_record(self) -> JSON:
        """This execution as a snapshot document's `history.executions` record."""
        return {key: getattr(self, name) for name, key in EXECUTION_KEYS}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Execution:
        """A validated `history.executions` record; a key it lacks takes the field's default
        (a missing deploymentVersion is null)."""
        return cls(**{name: record[key] for name, key in EXECUTION_KEYS if key in record})

    def as_row(self) -> tuple[Any, ...]:
        """The values of the `executions` table's columns, in their order."""
        return tuple(getattr(self, name) for name, _ in EXECUTION_KEYS)


#: Each `Execution` field and its key in snapshot documents, in field order, which is also
#: the column order of the `executions` table. The one place the two spellings meet: the
#: memory snapshot, the database export/import (`upgrade.state`) and the fuzz benchmark
#: convert through `Execution.as_record` / `Execution.from_record`.
EXECUTION_KEYS: tuple[tuple[str, str], ...] = (
    ("run_id", "runId"),
    ("namespace", "namespace"),
    ("workflow_id", "workflowId"),
    ("status", "status"),
    ("versioning_behavior", "versioningBehavior"),
    ("deployment_version", "deploymentVersion"),
)


class History(Protocol):
    """Minimal History: executions, scheduled tasks, RecordTaskStarted, RecordTaskCompleted
    and the start timeout.

    A scheduled task is pending until a completion names its current start; then History
    forgets it (its row is deleted, as Temporal drops a completed activity from the pending
    ones), so a later start or completion of it is obsolete. A start older than
    `start_timeout` without a completion is over: the task may be started again (a new
    start with a new `started_at`), and `expired_starts` / `reschedule_expired` let a start
    timer dispatch it again (`runtime.timer`). `start_timeout` None: no timeout, a start is
    final (for workers that never report completions).
    """

    @property
    def start_timeout(self) -> float | None:
        """Seconds after which a start without a completion expires (None: never)."""

    def add_execution(self, execution: Execution) -> None: ...

    def schedule_task(self, run_id: str, scheduled_event_id: int, kind: str) -> None: ...

    def set_status(self, run_id: str, status: str) -> None: ...

    def record_task_started(self, run_id: str, scheduled_event_id: int) -> StartOutcome: ...

    def version_directive(self, run_id: str) -> JSON:
        """The run's version directive in the form tasks carry (`core.history`); unversioned
        for a run History does not know."""

    def record_tasks_started(self, identities: Sequence[tuple[str, int]]) -> list[StartOutcome]:
        """RecordTaskStarted for several (runId, scheduledEventId) at once: one answer per
        item, in order, exactly as if asked one by one in that order (a repeated identity
        answers already-started after a start)."""

    def start_tasks(self, identities: Sequence[tuple[str, int]]) -> list[Start]:
        """`record_tasks_started` with each STARTED answer's `started_at` (what a completion
        names); Matching dispatches through this one."""

    def record_task_completed(
        self, run_id: str, scheduled_event_id: int, started_at: datetime | None
    ) -> CompletionOutcome:
        """Completed (History forgets the task) if `started_at` is the task's current start
        and the run is running; otherwise obsolete, and nothing changes."""

    def expired_starts(self, limit: int) -> list[ExpiredStart]:
        """Up to `limit` starts of running runs older than the start timeout, oldest first
        (none without a timeout); reads only."""

    def reschedule_expired(self, start: ExpiredStart) -> bool:
        """End an expired start: the task is scheduled again (not started), unless it was
        started again or completed meanwhile (then False, nothing changes). Call it after
        the task was dispatched again, so a crash in between leaves it expired (dispatched
        again by the next tick) rather than pending with no task in any queue."""


class Store(Protocol):
    """Persistence of queues, tasks and user data (plus its History)."""

    @property
    def history(self) -> History:
        """The History sharing this store's database."""

    def check_protocol(self) -> None:
        """Raise ProtocolMismatch unless the stored protocol range accepts ours."""

    def load_queue(self, queue: PhysicalQueue) -> QueueState:
        """Take ownership: create at range 1 or increment the range, in one transaction
        that also checks the protocol."""

    def append(self, queue: PhysicalQueue, range_id: int, payloads: Sequence[JSON]) -> list[int]:
        """Allocate consecutive ids after last_task_id and insert the tasks, range-checked."""

    def read(self, queue: PhysicalQueue, above: int, limit: int) -> list[Task]:
        """Stored tasks with id > `above`, in id order."""

    def checkpoint(self, queue: PhysicalQueue, range_id: int, ack_level: int) -> None:
        """Save ack_level and delete rows <= it, range-checked, in one transaction."""

    def queue_state(self, queue: PhysicalQueue) -> QueueState | None:
        """The stored metadata, or None; for inspection, takes no ownership."""

    def task_ids(self, queue: PhysicalQueue) -> list[int]:
        """Ids of all stored rows of a queue (inspection)."""

    def get_user_data(self, namespace: str, task_queue: str) -> UserData: ...

    def put_user_data(
        self, namespace: str, task_queue: str, expected_version: int, data: JSON
    ) -> int:
        """Compare-and-swap: store version expected+1 or raise UserDataConflict."""

    def close(self) -> None: ...


def require_json_object(data: object) -> JSON:
    """Task payloads are JSON objects that PostgreSQL's jsonb can hold; anything else is a
    caller bug, rejected alike by both stores before anything is written."""
    if not isinstance(data, dict):
        raise TypeError(f"task data must be a JSON object, got {type(data).__name__}")
    problem = jsonb.first_problem(data, "data")
    if problem is not None:
        where, why = problem
        raise ValueError(f"task {where}: {why}")
    return data
