"""Chaos scenario 1: runtime crash under load.

Three host processes with static membership share one database; on each queue they own a
producer spools continuously and a consumer polls, History-starts and acks. The parent
SIGKILLs a random host `--kills` times (each time it restarts the host as a new process and
waits until it serves again before the next pause). Then producers stop, the hosts drain
every queue, and the run is judged from three independent records: the hosts' logs (every
confirmed spool, History answer and delivery), History itself, and the commit audit (every
committed load/append/checkpoint with its range and writer):

- every task a producer saw committed was started in History (nothing lost), and no
  identity was started twice within History's start timeout; re-deliveries were answered
  already-started (counted);
- consumers complete what they get (0.2 % of them only after 1.5 start timeouts); a start
  timer in each host dispatches expired starts again, so no start stays stranded (a host
  killed between History's start and the hand-over) — re-dispatches and the late
  completions History answered obsolete are counted;
- every append and checkpoint came from the latest owner with its range (no stale owner
  committed after a takeover), ranges grew by one per load, ack levels never moved back;
- every queue ends drained: ack_level = last_task_id, no row left.

    python -m bench.chaos.crash                  # 20 kills, writes the docs
    python -m bench.chaos.crash --kills 5 --no-docs
    python -m bench.chaos.crash --mode batched   # the batching runtime options
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
from bench.common.workload import SLOW_SHARE, START_TIMEOUT, queues_for, rng
from bench.topology.pgbouncer import PgBouncer
from queueguard.pg.scratch import dbname_of

MODES: dict[str, dict[str, Any]] = {
    "one-by-one": {},
    "batched": {"spool_batch": 16, "checkpoint_every": 20, "checkpoint_interval": 0.05},
}
CI_TEST = (
    "`tests/test_reliability_runtime.py::test_crash_under_load` (3 + 2 kills); "
    "`tests/runtime/test_recovery.py` (one SIGKILL, one queue; existing)"
)


@dataclass
class Result:
    kills: int
    hosts: int
    queues: int
    mode: str
    elapsed_s: float
    drain_s: float
    outcome: Outcome

    def as_json(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "hosts": self.hosts,
            "queues": self.queues,
            "mode": self.mode,
            "elapsed_s": round(self.elapsed_s, 1),
            "drain_s": round(self.drain_s, 1),
            **self.outcome.as_json(),
        }


def run(
    *,
    kills: int = 20,
    hosts: int = 3,
    queues_per_host: int = 2,
    pause: tuple[float, float] = (1.0, 3.0),
    mode: str = "one-by-one",
    seed: int | None = None,
    drain_timeout: float = 180.0,
    log: Any = say,
    pooler: PgBouncer | None = None,
) -> Result:
    """`pooler`: the hosts reach the database through it (transaction pooling); the judge
    reads the database directly."""
    rnd = rng(seed)
    names = [f"h{i}" for i in range(hosts)]
    queues = queues_for(names, queues_per_host)
    folder = Path(tempfile.mkdtemp(prefix="qg-chaos-crash-"))
    started = time.monotonic()
    with scratch_database() as dsn:
        install_audit(dsn)
        procs = [
            HostProcess(
                HostConfig(
                    dsn=pooler.dsn(dbname_of(dsn)) if pooler else dsn,
                    prepare=pooler is None,
                    host=name,
                    hosts=names,
                    queues=[q.key for q in queues],
                    folder=str(folder),
                    matching=MODES[mode],
                    poll_batch=16 if mode == "batched" else 1,
                    start_timeout=START_TIMEOUT,
                    slow_share=SLOW_SHARE,
                )
            )
            for name in names
        ]
        try:
            for p in procs:
                p.start()
            for p in procs:
                p.wait_ready()
            t0 = time.time()
            for i in range(kills):
                time.sleep(rnd.uniform(*pause))
                victim = rnd.choice(procs)
                victim.kill()
                log(f"  kill {i + 1}/{kills}: SIGKILL {victim.cfg.host}.{victim.cfg.incarnation}")
                victim.start()
                victim.wait_ready()
            time.sleep(rnd.uniform(*pause))
            t1 = time.time()
            outcome, drain_s = drain_and_judge(procs, dsn, folder, (t0, t1), drain_timeout)
        finally:
            reap(procs)
    shutil.rmtree(folder, ignore_errors=True)
    return Result(kills, hosts, len(queues), mode, time.monotonic() - started, drain_s, outcome)


def report(results: list[Result]) -> None:
    total = sum(r.outcome.produced for r in results)
    kills = sum(r.kills for r in results)
    hosts, queues = results[0].hosts, results[0].queues
    row = {
        "Scenario": "Runtime crash under load",
        "Scale": f"{hosts} host processes, {queues} queues, {len(results)} run(s) "
        f"({', '.join(r.mode for r in results)}), {sum(r.elapsed_s for r in results):.0f} s",
        "Faults injected": f"{kills} SIGKILLs of a serving host (restarted each time)",
        "Tasks produced": f"{total:,}",
        "Lost": sum(r.outcome.lost for r in results),
        "Duplicated-and-rejected": f"{sum(r.outcome.duplicated_rejected for r in results):,}",
        "Worst stall": seconds(max(r.outcome.worst_stall_s for r in results))
        + " (no commit on a queue)",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        "| mode | kills | produced | lost | dup-rejected | stranded starts | re-dispatched "
        "| late completions (obsolete) | loads | appends | checkpoints | stale commits "
        "| worst stall | drain |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        o = r.outcome
        details.append(
            f"| {r.mode} | {r.kills} | {o.produced:,} | {o.lost} | {o.duplicated_rejected:,} "
            f"| {o.orphaned_starts} | {o.redispatched} | {o.late_obsolete} "
            f"| {o.audit.loads} | {o.audit.appends:,} "
            f"| {o.audit.checkpoints:,} | {len(o.audit.violations)} | {seconds(o.worst_stall_s)} "
            f"({o.audit.worst_gap_at}) | {seconds(r.drain_s)} |"
        )
    details += [
        "",
        f"History's start timeout in the hosts: {START_TIMEOUT:.0f} s; consumers complete what "
        f"they get, {SLOW_SHARE:.1%} of them only after 1.5 timeouts. *Stranded starts*: "
        "started in History and never completed once the run settled (a host killed between "
        "History's start and the hand-over strands one until the start timer dispatches it "
        "again); *re-dispatched*: expired starts the hosts' start timers added again; *late "
        "completions*: completions History answered obsolete (their start had expired).",
    ]
    record(1, row, details)


def check(result: Result) -> None:
    o = result.outcome
    assert not o.violations, "\n".join(o.violations[:20])
    assert o.lost == 0
    assert o.produced > 0 and o.audit.loads >= result.kills
    assert o.ledger.dberrors == 0, o.ledger.dberrors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--queues-per-host", type=int, default=2)
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    results = []
    for mode in MODES if args.mode == "both" else [args.mode]:
        say(f"scenario 1, {mode}: {args.kills} SIGKILLs of {args.hosts} hosts")
        result = run(
            kills=args.kills,
            hosts=args.hosts,
            queues_per_host=args.queues_per_host,
            mode=mode,
            seed=args.seed,
        )
        say(f"  {result.as_json()}")
        check(result)
        results.append(result)
    if not args.no_docs:
        report(results)
    say("nothing lost, no stale commit, ack levels monotonic")


if __name__ == "__main__":
    main()
