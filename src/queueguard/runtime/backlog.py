"""The backlog manager of one loaded physical queue (Temporal's physicalTaskQueueManager).

load → spool → read → dispatch → checkpoint → unload. Durable state lives in the store;
readLevel, out-of-order acks and the generation are process-local and vanish on unload.
A stale range is never retried: the manager unloads and the error reaches the caller.

Two modes, one set of guarantees (docs/data-model.md "Lifecycle of one queue"):

- one by one (the default, and what `queueguard demo` shows): each spool
  is its own range-checked transaction and every ack that moves the ack level checkpoints;
- batched: `spool_batch > 1` groups concurrent arrivals into one range-checked append
  (group commit, `Spooler`), `checkpoint_every=N` / `checkpoint_interval=s` save the ack level
  after N acks or s seconds (still one range-checked transaction that saves the level and
  deletes the prefix), and `unload()` flushes the handled prefix first.

Batching changes how many transactions carry the work, never what they check: a batch is
one transaction, so a stale owner's batch fails whole and nothing of it becomes visible.
Unsaved acks are process state: after a crash the next owner re-reads them and History
rejects the repeated start (at-least-once, as in one-by-one mode).

Threads: several pollers may dispatch from one manager at once. `_lock` guards the process
state (tracker, read buffer, claim queue) and is never held across History calls; checkpoints
are serialised by `_checkpoint_lock`, so the saved level only moves forward.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from queueguard.core.acks import AckTracker
from queueguard.core.history import task_identity
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import JSON, History, QueueState, Start, StartOutcome, Store, Task
from queueguard.errors import ConnectionFailed, QueueUnloaded, StaleRangeError
from queueguard.runtime.read_buffer import ReadBuffer
from queueguard.runtime.spooler import Spooler

log = logging.getLogger(__name__)


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
        checkpoint_interval: float | None = None,
        spool_batch: int = 1,
        spool_linger: float = 0.0,
        on_unload: Callable[[BacklogManager], None] | None = None,
        on_fenced: Callable[[PhysicalQueue, StaleRangeError], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if read_batch < 1 or checkpoint_every < 1:
            raise ValueError("read_batch and checkpoint_every must be >= 1")
        if checkpoint_interval is not None and checkpoint_interval <= 0:
            raise ValueError("checkpoint_interval must be > 0 seconds (or None)")
        self.store, self.queue, self.history = store, queue, history
        self.generation = generation
        self.read_batch = read_batch
        self.checkpoint_every = checkpoint_every
        self.checkpoint_interval = checkpoint_interval
        self._on_unload = on_unload
        # Told of every fenced write, raised or not (a checkpoint after an ack is not raised).
        self._on_fenced = on_fenced
        self._clock = clock
        self.range_id = 0
        self.loaded = False
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        # One append per queue in flight from this process: they serialise on the queue's
        # row lock anyway, and queueing here is cheaper than a pile of waiting backends.
        self._append_lock = threading.Lock()
        self._tracker = AckTracker()
        self._buffer = ReadBuffer()
        self._saved_ack = 0
        self._acks_since_checkpoint = 0
        self._last_checkpoint = clock()
        self._fence: StaleRangeError | None = None  # why the last owner period ended
        # Highest id this owner knows is stored: last_task_id at load, then its own appends
        # (the owner is the queue's only writer; a stale one cannot append). A claim reads
        # only when it lies above readLevel, so an idle poll costs no round trip. None: not
        # the only writer (loaded while an online rollout is in progress, where the migrator
        # appends relocated rows): every claim reads.
        self._known_last: int | None = 0
        self.spooler = Spooler(self._append, spool_batch, spool_linger) if spool_batch > 1 else None

    # lifecycle -----------------------------------------------------------------------
    def load(self) -> QueueState:
        """Take ownership (range + 1, or 1 for a new queue) and resume above the ack level."""
        with self._checkpoint_lock, self._lock:
            state = self.store.load_queue(self.queue)
            self.range_id = state.range_id
            self._tracker = AckTracker(ack_level=state.ack_level)
            self._saved_ack = state.ack_level
            self._acks_since_checkpoint = 0
            self._last_checkpoint = self._clock()
            self._fence = None
            self._known_last = None if state.shared else state.last_task_id
            self._buffer.clear()
            self.loaded = True
        return state

    def unload(self) -> None:
        """Flush the handled prefix (if unsaved), then forget process state; durable
        metadata and rows stay. A flush that finds the queue taken over is dropped: the new
        owner re-reads those tasks and History rejects the repeated starts."""
        if not self.loaded:
            return
        try:
            self.checkpoint()
        except (StaleRangeError, QueueUnloaded):
            pass  # fenced: checkpoint() already dropped the process state
        finally:
            self._drop()

    def _drop(self) -> None:
        with self._lock:
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
        self._fence = exc
        if self._on_fenced is not None:
            self._on_fenced(self.queue, exc)
        self._drop()  # a stale owner never flushes: the queue is not ours any more
        return exc

    # spool ---------------------------------------------------------------------------
    def spool(self, data: JSON) -> int:
        """Persist one task (one range-checked transaction, or a share of one when
        batching); returns its id."""
        return self.spool_many([data])[0]

    def spool_many(self, payloads: Sequence[JSON]) -> list[int]:
        """Persist several tasks in one range-checked transaction (shared with concurrent
        arrivals when batching; never split)."""
        self._require_loaded()
        if self.spooler is not None:
            return self.spooler.submit(payloads)
        with self._append_lock:
            return self._append(list(payloads))

    def _append(self, payloads: list[JSON]) -> list[int]:
        fence = self._fence
        if not self.loaded and fence is not None:  # queued behind a batch that was fenced
            raise StaleRangeError(fence.queue, fence.held, fence.current)
        self._require_loaded()
        # The highest id this owner has seen stored, taken before the append (a concurrent
        # read may see the new rows before this call returns).
        seen = max(self._tracker.read_level, self._known_last or 0)
        try:
            ids = self.store.append(self.queue, self.range_id, payloads)
        except StaleRangeError as exc:
            raise self._fenced(exc) from None
        if ids and ids[0] <= seen:
            # Ids this owner has seen stored were handed out again: the database lost commits
            # it had acknowledged (a failover to a replica that lacked them). The process
            # state is ahead of the database and would skip these rows, then checkpoint over
            # them: drop it without a checkpoint; the next call reloads above the saved ack.
            log.warning(
                "queue %s: the database lost appends (ids reused): reloading", self.queue.key
            )
            self._drop()
            return ids
        if ids and self._known_last is not None and ids[-1] > self._known_last:
            # appends are serialised (lock or spooler)
            self._known_last = ids[-1]
        return ids

    # read and dispatch -----------------------------------------------------------------
    def read(self) -> list[Task]:
        """Read the next page (`read_batch`) of stored tasks above readLevel, in id order."""
        with self._lock:
            self._require_loaded()
            tasks = self.store.read(self.queue, self._tracker.read_level, self.read_batch)
            for task in tasks:
                self._tracker.read(task.task_id)
                self._buffer.add(task)
            return tasks

    def pending(self) -> list[int]:
        """Read tasks not yet handled, in id order."""
        with self._lock:
            return self._tracker.pending()

    def task(self, task_id: int) -> Task:
        with self._lock:
            return self._buffer.tasks[task_id]

    def claim(self, limit: int) -> list[Task]:
        """Take up to `limit` read, unhandled tasks nobody is dispatching, lowest ids first;
        reads one more page when none is left and this owner stored tasks above readLevel.
        Hand them to `dispatch_claimed`, or `release` the ones to retry later."""
        claimed: list[Task] = []
        with self._lock:
            self._require_loaded()
            has_read = False
            while len(claimed) < limit:
                if not self._buffer.ready:
                    known = self._known_last
                    if has_read or (known is not None and self._tracker.read_level >= known):
                        break
                    if not self.read():
                        break
                    has_read = True
                    continue
                task_id = self._buffer.next_ready()
                if task_id in self._buffer.in_flight or not self._tracker.is_pending(task_id):
                    continue  # being or already dispatched through dispatch(task_id)
                self._buffer.in_flight.add(task_id)
                claimed.append(self._buffer.tasks[task_id])
        return claimed

    def release(self, task_ids: Sequence[int]) -> None:
        """Return claimed tasks (e.g. after a retryable failure) to the front of the queue."""
        with self._lock:
            for task_id in sorted(task_ids, reverse=True):
                self._buffer.in_flight.discard(task_id)
                if self.loaded and self._tracker.is_pending(task_id):
                    self._buffer.requeue(task_id)

    def dispatch(self, task_id: int) -> StartOutcome:
        """Ask History to record the start; any outcome but retryable acknowledges."""
        with self._lock:
            self._require_loaded()
            task = self._buffer.tasks[task_id]
            if task_id in self._buffer.in_flight:
                raise ValueError(f"task {task_id} is already being dispatched")
            self._buffer.in_flight.add(task_id)
        outcome = self.dispatch_claimed([task])[0]
        if not outcome.acks:  # retryable: pending again at once
            self.release([task_id])
        return outcome

    def dispatch_claimed(self, tasks: Sequence[Task]) -> list[StartOutcome]:
        """Record the starts of claimed tasks in one History call (one transaction on
        PostgreSQL; each task gets its own answer, as if asked one by one) and acknowledge
        every answer but retryable. Retryable tasks stay claimed until `release`d."""
        return [start.outcome for start in self.start_claimed(tasks)]

    def start_claimed(self, tasks: Sequence[Task]) -> list[Start]:
        """`dispatch_claimed`, with each start History recorded (what a completion names)."""
        try:
            self._require_loaded()
            starts = self.history.start_tasks([task_identity(t.data) for t in tasks])
        except BaseException:
            self.release([t.task_id for t in tasks])
            raise
        self._acked([t.task_id for t, s in zip(tasks, starts, strict=True) if s.outcome.acks])
        return starts

    def ack(self, task_id: int) -> int:
        """Mark a delivery handled; checkpoint when the ack level moved (per policy)."""
        self._require_loaded()
        return self._acked([task_id])

    def _acked(self, task_ids: Sequence[int]) -> int:
        with self._lock:
            if not self.loaded:  # unloaded meanwhile: its process state is gone
                return self._tracker.ack_level
            for task_id in task_ids:
                self._buffer.in_flight.discard(task_id)
                self._tracker.complete(task_id)
                self._buffer.tasks.pop(task_id, None)
            ready = self._buffer.ready  # drop ids handled by dispatch(task_id) from the front
            while ready and not self._tracker.is_pending(ready[0]):
                self._buffer.next_ready()
            self._acks_since_checkpoint += len(task_ids)
            level = self._tracker.ack_level
            due = self._checkpoint_due()
        if due:
            self._checkpoint_after_ack()
        return level

    def _checkpoint_after_ack(self) -> None:
        """The acks are decided (History recorded the starts): a failed save must not undo
        the deliveries. Fenced: the manager has unloaded and the next owner replays the
        unsaved suffix (History answers already-started). Connection lost: the ack level
        stays in memory and the next checkpoint saves it. The database lost appends (a
        failover): the manager has unloaded, the next owner period replays from the saved
        ack level."""
        try:
            self.checkpoint()
        except (StaleRangeError, ConnectionFailed, QueueUnloaded) as exc:
            log.warning("checkpoint after ack failed, deliveries stand: %s", exc)

    # checkpoint ----------------------------------------------------------------------
    def _checkpoint_due(self) -> bool:
        if self._tracker.ack_level <= self._saved_ack:
            return False
        if self._acks_since_checkpoint >= self.checkpoint_every:
            return True
        interval = self.checkpoint_interval
        return interval is not None and self._clock() - self._last_checkpoint >= interval

    def checkpoint(self) -> None:
        """Save the ack level and delete rows <= it, range-checked, in one transaction
        (whatever the policy: this is also the flush)."""
        with self._checkpoint_lock:
            with self._lock:
                self._require_loaded()
                level, counted = self._tracker.ack_level, self._acks_since_checkpoint
                range_id = self.range_id
                if level <= self._saved_ack:
                    return
            try:
                self.store.checkpoint(self.queue, range_id, level)
            except StaleRangeError as exc:
                raise self._fenced(exc) from None
            except ValueError as exc:
                # The range is ours but the ack level lies outside the stored rows: the
                # database lost appends this owner had seen (see _append). Reload.
                log.warning(
                    "queue %s: %s: the database lost appends: reloading", self.queue.key, exc
                )
                self._drop()
                raise QueueUnloaded(
                    f"queue {self.queue.key}: {exc} (the database lost acknowledged appends); "
                    "its process state was dropped, the next call reloads it"
                ) from None
            with self._lock:
                self._saved_ack = level
                self._acks_since_checkpoint = max(0, self._acks_since_checkpoint - counted)
                self._last_checkpoint = self._clock()

    def flush(self) -> None:
        """Save the handled prefix now, whatever the policy."""
        self.checkpoint()

    def tick(self) -> None:
        """Checkpoint if `checkpoint_interval` has passed with an unsaved ack level (called by
        Matching's flusher, so a quiet queue still saves its progress)."""
        with self._lock:
            interval = self.checkpoint_interval
            due = (
                self.loaded
                and interval is not None
                and self._tracker.ack_level > self._saved_ack
                and self._clock() - self._last_checkpoint >= interval
            )
        if due:
            self.checkpoint()

    # inspection ----------------------------------------------------------------------
    @property
    def saved_ack_level(self) -> int:
        return self._saved_ack

    def progress(self) -> Progress:
        with self._lock:
            return Progress(
                generation=self.generation,
                range_id=self.range_id,
                read_level=self._tracker.read_level,
                ack_level=self._tracker.ack_level,
                outstanding=self._tracker.outstanding,
                done_above_gap=self._tracker.done_above_gap(),
            )
