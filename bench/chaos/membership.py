"""Chaos scenario 2: conflicting membership.

Two host processes are configured with different host lists for the same queues (host A
believes the list is [A], host B believes it is [B]), so both own every queue and take it
from each other over and over: each load increments the range and fences the other, whose
next range-checked write fails (StaleRangeError); the manager unloads, the embedding host
logs the fence, backs off (exponentially, from 20 ms up to 0.5 s, reset by a success) and
its next call loads the queue again. Both produce and consume all along.

Judged like scenario 1 (logs, History, commit audit), plus the churn:
- no task lost, none started twice; replays answered already-started (counted);
- every append and checkpoint came from the latest owner with its range;
- churn bounded and logged: every load a host made after its first one on a queue follows a
  fence (or a lost connection) that host logged for that queue — nobody reloads in a loop;
- progress: work was committed during the whole run (worst stall reported).

    python -m bench.chaos.membership               # 60 s, writes the docs
    python -m bench.chaos.membership --seconds 10 --no-docs
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.audit import install_audit
from bench.common.databases import scratch_database
from bench.common.host import HostConfig
from bench.common.host_process import HostProcess, reap
from bench.common.ledger import Outcome, drain_and_judge
from bench.common.report import record, say, seconds
from bench.common.workload import SLOW_SHARE, START_TIMEOUT, queues_for

CI_TEST = "`tests/test_reliability_runtime.py::test_conflicting_membership` (3 s)"


@dataclass
class Result:
    seconds: float
    queues: int
    takeovers: int
    unexplained_loads: list[str]
    outcome: Outcome

    def as_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "queues": self.queues,
            "takeovers": self.takeovers,
            "takeovers_per_s": round(self.takeovers / self.seconds, 1),
            "unexplained_loads": self.unexplained_loads[:5],
            **self.outcome.as_json(),
        }


def run(
    *, duration: float = 60.0, queues: int = 2, drain_timeout: float = 120.0, log: Any = say
) -> Result:
    keys = [q.key for q in queues_for(["A"], queues, family="contested")]
    folder = Path(tempfile.mkdtemp(prefix="qg-chaos-membership-"))
    with scratch_database() as dsn:
        install_audit(dsn)
        procs = [
            HostProcess(
                HostConfig(
                    dsn=dsn,
                    host=h,
                    hosts=[h],
                    queues=keys,
                    folder=str(folder),
                    start_timeout=START_TIMEOUT,
                    slow_share=SLOW_SHARE,
                )
            )
            for h in ("A", "B")
        ]
        try:
            for p in procs:
                p.start()
            for p in procs:
                p.wait_ready()
            t0 = time.time()
            time.sleep(duration)
            t1 = time.time()
            outcome, _ = drain_and_judge(procs, dsn, folder, (t0, t1), drain_timeout)
        finally:
            reap(procs)
    shutil.rmtree(folder, ignore_errors=True)
    ledger = outcome.ledger
    unexplained = []
    for (queue, app), loads in sorted(outcome.audit.loads_by().items()):
        stem = app.split("host=", 1)[1]
        causes = ledger.fenced[(stem, queue)] + ledger.dberrors_by[(stem, queue)]
        if loads > 1 + causes:
            unexplained.append(f"{stem} loaded {queue} {loads} times after {causes} fences")
    takeovers = outcome.audit.loads - len(keys)  # the first load of each queue takes nothing
    log(f"  {takeovers} takeovers in {duration:.0f} s; fences logged {sum(ledger.fenced.values())}")
    return Result(duration, len(keys), takeovers, unexplained, outcome)


def check(result: Result) -> None:
    o = result.outcome
    assert not o.violations, "\n".join(o.violations[:20])
    assert o.lost == 0
    assert not result.unexplained_loads, result.unexplained_loads
    assert result.takeovers > 0, "the hosts never took a queue from each other"
    assert o.produced > 0


def report(result: Result) -> None:
    o = result.outcome
    row = {
        "Scenario": "Conflicting membership",
        "Scale": f"2 hosts with different host lists, {result.queues} queues, "
        f"{result.seconds:.0f} s",
        "Faults injected": f"{result.takeovers:,} takeovers "
        f"({result.takeovers / result.seconds:.1f}/s), each fencing the other host",
        "Tasks produced": f"{o.produced:,}",
        "Lost": o.lost,
        "Duplicated-and-rejected": f"{o.duplicated_rejected:,}",
        "Worst stall": seconds(o.worst_stall_s) + " (no commit on a queue)",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        f"- takeovers: {result.takeovers:,}; fences logged by the hosts: "
        f"{sum(o.ledger.fenced.values()):,}; loads not explained by a logged fence: "
        f"{len(result.unexplained_loads)}",
        f"- commits audited: {o.audit.loads:,} loads, {o.audit.appends:,} appends, "
        f"{o.audit.checkpoints:,} checkpoints; stale commits: {len(o.audit.violations)}",
        f"- History answers: {dict(o.ledger.starts)}",
        f"- History's start timeout {START_TIMEOUT:.0f} s: stranded starts (started, never "
        f"completed once settled) {o.orphaned_starts}; re-dispatched by the start timers "
        f"{o.redispatched}; late completions answered obsolete {o.late_obsolete} (of "
        f"{o.completed + o.late_obsolete:,} completions)",
    ]
    record(2, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--queues", type=int, default=2)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 2: two hosts with conflicting membership for {args.seconds:.0f} s")
    result = run(duration=args.seconds, queues=args.queues)
    say(f"  {result.as_json()}")
    check(result)
    if not args.no_docs:
        report(result)
    say("nothing lost, every takeover fenced the other host, churn explained by logged fences")


if __name__ == "__main__":
    main()
