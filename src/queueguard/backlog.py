"""The backlog manager of one loaded physical queue (Temporal's physicalTaskQueueManager).

load → spool → read → dispatch → checkpoint → unload. Durable state lives in the store;
readLevel, out-of-order acks and the generation are process-local and vanish on unload.
A stale range is never retried: the manager unloads and the error reaches the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from queueguard.acks import AckTracker
from queueguard.errors import QueueUnloaded, StaleRangeError
from queueguard.history import task_identity
from queueguard.keys import PhysicalQueue
from queueguard.store import JSON, History, QueueState, StartOutcome, Store, Task


@dataclass(frozen=True)
class Progress:
    """`loadedQueueProgress`: what only the loaded manager knows."""

    generation: int
    range_id: int
    read_level: int
    ack_level: int
    outstanding: int
    done_above_gap: list[int]

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BacklogManager:
    """Owns one physical queue while loaded."""

    def __init__(
        self,
        store: Store,
        queue: PhysicalQueue,
        history: History,
        *,
        generation: int = 1,
        read_batch: int = 1000,
        checkpoint_every: int = 1,
        on_unload: Callable[[BacklogManager], None] | None = None,
    ) -> None:
        self.store, self.queue, self.history = store, queue, history
        self.generation = generation
        self.read_batch = read_batch
        self.checkpoint_every = checkpoint_every
        self._on_unload = on_unload
        self.range_id = 0
        self.loaded = False
        self._tracker = AckTracker()
        self._buffer: dict[int, Task] = {}
        self._saved_ack = 0
        self._acks_since_checkpoint = 0

    # lifecycle -----------------------------------------------------------------------
    def load(self) -> QueueState:
        """Take ownership (range + 1, or 1 for a new queue) and resume above the ack level."""
        state = self.store.load_queue(self.queue)
        self.range_id = state.range_id
        self._tracker = AckTracker(ack_level=state.ack_level)
        self._saved_ack = state.ack_level
        self._buffer.clear()
        self.loaded = True
        return state

    def unload(self) -> None:
        """Forget process state; durable metadata and rows stay."""
        if not self.loaded:
            return
        self.loaded = False
        self._buffer.clear()
        if self._on_unload is not None:
            self._on_unload(self)

    def _require_loaded(self) -> None:
        if not self.loaded:
            raise QueueUnloaded(f"queue {self.queue.key} is not loaded")

    def _fenced(self, exc: StaleRangeError) -> StaleRangeError:
        self.unload()
        return exc

    # spool ---------------------------------------------------------------------------
    def spool(self, data: JSON) -> int:
        """Persist one task (one range-checked transaction); returns its id."""
        return self.spool_many([data])[0]

    def spool_many(self, payloads: Sequence[JSON]) -> list[int]:
        """Persist several tasks in one range-checked transaction."""
        self._require_loaded()
        try:
            return self.store.append(self.queue, self.range_id, payloads)
        except StaleRangeError as exc:
            raise self._fenced(exc) from None

    # read and dispatch -----------------------------------------------------------------
    def read(self) -> list[Task]:
        """Read the next stored tasks above readLevel, in id order."""
        self._require_loaded()
        tasks = self.store.read(self.queue, self._tracker.read_level, self.read_batch)
        for task in tasks:
            self._tracker.read(task.task_id)
            self._buffer[task.task_id] = task
        return tasks

    def pending(self) -> list[int]:
        """Read tasks not yet handled, in id order."""
        return self._tracker.pending()

    def task(self, task_id: int) -> Task:
        return self._buffer[task_id]

    def dispatch(self, task_id: int) -> StartOutcome:
        """Ask History to record the start; any outcome but retryable acknowledges."""
        self._require_loaded()
        task = self._buffer[task_id]
        outcome = self.history.record_task_started(*task_identity(task.data))
        if outcome.acks:
            self.ack(task_id)
        return outcome

    def ack(self, task_id: int) -> int:
        """Mark a delivery handled; checkpoint when the ack level moved (per policy)."""
        self._require_loaded()
        level = self._tracker.complete(task_id)
        self._buffer.pop(task_id, None)
        self._acks_since_checkpoint += 1
        if level > self._saved_ack and self._acks_since_checkpoint >= self.checkpoint_every:
            self.checkpoint()
        return level

    def checkpoint(self) -> None:
        """Save the ack level and delete rows <= it, range-checked, in one transaction."""
        self._require_loaded()
        level = self._tracker.ack_level
        if level == self._saved_ack:
            return
        try:
            self.store.checkpoint(self.queue, self.range_id, level)
        except StaleRangeError as exc:
            raise self._fenced(exc) from None
        self._saved_ack = level
        self._acks_since_checkpoint = 0

    # inspection ----------------------------------------------------------------------
    def progress(self) -> Progress:
        return Progress(
            generation=self.generation,
            range_id=self.range_id,
            read_level=self._tracker.read_level,
            ack_level=self._tracker.ack_level,
            outstanding=self._tracker.outstanding,
            done_above_gap=self._tracker.done_above_gap(),
        )
