"""Ack-level arithmetic: pure, process-local state of one loaded backlog manager.

The saved ack level is the highest task id through which every delivery was handled.
Tasks are read in id order (readLevel) but may be dispatched in any order; a completion
above a gap is remembered until the gap closes.

Cost: `read`, `complete` and `outstanding` are O(1) amortised (a completion pops the handled
prefix from the front of a deque, each id at most once); only the inspection lists
`pending()` and `done_above_gap()` walk the tasks above the ack level.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class AckTracker:
    """Tracks read tasks and out-of-order completions above the saved ack level."""

    ack_level: int = 0
    read_level: int = 0
    # ids read above ack_level, in increasing (read) order
    _order: deque[int] = field(default_factory=deque)
    # task id -> handled? for every id in _order
    _handled: dict[int, bool] = field(default_factory=dict)
    _pending: int = 0

    def __post_init__(self) -> None:
        self.read_level = max(self.read_level, self.ack_level)

    def read(self, task_id: int) -> None:
        """Record that `task_id` was read; ids must arrive in increasing order."""
        if task_id <= self.read_level:
            raise ValueError(f"task {task_id} read out of order (readLevel {self.read_level})")
        self.read_level = task_id
        self._order.append(task_id)
        self._handled[task_id] = False
        self._pending += 1

    def is_pending(self, task_id: int) -> bool:
        """Read, above the ack level and not handled yet."""
        return self._handled.get(task_id) is False

    def complete(self, task_id: int) -> int:
        """Mark a read task handled; return the (possibly advanced) ack level."""
        handled = self._handled.get(task_id)
        if handled is None:
            raise KeyError(f"task {task_id} was not read or is already below the ack level")
        if not handled:
            self._handled[task_id] = True
            self._pending -= 1
        return self.advance()

    def advance(self) -> int:
        """Move the ack level over the fully handled prefix of read tasks."""
        order, handled = self._order, self._handled
        while order and handled[order[0]]:
            task_id = order.popleft()
            del handled[task_id]
            self.ack_level = task_id
        return self.ack_level

    def pending(self) -> list[int]:
        """Read tasks not yet handled, in id order (inspection: walks the window)."""
        return [t for t in self._order if not self._handled[t]]

    def done_above_gap(self) -> list[int]:
        """Handled tasks still above the ack level (rows that stay stored)."""
        return [t for t in self._order if self._handled[t]]

    @property
    def outstanding(self) -> int:
        """How many read tasks are not handled yet (O(1))."""
        return self._pending
