"""Matching: the partition manager that owns backlog managers and matches tasks to pollers.

One backlog manager per physical queue (per version and task type): loading or reloading one
never takes another. A task that arrives while a poller waits is sync-matched: History
records the start and the poller gets it with no write to `tasks`.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field

from queueguard.backlog import BacklogManager
from queueguard.errors import NotOwner
from queueguard.history import task_identity
from queueguard.keys import PhysicalQueue
from queueguard.membership import StaticMembership
from queueguard.store import JSON, History, StartOutcome, Store


@dataclass(frozen=True)
class Delivery:
    """A task handed to a poller after History recorded its start."""

    queue: PhysicalQueue
    task_id: int | None  # None: sync-matched, never stored
    data: JSON


@dataclass
class _Waiter:
    event: threading.Event = field(default_factory=threading.Event)
    delivery: Delivery | None = None


@dataclass(frozen=True)
class AddResult:
    sync_matched: bool
    task_id: int | None
    outcome: StartOutcome | None = None


class Matching:
    """A Matching host: loads queues it owns, spools, polls, dispatches, checkpoints."""

    def __init__(
        self,
        store: Store,
        host_id: str = "local",
        membership: StaticMembership | None = None,
        *,
        checkpoint_every: int = 1,
        history: History | None = None,
    ) -> None:
        self.store, self.host_id, self.membership = store, host_id, membership
        # A History other than the store's (e.g. FaultyHistory) injects faults in tests.
        self.history = history if history is not None else store.history
        self.checkpoint_every = checkpoint_every
        self._managers: dict[PhysicalQueue, BacklogManager] = {}
        self._waiters: dict[PhysicalQueue, deque[_Waiter]] = {}
        self._generation = itertools.count(1)
        self._lock = threading.RLock()
        store.check_protocol()  # startup handshake before anything is loaded

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
                checkpoint_every=self.checkpoint_every,
                on_unload=self._forget,
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
        for queue in lost:
            self.unload(queue)
        return lost

    def shutdown(self) -> None:
        for queue in self.loaded():
            self.unload(queue)

    # tasks ----------------------------------------------------------------------------
    def add_task(self, queue: PhysicalQueue, data: JSON) -> AddResult:
        """Sync-match to a waiting poller when History accepts the start, else spool."""
        waiter = self._take_waiter(queue)
        if waiter is not None:
            try:
                outcome = self.history.record_task_started(*task_identity(data))
            except BaseException:
                self._return_waiter(queue, waiter)  # a timed-out poller waits for this
                raise
            if outcome is StartOutcome.STARTED:
                waiter.delivery = Delivery(queue, None, data)
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
        delivery = self._poll_backlog(queue)
        if delivery is not None or timeout <= 0:
            return delivery
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

    def _poll_backlog(self, queue: PhysicalQueue) -> Delivery | None:
        mgr = self.manager(queue)
        with self._lock:
            batch = mgr.pending()
            while True:
                for task_id in batch:
                    task = mgr.task(task_id)
                    outcome = mgr.dispatch(task_id)
                    if outcome is StartOutcome.STARTED:
                        return Delivery(queue, task_id, task.data)
                    # already-started/obsolete were acked; retryable stays pending: try the next
                # Nothing deliverable among the tasks read so far: read further, so a task that
                # keeps failing retryably never hides the tasks stored behind it.
                batch = [t.task_id for t in mgr.read()]
                if not batch:
                    return None

    def _take_waiter(self, queue: PhysicalQueue) -> _Waiter | None:
        with self._lock:
            waiting = self._waiters.get(queue)
            return waiting.popleft() if waiting else None

    def _return_waiter(self, queue: PhysicalQueue, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.setdefault(queue, deque()).appendleft(waiter)
