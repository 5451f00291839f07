"""Scenario 11: the runtime crash scenario (1) with every host connecting through PgBouncer in
transaction-pooling mode (`PostgresStore(prepare=False)`): SIGKILLed hosts lose nothing and
commit nothing stale through the pooler either.

    python -m bench.chaos.pooler_crash --kills 20
"""

from __future__ import annotations

import argparse

from bench.chaos import crash
from bench.common.report import record, say, seconds
from bench.topology.pgbouncer import PgBouncer, available
from queueguard.pg.scratch import server_dsn

CI_TEST = "`tests/topology/test_pooler_crash.py` (2 kills)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    reason = available()
    if reason is not None:
        raise SystemExit(reason)
    with PgBouncer(server_dsn()) as pooler:
        result = crash.run(kills=args.kills, pooler=pooler)
    crash.check(result)
    o = result.outcome
    say(f"{o.produced:,} produced, {o.lost} lost, {len(o.violations)} violations")
    if args.no_docs:
        return
    record(
        11,
        {
            "Scenario": "Runtime crash under load, through a transaction pooler",
            "Scale": f"{result.hosts} host processes through PgBouncer 1.18 (transaction "
            f"pooling, 4 server connections), {result.queues} queues, "
            f"{result.elapsed_s:.0f} s",
            "Faults injected": f"{result.kills} SIGKILLs of a serving host (restarted each time)",
            "Tasks produced": f"{o.produced:,}",
            "Lost": o.lost,
            "Duplicated-and-rejected": f"{o.duplicated_rejected:,}",
            "Worst stall": seconds(o.worst_stall_s) + " (no commit on a queue)",
            "CI test (small scale)": CI_TEST,
        },
        [
            f"Command: `python -m bench.chaos.pooler_crash --kills {args.kills}`.",
            "",
            f"Loads {o.audit.loads}, appends {o.audit.appends:,}, checkpoints "
            f"{o.audit.checkpoints:,}, stale commits {len(o.audit.violations)}; drain "
            f"{seconds(result.drain_s)}.",
        ],
    )


if __name__ == "__main__":
    main()
