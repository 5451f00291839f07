"""What `upgrade` of a set did: its steps (one statement as it ran) and its report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queueguard.sets.model import heads_of, one_revision


@dataclass
class Step:
    """One statement as it ran: for rehearse's report."""

    revision: str
    index: int
    sql: str
    transactional: bool
    seconds: float
    #: seconds from the statement's start to the end of its transaction (its locks' hold)
    held_s: float = 0.0
    started: float = field(default=0.0, repr=False)  # perf_counter at its start


@dataclass
class SetUpgradeReport:
    format: str
    target: str | None
    before: str | None
    after: str | None = None
    applied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    lock_waits: int = 0
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_ms: int = 0
    #: a Django database (an applied set, not a position): {app_label: latest applied}
    latest_applied: dict[str, str] | None = None

    def add(self, part: SetUpgradeReport) -> None:
        """What one part of a run in parts did (`upgrade --online` of an Alembic or Django
        set: its tool's runs between the revisions run as SQL)."""
        self.applied += part.applied
        self.skipped += part.skipped
        self.resumed += part.resumed
        self.notes += part.notes
        self.lock_waits += part.lock_waits

    def as_json(self) -> dict[str, Any]:
        if self.format == "django":  # an applied set, not a position: said as it is
            where: dict[str, Any] = {
                "target": None,
                "before": None,
                "after": None,
                "targetHeads": list(heads_of(self.target)),
                "beforeHeads": [],
                "afterHeads": [],
                "latestApplied": self.latest_applied or {},
            }
        else:  # one revision each (null at several heads of an Alembic set), and the heads
            where = {
                "target": one_revision(self.target),
                "before": one_revision(self.before),
                "after": one_revision(self.after),
                "targetHeads": list(heads_of(self.target)),
                "beforeHeads": list(heads_of(self.before)),
                "afterHeads": list(heads_of(self.after)),
            }
        return {
            "format": self.format,
            **where,
            "applied": self.applied,
            "skipped": self.skipped,
            "resumed": self.resumed,
            "lockWaits": self.lock_waits,
            "notes": self.notes,
            "elapsed_ms": self.elapsed_ms,
        }
