"""Group commit for a backlog's appends (the batched mode of `BacklogManager`)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from queueguard.core.store import JSON


@dataclass(eq=False)
class _SpoolRequest:
    payloads: list[JSON]
    event: threading.Event = field(default_factory=threading.Event)
    ids: list[int] | None = None
    error: BaseException | None = None
    lead: bool = False  # promoted: this request's thread now writes the batches

    @property
    def done(self) -> bool:
        return self.ids is not None or self.error is not None

    def result(self) -> list[int]:
        if self.error is not None:
            raise self.error
        assert self.ids is not None
        return self.ids


class Spooler:
    """Group commit for appends: requests that arrive while an append is in flight share the
    next one (one range-checked transaction of at most `max_batch` tasks; a request is never
    split, so each caller's tasks are all stored or none).

    No background thread: the first caller writes (the leader); callers arriving meanwhile
    wait on their own event; the leader writes batches until its own request is done, then
    hands over to the oldest waiting request. `linger` (seconds, default 0) lets a leader wait
    for more arrivals; with 0 a batch is whatever queued up during the previous append.
    """

    def __init__(
        self, append: Callable[[list[JSON]], list[int]], max_batch: int, linger: float = 0.0
    ) -> None:
        if max_batch < 1 or linger < 0:
            raise ValueError("spool batch must be >= 1 and linger >= 0")
        self._append, self.max_batch, self.linger = append, max_batch, linger
        self._lock = threading.Lock()
        self._queue: deque[_SpoolRequest] = deque()
        self._leading = False
        self.appends = 0  # transactions written (inspection, benchmarks)

    def submit(self, payloads: Sequence[JSON]) -> list[int]:
        """Store `payloads` (in one transaction, possibly shared); returns their ids."""
        request = _SpoolRequest(list(payloads))
        if not request.payloads:
            return []
        with self._lock:
            self._queue.append(request)
            lead = not self._leading
            self._leading = True
        if not lead:
            request.event.wait()
            if not request.lead:
                return request.result()
        self._lead(request)
        return request.result()

    def _take(self) -> list[_SpoolRequest]:
        """Whole requests from the front, up to max_batch tasks (always at least one)."""
        with self._lock:
            batch = [self._queue.popleft()]
            size = len(batch[0].payloads)
            while self._queue and size + len(self._queue[0].payloads) <= self.max_batch:
                size += len(self._queue[0].payloads)
                batch.append(self._queue.popleft())
        return batch

    def _write(self, batch: list[_SpoolRequest]) -> None:
        payloads = [p for request in batch for p in request.payloads]
        try:
            ids = self._append(payloads)
        except BaseException as exc:  # the batch was one transaction: it failed whole
            for request in batch:
                request.error = exc
        else:
            start = 0
            for request in batch:
                request.ids = ids[start : start + len(request.payloads)]
                start += len(request.payloads)
        finally:
            self.appends += 1

    def _lead(self, mine: _SpoolRequest) -> None:
        try:
            if self.linger:
                time.sleep(self.linger)
            while not mine.done:
                batch = self._take()
                self._write(batch)
                for request in batch:
                    if request is not mine:
                        request.event.set()
        finally:
            with self._lock:
                if not mine.done and mine in self._queue:  # interrupted before its own write
                    self._queue.remove(mine)
                if self._queue:  # hand over: the oldest waiter writes the next batches
                    successor = self._queue[0]
                    successor.lead = True
                    successor.event.set()
                else:
                    self._leading = False
