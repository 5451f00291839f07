"""History's start timer, run by a Matching host: starts that outlived History's start timeout
are dispatched again.

Temporal's History keeps a timer per start (start-to-close / workflow task timeout); when it
fires without a completion, History schedules a new attempt and its transfer queue adds the
task to Matching again. In this model the embedding application plays the transfer queue (it
schedules a task in History, then adds it to the queue of its choice: History does not know
the queue), so it plays the timer queue too: each `tick` asks History for expired starts,
adds each again through `Matching.add_task` on the queue `route` names (a range-checked
append by the queue's owner, or a sync match: the fence and the ack level work as for any
task), and only then ends the expired start (`History.reschedule_expired`). A crash between
the two leaves the start expired, and the next tick (any host's) adds it again: a duplicate,
which History answers already-started (at-least-once, as everywhere). A task whose re-added
copy is started gets a new `started_at`; the first attempt's completion names the old one
and is answered obsolete.

Several hosts may run timers on one database: they may add the same expired start twice
(both read it before either rescheduled it); History starts one copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from queueguard.core.history import redispatch_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import ExpiredStart
from queueguard.runtime.matching import AddResult, Matching


@dataclass(frozen=True)
class Redispatch:
    """One expired start dispatched again."""

    start: ExpiredStart
    queue: PhysicalQueue
    added: AddResult  # sync-matched (started again at once) or spooled
    #: History ended the expired start (False: the copy was started, or the task completed,
    #: before the timer got there; nothing to end)
    rescheduled: bool


class StartTimer:
    """Dispatches expired starts again through `matching`; `route` names the queue each goes
    to (one this host owns: any partition of the task's family and type, as Temporal adds a
    task to any partition), or None to leave it to another host's timer."""

    def __init__(
        self,
        matching: Matching,
        route: Callable[[ExpiredStart], PhysicalQueue | None],
        *,
        batch: int = 100,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be >= 1")
        self.matching, self.route, self.batch = matching, route, batch

    def tick(self) -> list[Redispatch]:
        """Dispatch up to `batch` expired starts again, oldest first (those `route` leaves to
        other hosts count in the batch). An error (the queue was taken over, the connection
        lost) stops the tick: what was not rescheduled stays expired and the next tick takes
        it again."""
        history = self.matching.history
        done = []
        for start in history.expired_starts(self.batch):
            queue = self.route(start)
            if queue is None:
                continue
            added = self.matching.add_task(queue, redispatch_payload(start))
            done.append(Redispatch(start, queue, added, history.reschedule_expired(start)))
        return done
