"""The ledger: what the hosts logged and what the database holds, judged.

The figures of the report table (tasks produced, lost, duplicated-and-rejected, worst
stall) and every broken promise (a task confirmed but never started, one started twice,
a stale commit, a queue left undrained, an unexpected error).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.audit import AuditReport, check_audit, check_task_audit, read_audit
from bench.common.databases import query
from bench.common.host_process import HostProcess


def wait_drained(dsn: str, timeout: float) -> float:
    """Wait until every queue's ack level reached its last task id and no row is left."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        ((undone, rows),) = query(
            dsn,
            "SELECT (SELECT count(*) FROM task_queues WHERE ack_level < last_task_id), "
            "(SELECT count(*) FROM tasks)",
        )
        if undone == 0 and rows == 0:
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"queues not drained after {timeout}s: {undone} queues, {rows} rows")


@dataclass
class Ledger:
    """What the hosts logged, read back."""

    produced: dict[tuple[str, int], int] = field(default_factory=dict)  # confirmed adds
    starts: Counter[str] = field(default_factory=Counter)  # History answers by outcome
    started_by_host: Counter[tuple[str, int]] = field(default_factory=Counter)
    delivered: Counter[tuple[str, int]] = field(default_factory=Counter)
    fenced: Counter[tuple[str, str]] = field(default_factory=Counter)  # (host.inc, queue)
    dberrors: int = 0
    dberrors_by: Counter[tuple[str, str]] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    shutdown_errors: list[str] = field(default_factory=list)
    events: int = 0


def read_ledger(folder: Path) -> Ledger:
    ledger = Ledger()
    for path in sorted(folder.glob("*.log")):
        for line in path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:  # a torn last line cannot happen (one write per line)
                ledger.crashes.append(f"{path.name}: unparsable line {line[:80]!r}")
                continue
            ledger.events += 1
            kind = ev["e"]
            if kind == "produced":
                key = (ev["run"], ev["ev"])
                ledger.produced[key] = ledger.produced.get(key, 0) + 1
                if ev["sync"]:
                    ledger.delivered[key] += 1
            elif kind == "start":
                ledger.starts[ev["o"]] += 1
                if ev["o"] == "started":
                    ledger.started_by_host[(ev["run"], ev["ev"])] += 1
            elif kind == "delivered":
                ledger.delivered[(ev["run"], ev["ev"])] += 1
            elif kind == "fenced":
                ledger.fenced[(path.stem, ev["q"])] += 1
            elif kind == "dberror":
                ledger.dberrors += 1
                ledger.dberrors_by[(path.stem, ev["q"])] += 1
            elif kind == "crash":
                ledger.crashes.append(f"{path.name}: {ev['err']}\n{ev['tb']}")
            elif kind == "shutdown-error":
                ledger.shutdown_errors.append(f"{path.name}: {ev['err']}")
    return ledger


@dataclass
class Outcome:
    """The figures of one run and everything that went wrong."""

    produced: int
    lost: int
    duplicated_rejected: int
    orphaned_starts: int  # started in History, never handed to a worker (see docs)
    worst_stall_s: float
    audit: AuditReport
    ledger: Ledger
    violations: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "produced": self.produced,
            "lost": self.lost,
            "duplicated_rejected": self.duplicated_rejected,
            "orphaned_starts": self.orphaned_starts,
            "worst_stall_s": round(self.worst_stall_s, 3),
            "loads": self.audit.loads,
            "appends": self.audit.appends,
            "checkpoints": self.audit.checkpoints,
            "fences_logged": sum(self.ledger.fenced.values()),
            "connection_errors": self.ledger.dberrors,
            "violations": self.violations[:20],
        }


def drain_and_judge(
    procs: Sequence[HostProcess],
    dsn: str,
    folder: Path,
    window: tuple[float, float],
    timeout: float,
) -> tuple[Outcome, float]:
    """Tell the hosts to drain, wait for it, stop them and judge the run; an error a host
    printed instead of logging is a violation too. Returns the outcome and the drain time."""
    (folder / "drain").touch()
    for p in procs:  # no append in flight any more: a drained queue stays drained
        p.wait_logged("producers-stopped", timeout)
    drain_s = wait_drained(dsn, timeout)
    for p in procs:
        p.terminate()
    outcome = judge(dsn, folder, window)
    for p in procs:
        if "Traceback" in p.stderr():
            outcome.violations.append(f"{p.cfg.host} stderr: {p.stderr()}")
    return outcome, drain_s


def judge(dsn: str, folder: Path, window: tuple[float, float]) -> Outcome:
    """Read the logs, the audit and History; list every broken promise."""
    ledger = read_ledger(folder)
    audit = check_audit(read_audit(dsn), window)
    started = {
        (str(r), e)
        for r, e in query(
            dsn,
            "SELECT run_id, scheduled_event_id FROM scheduled_tasks WHERE started_at IS NOT NULL",
        )
    }
    violations = list(audit.violations) + check_task_audit(dsn, started)
    lost = [k for k in ledger.produced if k not in started]
    violations += [f"lost: {run}/{ev} was confirmed but never started" for run, ev in lost[:10]]
    twice = [k for k, n in ledger.started_by_host.items() if n > 1]
    violations += [f"started twice: {k}" for k in twice[:10]]
    violations += [f"unexpected error: {c}" for c in ledger.crashes[:5]]
    ((undone, rows),) = query(
        dsn,
        "SELECT (SELECT count(*) FROM task_queues WHERE ack_level < last_task_id), "
        "(SELECT count(*) FROM tasks)",
    )
    if undone or rows:
        violations.append(f"not drained: {undone} queues below last_task_id, {rows} rows left")
    delivered = set(ledger.delivered)
    orphans = len(started - delivered)
    return Outcome(
        produced=len(ledger.produced),
        lost=len(lost),
        duplicated_rejected=ledger.starts["already-started"],
        orphaned_starts=orphans,
        worst_stall_s=audit.worst_gap_s,
        audit=audit,
        ledger=ledger,
        violations=violations,
    )
