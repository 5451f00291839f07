"""Ack-level arithmetic: pure, process-local state of one loaded backlog manager.

The saved ack level is the highest task id through which every delivery was handled.
Tasks are read in id order (readLevel) but may be dispatched in any order; a completion
above a gap is remembered until the gap closes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AckTracker:
    """Tracks read tasks and out-of-order completions above the saved ack level."""

    ack_level: int = 0
    read_level: int = 0
    # task id -> handled? for every task read above ack_level
    _outstanding: dict[int, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.read_level = max(self.read_level, self.ack_level)

    def read(self, task_id: int) -> None:
        """Record that `task_id` was read; ids must arrive in increasing order."""
        if task_id <= self.read_level:
            raise ValueError(f"task {task_id} read out of order (readLevel {self.read_level})")
        self.read_level = task_id
        self._outstanding[task_id] = False

    def complete(self, task_id: int) -> int:
        """Mark a read task handled; return the (possibly advanced) ack level."""
        if task_id not in self._outstanding:
            raise KeyError(f"task {task_id} was not read or is already below the ack level")
        self._outstanding[task_id] = True
        return self.advance()

    def advance(self) -> int:
        """Move the ack level over the fully handled prefix of read tasks."""
        # Ids are read in increasing order and dicts keep insertion order: no sort needed.
        for task_id in list(self._outstanding):
            if not self._outstanding[task_id]:
                break
            del self._outstanding[task_id]
            self.ack_level = task_id
        return self.ack_level

    def pending(self) -> list[int]:
        """Read tasks not yet handled, in id order."""
        return [t for t, done in self._outstanding.items() if not done]

    def done_above_gap(self) -> list[int]:
        """Handled tasks still above the ack level (rows that stay stored)."""
        return [t for t, done in self._outstanding.items() if done]

    @property
    def outstanding(self) -> int:
        return sum(1 for done in self._outstanding.values() if not done)
