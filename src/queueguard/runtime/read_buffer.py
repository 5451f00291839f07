"""The loaded manager's read buffer and claim queue (`runtime.backlog`): the tasks read and
not yet acknowledged, which of them wait to be claimed, and which are being dispatched. Apart
from `BacklogManager` so that the bookkeeping of one task's way from read to acknowledged
reads in one place, away from the store calls and the checkpoints. Process state only: it
vanishes on unload, and it is not thread-safe (the manager's `_lock` guards every call).
"""

from __future__ import annotations

from collections import deque

from queueguard.core.store import Task


class ReadBuffer:
    def __init__(self) -> None:
        self.tasks: dict[int, Task] = {}  # read, not yet acknowledged
        self.ready: deque[int] = deque()  # read, unclaimed (acked ids are dropped lazily)
        self.queued: set[int] = set()  # the ids in ready
        self.in_flight: set[int] = set()  # claimed: History is being asked

    def clear(self) -> None:
        self.tasks.clear()
        self.ready.clear()
        self.queued.clear()
        self.in_flight.clear()

    def add(self, task: Task) -> None:
        """A task just read: buffered and waiting for a claim."""
        self.tasks[task.task_id] = task
        self.ready.append(task.task_id)
        self.queued.add(task.task_id)

    def next_ready(self) -> int:
        """The lowest id waiting for a claim, taken off the queue (`ready` is not empty)."""
        task_id = self.ready.popleft()
        self.queued.discard(task_id)
        return task_id

    def requeue(self, task_id: int) -> None:
        """Back to the front of the queue (no-op when it is already waiting)."""
        if task_id not in self.queued:
            self.ready.appendleft(task_id)
            self.queued.add(task_id)
