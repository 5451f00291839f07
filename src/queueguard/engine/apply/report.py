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
class UpgradeReport:
    """What `upgrade` did, for every format (`format`: the set's, "queueguard" for ours)."""

    format: str
    target: str | None
    before: str | None
    after: str | None = None
    applied: list[str] = field(default_factory=list)
    #: revisions another runner applied while this one waited for the runner lock
    skipped: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    lock_waits: int = 0
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_ms: int = 0
    #: a Django database (an applied set, not a position): {app_label: latest applied}
    latest_applied: dict[str, str] | None = None
    #: queueguard's own set: what the operator should know (e.g. the older-host check is
    #: blind through a pooler), the rows its revisions relocated per source queue, and the
    #: queues its fence bumped
    warnings: list[str] = field(default_factory=list)
    relocated: dict[str, int] = field(default_factory=dict)
    queues_fenced: int = 0

    def add(self, part: UpgradeReport) -> None:
        """What one part of a run in parts did (`upgrade --online` of an Alembic or Django
        set: its tool's runs between the revisions run as SQL)."""
        self.applied += part.applied
        self.skipped += part.skipped
        self.resumed += part.resumed
        self.notes += part.notes
        self.lock_waits += part.lock_waits

    def as_json(self) -> dict[str, Any]:
        if self.format == "queueguard":  # the own set's document, as released
            return {
                "schemaVersion": 1,
                "target": self.target,
                "before": self.before,
                "after": self.after,
                "applied": self.applied,
                "skipped": self.skipped,
                "warnings": self.warnings,
                "relocated": self.relocated,
                "queues_fenced": self.queues_fenced,
                "lock_waits": self.lock_waits,
                "elapsed_ms": self.elapsed_ms,
            }
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
