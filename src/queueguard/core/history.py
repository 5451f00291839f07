"""History helpers shared by both stores: task payloads and fault injection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from queueguard.core.store import (
    JSON,
    CompletionOutcome,
    Execution,
    ExpiredStart,
    History,
    Start,
    StartOutcome,
)


def task_payload(
    namespace: str,
    workflow_id: str,
    run_id: str,
    kind: str,
    scheduled_event_id: int,
    attempt: int = 1,
    enqueued_at: str | None = None,
) -> JSON:
    """A task's `data`, in the shape it has had since 001."""
    return {
        "task": {
            "namespace": namespace,
            "workflowId": workflow_id,
            "runId": run_id,
            "kind": kind,
            "scheduledEventId": scheduled_event_id,
            "attempt": attempt,
        },
        "enqueuedAt": enqueued_at or datetime.now(UTC).isoformat(),
    }


#: The directive of a task whose run History does not know (History answers it obsolete).
UNVERSIONED: JSON = {"behavior": "unversioned", "deploymentVersion": None}


def version_directive(execution: Execution | None) -> JSON:
    """The version directive a task of `execution` carries from 004 on (offline 004, the
    online rollout and History at dispatch all use this form)."""
    if execution is None:
        return dict(UNVERSIONED)
    return {
        "behavior": execution.versioning_behavior,
        "deploymentVersion": execution.deployment_version,
    }


def directive_of(data: JSON) -> JSON | None:
    """The directive a payload carries (`task.versionDirective`), or None."""
    task: Any = data.get("task") if isinstance(data, dict) else None
    found = task.get("versionDirective") if isinstance(task, dict) else None
    return found if isinstance(found, dict) else None


def task_identity(data: JSON) -> tuple[str, int]:
    """(runId, scheduledEventId) of a payload; malformed payloads map to an obsolete start."""
    task: Any = data.get("task") if isinstance(data, dict) else None
    if not isinstance(task, dict):
        return ("", -1)
    run_id = task.get("runId")
    event = task.get("scheduledEventId")
    return (run_id if isinstance(run_id, str) else "", event if isinstance(event, int) else -1)


class HistoryWrapper:
    """A History that passes every call to `inner`; subclasses override what they change.
    The outcome-only calls go through `start_tasks`, so overriding it covers them too."""

    def __init__(self, inner: History) -> None:
        self.inner = inner

    @property
    def start_timeout(self) -> float | None:
        return self.inner.start_timeout

    def add_execution(self, execution: Execution) -> None:
        self.inner.add_execution(execution)

    def schedule_task(self, run_id: str, scheduled_event_id: int, kind: str) -> None:
        self.inner.schedule_task(run_id, scheduled_event_id, kind)

    def set_status(self, run_id: str, status: str) -> None:
        self.inner.set_status(run_id, status)

    def version_directive(self, run_id: str) -> JSON:
        return self.inner.version_directive(run_id)

    def start_tasks(self, identities: Sequence[tuple[str, int]]) -> list[Start]:
        return self.inner.start_tasks(identities)

    def record_task_started(self, run_id: str, scheduled_event_id: int) -> StartOutcome:
        return self.start_tasks([(run_id, scheduled_event_id)])[0].outcome

    def record_tasks_started(self, identities: Sequence[tuple[str, int]]) -> list[StartOutcome]:
        return [start.outcome for start in self.start_tasks(identities)]

    def record_task_completed(
        self, run_id: str, scheduled_event_id: int, started_at: datetime | None
    ) -> CompletionOutcome:
        return self.inner.record_task_completed(run_id, scheduled_event_id, started_at)

    def expired_starts(self, limit: int) -> list[ExpiredStart]:
        return self.inner.expired_starts(limit)

    def reschedule_expired(self, start: ExpiredStart) -> bool:
        return self.inner.reschedule_expired(start)


class FaultyHistory(HistoryWrapper):
    """Wraps a History and answers RETRYABLE when `should_fail` says so (tests, chaos)."""

    def __init__(
        self, inner: History, should_fail: Callable[[str, int], bool] | None = None
    ) -> None:
        super().__init__(inner)
        self._should_fail = should_fail
        self._fail_next = 0
        self._lock = threading.Lock()

    def fail_next(self, n: int) -> None:
        """The next `n` RecordTaskStarted calls fail retryably."""
        with self._lock:
            self._fail_next = n

    def _fails(self, run_id: str, scheduled_event_id: int) -> bool:
        with self._lock:
            if self._fail_next > 0:
                self._fail_next -= 1
                return True
        return self._should_fail is not None and self._should_fail(run_id, scheduled_event_id)

    def start_tasks(self, identities: Sequence[tuple[str, int]]) -> list[Start]:
        """Faults are decided per item, in order; the rest go to History in one call."""
        failed = [self._fails(run_id, event) for run_id, event in identities]
        passed = [i for i, f in zip(identities, failed, strict=True) if not f]
        answers = iter(self.inner.start_tasks(passed) if passed else [])
        return [Start(StartOutcome.RETRYABLE) if f else next(answers) for f in failed]


def dedupe_starts(
    identities: Sequence[tuple[str, int]],
    record: Callable[[list[tuple[str, int]]], list[Start]],
) -> list[Start]:
    """Ask `record` once per distinct identity and answer repeats as a one-by-one History
    would: already-started after a start (or an already-started), obsolete after obsolete."""
    first: dict[tuple[str, int], int] = {}
    for identity in identities:
        first.setdefault(identity, len(first))
    answers = record(list(first)) if first else []
    out: list[Start] = []
    seen: set[tuple[str, int]] = set()
    for identity in identities:
        answer = answers[first[identity]]
        if identity in seen and answer.outcome is StartOutcome.STARTED:
            answer = Start(StartOutcome.ALREADY_STARTED)
        seen.add(identity)
        out.append(answer)
    return out


def redispatch_payload(start: ExpiredStart) -> JSON:
    """The task an expired start is dispatched again as: the payload shape since 001 with the
    run's directive. `attempt` is 2 for every retry: History keeps no attempt count (that
    would be a column); the start's own identity is its `started_at`."""
    data = task_payload(
        start.namespace,
        start.workflow_id,
        start.run_id,
        start.kind,
        start.scheduled_event_id,
        attempt=2,
    )
    data["task"]["versionDirective"] = dict(start.directive)
    return data
