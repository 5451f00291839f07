"""Chaos scenario 5: connection loss (the database restarts mid-stream).

Three host processes (static membership) run producers and consumers against a private
PostgreSQL server — never the shared embedded one — which the parent stops and starts again
`--restarts` times, alternating a clean `fast` shutdown (sessions terminated) and an
`immediate` one (no shutdown checkpoint: crash recovery at the next start), with the server
down for a random 0.2–1.5 s each time. A host that loses its connection logs it, unloads the
queue (the flush fails; process state is dropped), backs off and retries: its next call
loads the queue again with a higher range and resumes above the saved ack level, through a
pool that reconnects on its own.

Judged like scenario 1 (logs, History, commit audit), plus: after every restart every queue
was loaded again (a higher range) and committed work again; a load never changes the saved
ack level (it resumes above it); every task a producer saw committed before a crash of the
server was started afterwards (durability of acknowledged commits).

    python -m bench.chaos.connection               # 10 restarts, writes the docs
    python -m bench.chaos.connection --restarts 2 --no-docs
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.audit import install_audit
from bench.common.databases import create_database
from bench.common.host import HostConfig
from bench.common.host_process import HostProcess, reap
from bench.common.ledger import Outcome, drain_and_judge
from bench.common.report import record, say, seconds
from bench.common.servers import ScratchServer
from bench.common.workload import SLOW_SHARE, START_TIMEOUT, queues_for, rng
from queueguard.queue_schema.runner import upgrade

CI_TEST = "`tests/test_reliability_network.py::test_database_restarts_mid_stream` (2 restarts)"


@dataclass
class Result:
    restarts: list[dict[str, Any]]
    queues: int
    outcome: Outcome
    worst_recovery_s: float
    not_reloaded: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "restarts": len(self.restarts),
            "queues": self.queues,
            "worst_recovery_s": round(self.worst_recovery_s, 2),
            "not_reloaded": self.not_reloaded[:5],
            **self.outcome.as_json(),
        }


def run(
    *,
    restarts: int = 10,
    hosts: int = 3,
    queues_per_host: int = 1,
    pause: tuple[float, float] = (2.0, 4.0),
    down: tuple[float, float] = (0.2, 1.5),
    seed: int | None = None,
    drain_timeout: float = 120.0,
    log: Any = say,
) -> Result:
    rnd = rng(seed)
    names = [f"h{i}" for i in range(hosts)]
    queues = queues_for(names, queues_per_host, family="restarts")
    folder = Path(tempfile.mkdtemp(prefix="qg-chaos-connection-"))
    events: list[dict[str, Any]] = []
    with ScratchServer() as server:
        dsn = create_database(server.admin_dsn(), "chaos")
        upgrade(dsn, progress=False)
        install_audit(dsn)
        procs = [
            HostProcess(
                HostConfig(
                    dsn=dsn,
                    host=h,
                    hosts=names,
                    queues=[q.key for q in queues],
                    folder=str(folder),
                    backoff=(0.05, 1.0),
                    start_timeout=START_TIMEOUT,
                    slow_share=SLOW_SHARE,
                )
            )
            for h in names
        ]
        try:
            for p in procs:
                p.start()
            for p in procs:
                p.wait_ready()
            t0 = time.time()
            for i in range(restarts):
                time.sleep(rnd.uniform(*pause))
                mode = ("fast", "immediate")[i % 2]
                stopped = time.time()
                server.stop(mode)
                time.sleep(rnd.uniform(*down))
                server.start()
                events.append({"mode": mode, "stopped": stopped, "started": time.time()})
                log(f"  restart {i + 1}/{restarts} ({mode}), down {time.time() - stopped:.1f} s")
                for p in procs:
                    assert p.proc is not None and p.proc.poll() is None, p.stderr()
            time.sleep(rnd.uniform(*pause) + 3)  # let the last reconnection show
            t1 = time.time()
            outcome, _ = drain_and_judge(procs, dsn, folder, (t0, t1), drain_timeout)
        finally:
            reap(procs)
    shutil.rmtree(folder, ignore_errors=True)
    # Every queue reloaded (higher range) and committed again after each restart.
    not_reloaded, worst_recovery = [], 0.0
    rows = outcome.audit.rows
    for i, event in enumerate(events):
        until = events[i + 1]["stopped"] if i + 1 < len(events) else float("inf")
        for queue in queues:
            # From the stop: pg_ctl returns a little after the server accepts connections.
            after = [r for r in rows if r.queue == queue.key and event["stopped"] <= r.at < until]
            loads = [r for r in after if r.kind == "load"]
            if not loads:
                not_reloaded.append(f"restart {i + 1}: {queue.key} not reloaded")
                continue
            work = [r for r in after if r.kind != "load"]
            if work:
                worst_recovery = max(worst_recovery, work[0].at - event["started"], 0.0)
    return Result(events, len(queues), outcome, worst_recovery, not_reloaded)


def check(result: Result) -> None:
    o = result.outcome
    assert not o.violations, "\n".join(o.violations[:20])
    assert not result.not_reloaded, result.not_reloaded
    assert o.lost == 0 and o.produced > 0
    assert o.ledger.dberrors > 0, "no host noticed the restarts"


def report(result: Result) -> None:
    o = result.outcome
    modes = [e["mode"] for e in result.restarts]
    row = {
        "Scenario": "Connection loss",
        "Scale": f"3 host processes, {result.queues} queues, private server",
        "Faults injected": f"{len(modes)} server restarts mid-stream ({modes.count('fast')} fast "
        f"shutdowns, {modes.count('immediate')} immediate = crash recovery)",
        "Tasks produced": f"{o.produced:,}",
        "Lost": o.lost,
        "Duplicated-and-rejected": f"{o.duplicated_rejected:,}",
        "Worst stall": f"{seconds(o.worst_stall_s)} (no commit on a queue, server downtime "
        f"included); back to work {seconds(result.worst_recovery_s)} after a start",
        "CI test (small scale)": CI_TEST,
    }
    downs = [e["started"] - e["stopped"] for e in result.restarts]
    details = [
        f"- server down per restart: {min(downs):.1f}–{max(downs):.1f} s (stop, pause, start)",
        f"- connection errors logged by the hosts: {o.ledger.dberrors:,}; reloads (loads "
        f"audited): {o.audit.loads}; queues not reloaded after a restart: "
        f"{len(result.not_reloaded)}",
        f"- commits audited: {o.audit.appends:,} appends, {o.audit.checkpoints:,} checkpoints; "
        f"stale commits: {len(o.audit.violations)}",
        f"- History's start timeout {START_TIMEOUT:.0f} s: stranded starts (started, never "
        f"completed once settled) {o.orphaned_starts}; re-dispatched by the start timers "
        f"{o.redispatched}; late completions answered obsolete {o.late_obsolete} (of "
        f"{o.completed + o.late_obsolete:,} completions)",
    ]
    record(5, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=10)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 5: {args.restarts} restarts of the database server mid-stream")
    result = run(restarts=args.restarts, seed=args.seed)
    say(f"  {result.as_json()}")
    check(result)
    if not args.no_docs:
        report(result)
    say("every host reconnected and reloaded with a higher range; nothing lost")


if __name__ == "__main__":
    main()
