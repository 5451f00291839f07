"""What one run of the online upgrade benchmark measured: its settings, the figures of each
phase and window, the count check; `bench.online.benchmark` fills them in, `bench.online.report`
renders them, and a run's printed JSON reads back into them (`Results.from_json`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.online.gaps import Gaps
from bench.online.handover import HandoverResult
from bench.online.measure import CommandRun


@dataclass(frozen=True)
class Settings:
    rows: int = 1_000_000
    queues: int = 100
    hosts: int = 4
    period_s: float = 0.25  # each queue is polled once per period
    produce_per_s: float = 100.0  # tasks the whole fleet adds per second
    baseline_s: float = 10.0  # fleet running, no upgrade work: the gaps it has anyway
    tail_s: float = 3.0  # fleet watched after each upgrade ends
    batch_size: int = 1000  # --batch-size of migrate and contract
    drain_timeout_s: float = 1800.0

    @property
    def fleet_runs(self) -> int:
        """History made for fleet tasks: enough for the fleet's rate over a long run (the
        producers stop, and say so in the counts, if it runs out)."""
        return max(20_000, self.rows // 10)


@dataclass
class Counts:
    """The count check: every task added was started once in History, nothing left over."""

    added: int
    delivered: int
    started: int
    duplicates: int  # deliveries of an already delivered task
    lost: int  # added, never started
    unexpected: int  # started, never added
    legacy_with_history: int
    legacy_delivered: int
    legacy_started: int
    rows_left: int

    @property
    def ok(self) -> bool:
        return (
            self.duplicates == self.lost == self.unexpected == self.rows_left == 0
            and self.added == self.delivered == self.started
            and self.legacy_with_history == self.legacy_delivered == self.legacy_started
        )


@dataclass
class Results:
    settings: Settings
    server: str
    phases: dict[str, CommandRun] = field(default_factory=dict)
    offline: CommandRun | None = None
    gaps: dict[str, Gaps] = field(default_factory=dict)
    handover: HandoverResult | None = None
    counts: Counts | None = None
    fleet_wal_per_s: float = 0.0  # the fleet's own WAL rate in the baseline window
    fleet_errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    drain_s: float = 0.0
    offline_first_dispatch_s: float = 0.0  # the offline fleet: start to every queue dispatched
    measured_on: str = ""  # UTC date of the run
    load: tuple[float, float] | None = None  # 1-minute load average at the start, at the end

    def as_json(self) -> dict[str, Any]:
        return {
            "settings": asdict(self.settings),
            "server": self.server,
            "measured_on": self.measured_on,
            "load": self.load,
            "phases": {k: v.as_json() for k, v in self.phases.items()},
            "offline": self.offline.as_json() if self.offline else None,
            "gaps": {k: v.as_json() for k, v in self.gaps.items()},
            "handover": self.handover.as_json() if self.handover else None,
            "counts": {**asdict(self.counts), "ok": self.counts.ok} if self.counts else None,
            "fleet_wal_per_s": self.fleet_wal_per_s,
            "fleet_errors": self.fleet_errors,
            "drain_s": self.drain_s,
            "offline_first_dispatch_s": self.offline_first_dispatch_s,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Results:
        """A run's figures again, from its printed JSON (to render the docs once more)."""

        def command(run: dict[str, Any]) -> CommandRun:
            return CommandRun(started=0.0, **run)

        counts = dict(doc["counts"]) if doc.get("counts") else None
        if counts is not None:
            counts.pop("ok")
        load = doc.get("load")
        return cls(
            settings=Settings(**doc["settings"]),
            server=doc["server"],
            phases={k: command(v) for k, v in doc["phases"].items()},
            offline=command(doc["offline"]) if doc.get("offline") else None,
            gaps={k: Gaps(**v) for k, v in doc["gaps"].items()},
            handover=HandoverResult(**doc["handover"]) if doc.get("handover") else None,
            counts=Counts(**counts) if counts is not None else None,
            fleet_wal_per_s=doc["fleet_wal_per_s"],
            fleet_errors=doc["fleet_errors"],
            drain_s=doc["drain_s"],
            offline_first_dispatch_s=doc["offline_first_dispatch_s"],
            measured_on=doc.get("measured_on", ""),
            load=(float(load[0]), float(load[1])) if load else None,
        )
