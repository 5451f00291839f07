"""The ledger: what the hosts logged and what the database holds, judged.

The figures of the report table (tasks produced, lost, duplicated-and-rejected, worst
stall) and every broken promise (a task confirmed but never started, one started twice,
a stale commit, a queue left undrained, an unexpected error).

Hosts with a start timeout (`HostConfig.start_timeout`) complete what they get and History
forgets a completed task (its row goes): then a task is lost if its row is still there
never started, a start is stranded if it is still there started (never completed) once the
run settled, and a task may be started again only a whole timeout after its last start.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench.common.audit import (
    AuditReport,
    check_audit,
    check_task_audit,
    committed_tasks,
    read_audit,
)
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


def wait_settled(dsn: str, timeout: float) -> float:
    """Wait until every queue is drained and History holds no start awaiting its completion
    (a stranded start is dispatched again by a start timer, which may refill a queue).
    Returns the time waited; a run that does not settle is judged as it is."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        ((busy,),) = query(
            dsn,
            "SELECT (SELECT count(*) FROM task_queues WHERE ack_level < last_task_id)"
            " + (SELECT count(*) FROM tasks)"
            " + (SELECT count(*) FROM scheduled_tasks WHERE started_at IS NOT NULL)",
        )
        if busy == 0:
            break
        time.sleep(0.2)
    return time.monotonic() - started


@dataclass
class Ledger:
    """What the hosts logged, read back."""

    produced: dict[tuple[str, int], int] = field(default_factory=dict)  # confirmed adds
    starts: Counter[str] = field(default_factory=Counter)  # History answers by outcome
    started_by_host: Counter[tuple[str, int]] = field(default_factory=Counter)
    delivered: Counter[tuple[str, int]] = field(default_factory=Counter)
    start_times: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # STARTED at
    completions: Counter[str] = field(default_factory=Counter)  # History answers by outcome
    redispatched: int = 0  # expired starts a start timer added again
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
                    if ev.get("at"):
                        ledger.start_times.setdefault((ev["run"], ev["ev"]), []).append(ev["at"])
            elif kind == "complete":
                ledger.completions[ev["o"]] += 1
            elif kind == "redispatched":
                ledger.redispatched += 1
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
    #: started in History, never handed to a worker (see docs); with a start timeout:
    #: started and never completed once the run settled (a stranded start)
    orphaned_starts: int
    worst_stall_s: float
    audit: AuditReport
    ledger: Ledger
    violations: list[str]
    #: with a start timeout: expired starts dispatched again by the hosts' start timers, and
    #: completions History answered obsolete (a late completion of an expired start)
    redispatched: int = 0
    late_obsolete: int = 0
    completed: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "produced": self.produced,
            "lost": self.lost,
            "duplicated_rejected": self.duplicated_rejected,
            "orphaned_starts": self.orphaned_starts,
            "redispatched": self.redispatched,
            "late_obsolete": self.late_obsolete,
            "completed": self.completed,
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
    start_timeout = procs[0].cfg.start_timeout if procs else None
    if start_timeout is not None:  # and no start left to complete (or to time out)
        drain_s += wait_settled(dsn, min(timeout, 3 * start_timeout + 10))
    for p in procs:
        p.terminate()
    outcome = judge(dsn, folder, window, start_timeout)
    for p in procs:
        if "Traceback" in p.stderr():
            outcome.violations.append(f"{p.cfg.host} stderr: {p.stderr()}")
    return outcome, drain_s


def judge(
    dsn: str, folder: Path, window: tuple[float, float], start_timeout: float | None = None
) -> Outcome:
    """Read the logs, the audit and History; list every broken promise. `start_timeout`: the
    hosts' (then they completed what they got, and History forgot it)."""
    ledger = read_ledger(folder)
    audit = check_audit(read_audit(dsn), window)
    rows = {
        (str(r), e): s
        for r, e, s in query(
            dsn, "SELECT run_id, scheduled_event_id, started_at IS NOT NULL FROM scheduled_tasks"
        )
    }
    started = {k for k, s in rows.items() if s}
    completing = start_timeout is not None
    if completing:  # a task with no row left was completed, so started
        known = set(ledger.produced) | {
            (r, e) for qrows in committed_tasks(dsn).values() for _, r, e in qrows
        }
        started |= {k for k in known if k not in rows}
    violations = list(audit.violations) + check_task_audit(dsn, started)
    lost = [k for k in ledger.produced if k not in started]
    violations += [f"lost: {run}/{ev} was confirmed but never started" for run, ev in lost[:10]]
    if completing:
        assert start_timeout is not None
        twice = []
        for k, times in ledger.start_times.items():
            at = sorted(datetime.fromisoformat(t) for t in times)
            if any((b - a).total_seconds() < start_timeout for a, b in pairwise(at)):
                twice.append(k)
        violations += [f"started again before its start expired: {k}" for k in twice[:10]]
    else:
        twice = [k for k, n in ledger.started_by_host.items() if n > 1]
        violations += [f"started twice: {k}" for k in twice[:10]]
    violations += [f"unexpected error: {c}" for c in ledger.crashes[:5]]
    ((undone, left),) = query(
        dsn,
        "SELECT (SELECT count(*) FROM task_queues WHERE ack_level < last_task_id), "
        "(SELECT count(*) FROM tasks)",
    )
    if undone or left:
        violations.append(f"not drained: {undone} queues below last_task_id, {left} rows left")
    if completing:
        stranded = [k for k, s in rows.items() if s]
        violations += [f"stranded: {r}/{e} started, never completed" for r, e in stranded[:10]]
        orphans = len(stranded)
    else:
        orphans = len(started - set(ledger.delivered))
    return Outcome(
        produced=len(ledger.produced),
        lost=len(lost),
        # a re-delivery of a completed task is answered obsolete (History forgot it); runs
        # stay running in these scenarios, so every obsolete start is such a re-delivery
        duplicated_rejected=ledger.starts["already-started"]
        + (ledger.starts["obsolete"] if completing else 0),
        orphaned_starts=orphans,
        worst_stall_s=audit.worst_gap_s,
        audit=audit,
        ledger=ledger,
        violations=violations,
        redispatched=ledger.redispatched,
        late_obsolete=ledger.completions["obsolete"],
        completed=ledger.completions["completed"],
    )
