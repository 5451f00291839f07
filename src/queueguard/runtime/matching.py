"""Matching: the partition manager that owns backlog managers and matches tasks to pollers.

One backlog manager per physical queue (per version and task type): loading or reloading one
never takes another. A task that arrives while a poller waits is sync-matched: History
records the start and the poller gets it with no write to `tasks`.

Every delivery carries the start History recorded (`Delivery.started_at`); the worker reports
its completion with `complete(delivery)`, which History answers obsolete when that start timed
out meanwhile (History's start timeout; `runtime.timer` dispatches such tasks again).

Batching (see `backlog`): `spool_batch`/`spool_linger` group concurrent `add_task` spools
into one append, `checkpoint_every`/`checkpoint_interval` batch checkpoints (a flusher thread
saves a quiet queue's progress every interval; `unload`/`shutdown` flush), and `poll_batch`
records up to N starts in one History call. The defaults are the one-by-one path.
Pollers dispatch concurrently: History is never asked under a lock.
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from queueguard.core.history import directive_of, task_identity
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import JSON, CompletionOutcome, History, StartOutcome, Store
from queueguard.errors import NotOwner, QueueguardError, StaleRangeError
from queueguard.runtime.backlog import BacklogManager
from queueguard.runtime.membership import StaticMembership


@dataclass(frozen=True)
class Delivery:
    """A task handed to a poller after History recorded its start."""

    queue: PhysicalQueue
    task_id: int | None  # None: sync-matched, never stored
    data: JSON
    #: the start History recorded for this delivery (its identity, which `complete` names);
    #: not part of equality: two deliveries of one stored task compare by what they carry
    started_at: datetime | None = field(default=None, compare=False)


@dataclass
class _Waiter:
    event: threading.Event = field(default_factory=threading.Event)
    delivery: Delivery | None = None


@dataclass(frozen=True)
class AddResult:
    sync_matched: bool
    task_id: int | None
    outcome: StartOutcome | None = None


log = logging.getLogger(__name__)


class Matching:
    """A Matching host: loads queues it owns, spools, polls, dispatches, checkpoints."""

    def __init__(
        self,
        store: Store,
        host_id: str = "local",
        membership: StaticMembership | None = None,
        *,
        checkpoint_every: int = 1,
        checkpoint_interval: float | None = None,
        spool_batch: int = 1,
        spool_linger: float = 0.0,
        read_batch: int = 1000,
        history: History | None = None,
        on_fenced: Callable[[PhysicalQueue, StaleRangeError], None] | None = None,
    ) -> None:
        self.store, self.host_id, self.membership = store, host_id, membership
        #: Called whenever a manager of this host is fenced (another owner took the queue),
        #: including fences that are not raised to a caller; hosts log takeovers with it.
        self.on_fenced = on_fenced
        # A History other than the store's (e.g. FaultyHistory) injects faults in tests.
        self.history = history if history is not None else store.history
        self.checkpoint_every = checkpoint_every
        self.checkpoint_interval = checkpoint_interval
        self.spool_batch, self.spool_linger = spool_batch, spool_linger
        self.read_batch = read_batch
        self._managers: dict[PhysicalQueue, BacklogManager] = {}
        self._waiters: dict[PhysicalQueue, deque[_Waiter]] = {}
        self._generation = itertools.count(1)
        self._lock = threading.RLock()
        self._stop_flusher = threading.Event()
        store.check_protocol()  # startup handshake before anything is loaded
        if checkpoint_interval is not None:
            _start_flusher(self, checkpoint_interval)

    # ownership -------------------------------------------------------------------------
    def owns(self, queue: PhysicalQueue) -> bool:
        return self.membership is None or self.membership.owner(queue) == self.host_id

    def manager(self, queue: PhysicalQueue) -> BacklogManager:
        """The loaded manager of `queue`, loading it (range + 1) if needed."""
        with self._lock:
            found = self._managers.get(queue)
            if found is not None and found.loaded:
                return found
            if not self.owns(queue):
                assert self.membership is not None
                raise NotOwner(queue.key, self.membership.owner(queue), self.host_id)
            mgr = BacklogManager(
                self.store,
                queue,
                self.history,
                generation=next(self._generation),
                read_batch=self.read_batch,
                checkpoint_every=self.checkpoint_every,
                checkpoint_interval=self.checkpoint_interval,
                spool_batch=self.spool_batch,
                spool_linger=self.spool_linger,
                on_unload=self._forget,
                on_fenced=self.on_fenced,
            )
            mgr.load()
            self._managers[queue] = mgr
            return mgr

    def _forget(self, mgr: BacklogManager) -> None:
        with self._lock:
            if self._managers.get(mgr.queue) is mgr:
                del self._managers[mgr.queue]

    def loaded(self) -> list[PhysicalQueue]:
        with self._lock:
            return sorted(self._managers)

    def unload(self, queue: PhysicalQueue) -> None:
        with self._lock:
            mgr = self._managers.get(queue)
        if mgr is not None:
            mgr.unload()

    def set_membership(self, membership: StaticMembership) -> list[PhysicalQueue]:
        """Adopt a new host list; unload every queue this host no longer owns."""
        with self._lock:
            self.membership = membership
            lost = [q for q in self._managers if not self.owns(q)]
        errors: list[BaseException] = []
        for queue in lost:
            try:
                self.unload(queue)  # flushes; a failed flush still unloads
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return lost

    def shutdown(self) -> None:
        """Stop the flusher and unload every queue (each flushes its handled prefix)."""
        self._stop_flusher.set()
        errors: list[BaseException] = []
        for queue in self.loaded():
            try:
                self.unload(queue)
            except Exception as exc:  # unload the others all the same
                errors.append(exc)
        if errors:
            raise errors[0]

    def flush(self) -> None:
        """Checkpoint every loaded queue's handled prefix now."""
        with self._lock:
            managers = list(self._managers.values())
        for mgr in managers:
            mgr.checkpoint()

    def _tick(self) -> None:
        with self._lock:
            managers = list(self._managers.values())
        for mgr in managers:
            try:
                mgr.tick()
            except QueueguardError as exc:  # fenced (the manager unloaded) or unloaded
                log.info("interval checkpoint of %s: %s", mgr.queue.key, exc)
            except Exception:  # the database may be away for a while: try next interval
                log.warning("interval checkpoint of %s failed", mgr.queue.key, exc_info=True)

    # tasks ----------------------------------------------------------------------------
    def add_task(self, queue: PhysicalQueue, data: JSON) -> AddResult:
        """Sync-match to a waiting poller when History accepts the start, else spool."""
        waiter = self._take_waiter(queue)
        if waiter is not None:
            try:
                start = self.history.start_tasks([task_identity(data)])[0]
            except BaseException:
                self._return_waiter(queue, waiter)  # a timed-out poller waits for this
                raise
            outcome = start.outcome
            if outcome is StartOutcome.STARTED:
                waiter.delivery = Delivery(queue, None, data, start.started_at)
                waiter.event.set()
                return AddResult(True, None, outcome)
            self._return_waiter(queue, waiter)
            if outcome.acks:  # already started or obsolete: handled, nothing to store
                return AddResult(False, None, outcome)
        task_id = self.manager(queue).spool(data)
        return AddResult(False, task_id)

    def add_tasks(self, queue: PhysicalQueue, payloads: list[JSON]) -> list[int]:
        """Spool a batch in one range-checked transaction (no sync match)."""
        return self.manager(queue).spool_many(payloads)

    def poll(self, queue: PhysicalQueue, timeout: float = 0.0) -> Delivery | None:
        """The next dispatched task: from the backlog first, else wait for a sync match."""
        found = self._poll_backlog(queue, 1)
        if found:
            return found[0]
        if timeout <= 0:
            return None
        return self._wait_for_sync_match(queue, timeout)

    def directive(self, delivery: Delivery) -> JSON:
        """The delivered task's version directive: the one it carries (every row from 004 on),
        or History's for a row a v0.3 host wrote during an online rollout."""
        carried = directive_of(delivery.data)
        if carried is not None:
            return carried
        run_id, _event = task_identity(delivery.data)
        return self.history.version_directive(run_id)

    def complete(self, delivery: Delivery) -> CompletionOutcome:
        """RecordTaskCompleted for the start this delivery got: completed, or obsolete when
        that start is no longer the task's current one (it outlived History's start timeout
        and the task was dispatched again, or it completed already)."""
        run_id, event = task_identity(delivery.data)
        return self.history.record_task_completed(run_id, event, delivery.started_at)

    def poll_batch(
        self, queue: PhysicalQueue, max_tasks: int, timeout: float = 0.0
    ) -> list[Delivery]:
        """Up to `max_tasks` dispatched tasks from the backlog, their starts recorded in one
        History call; with none stored, wait up to `timeout` for one sync match."""
        if max_tasks < 1:
            raise ValueError("max_tasks must be >= 1")
        found = self._poll_backlog(queue, max_tasks)
        if found or timeout <= 0:
            return found
        delivery = self._wait_for_sync_match(queue, timeout)
        return [delivery] if delivery is not None else []

    def _wait_for_sync_match(self, queue: PhysicalQueue, timeout: float) -> Delivery | None:
        waiter = _Waiter()
        with self._lock:
            self._waiters.setdefault(queue, deque()).append(waiter)
        if waiter.event.wait(timeout):
            return waiter.delivery
        # Timed out. An add_task that already took this waiter is still asking History (one
        # call): it either delivers (event set) or puts the waiter back. Never abandon a taken
        # waiter: it would return None for a started task, or leave a ghost waiter behind.
        while True:
            with self._lock:
                waiting = self._waiters.get(queue, deque())
                if any(w is waiter for w in waiting):
                    waiting.remove(waiter)
                    return None
            if waiter.event.wait(0.01):
                return waiter.delivery

    def _poll_backlog(self, queue: PhysicalQueue, limit: int) -> list[Delivery]:
        """Claim pending tasks (lowest ids first) and record their starts until one is
        delivered or nothing is left. Already-started/obsolete are acked and skipped; a
        retryable one is set aside for this poll and tried first by the next, so a task that
        keeps failing never hides the tasks stored behind it."""
        mgr = self.manager(queue)
        deliveries: list[Delivery] = []
        retry: list[int] = []
        try:
            while not deliveries:
                claimed = mgr.claim(limit)
                if not claimed:
                    break
                starts = mgr.start_claimed(claimed)
                for task, start in zip(claimed, starts, strict=True):
                    if start.outcome is StartOutcome.STARTED:
                        deliveries.append(
                            Delivery(queue, task.task_id, task.data, start.started_at)
                        )
                    elif not start.outcome.acks:
                        retry.append(task.task_id)
        finally:
            if retry:
                mgr.release(retry)
        return deliveries

    def _take_waiter(self, queue: PhysicalQueue) -> _Waiter | None:
        with self._lock:
            waiting = self._waiters.get(queue)
            return waiting.popleft() if waiting else None

    def _return_waiter(self, queue: PhysicalQueue, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.setdefault(queue, deque()).appendleft(waiter)


def _start_flusher(matching: Matching, interval: float) -> None:
    """A daemon thread that saves quiet queues' progress every `interval` seconds. It holds
    only a weak reference, so it ends with `shutdown()` or when the Matching is collected."""
    ref = weakref.ref(matching)
    stop = matching._stop_flusher

    def run() -> None:
        while not stop.wait(interval):
            current = ref()
            if current is None:
                return
            current._tick()
            del current

    name = f"queueguard-flusher-{matching.host_id}"
    threading.Thread(target=run, name=name, daemon=True).start()
