"""What an online upgrade run did, and what it tells the operator as it goes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Progress:
    """One step of a long phase: `done` of `total` units (rows or queues) so far."""

    phase: str
    step: str
    done: int
    total: int | None
    rate: float | None = None  # units per second over this step so far

    @property
    def eta_s(self) -> float | None:
        if self.total is None or not self.rate:
            return None
        return max(self.total - self.done, 0) / self.rate


Tell = Callable[[Progress | str], None]


@dataclass
class OnlineReport:
    target: str
    before: str | None
    after: str | None
    #: phases this run carried out (or finished), in order
    phases: list[str] = field(default_factory=list)
    #: where the rollout stands now: expand, migrate, contract, closing, done or aborted
    phase: str | None = None
    #: what the operator does next, in one sentence
    next: str = ""
    counters_repaired: int = 0
    directives: int = 0
    relocated: dict[str, int] = field(default_factory=dict)
    queues_fenced: int = 0
    batches: int = 0
    #: the most rows (or queues, for counters) one batch touched: at most --batch-size
    largest_batch: int = 0
    lock_waits: int = 0
    paused: bool = False
    warnings: list[str] = field(default_factory=list)
    elapsed_ms: int = 0

    @property
    def rows_relocated(self) -> int:
        return sum(self.relocated.values())

    def as_json(self) -> dict[str, Any]:
        return {"schemaVersion": 1, "online": True, **self.__dict__}
