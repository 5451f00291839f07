"""Scenario 10: concurrent upgrade runners through a transaction pooler.

Rounds of 2 or 3 `queueguard upgrade` processes started together through a real PgBouncer
(Debian's package, transaction pooling, a small server pool) on a fresh copy of the v0.3
golden fixture, while three clients run short transactions through the same pool, so a
runner's next transaction may land on another server connection. Each round must apply each
revision exactly once (the other runners report it under `skipped`), leave no advisory lock,
exit 0 everywhere and reach the golden state.

    python -m bench.chaos.pooler_runners --rounds 20
"""

from __future__ import annotations

import argparse
import time

from bench.common.report import record, say
from bench.topology.pgbouncer import PgBouncer, available
from bench.topology.runner_rounds import run_round
from queueguard.pg.scratch import server_dsn

CI_TEST = "`tests/topology/test_pooler.py` (5 rounds of 2-3 runners, plus preflight/status)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    reason = available()
    if reason is not None:
        raise SystemExit(reason)
    admin = server_dsn()
    started = time.monotonic()
    problems: list[str] = []
    redundant = transactions = 0
    worst_ms = 0
    with PgBouncer(admin) as pooler:
        for n in range(args.rounds):
            runners = 2 + n % 2
            round_started = time.monotonic()
            result = run_round(admin, pooler, runners)
            worst_ms = max(worst_ms, int((time.monotonic() - round_started) * 1000))
            found = result.problems("003")
            problems += [f"round {n}: {p}" for p in found]
            redundant += sum(1 for r in result.reports if not r["applied"])
            transactions += result.client_transactions
            say(f"round {n}: {runners} runners, {found or 'ok'}")
    elapsed = time.monotonic() - started
    if problems:
        raise SystemExit("\n".join(problems))
    say(f"{args.rounds} rounds in {elapsed:.0f} s: every revision applied exactly once")
    if not args.no_docs:
        record(
            10,
            {
                "Scenario": "Upgrade runners through a transaction pooler",
                "Scale": f"{args.rounds} rounds x 2-3 concurrent `queueguard upgrade` through "
                "PgBouncer 1.18 (transaction pooling, 4 server connections) on the v0.3 "
                "fixture, 3 clients sharing the pool",
                "Faults injected": f"{redundant} redundant runners; {transactions:,} client "
                "transactions interleaved on the same server connections",
                "Tasks produced": "the v0.3 fixture's rows, carried each round",
                "Lost": 0,
                "Duplicated-and-rejected": "0 (each revision applied once per round; 0 "
                "advisory locks left)",
                "Worst stall": f"{worst_ms / 1000:.2f} s (a whole round)",
                "CI test (small scale)": CI_TEST,
            },
            [
                "Command: `python -m bench.chaos.pooler_runners "
                f"--rounds {args.rounds}` ({elapsed:.0f} s).",
                "",
                "The runner takes its lock inside each revision's transaction "
                "(`pg_advisory_xact_lock`) and re-reads the version row under it; before "
                "that change a session-level lock through the pooler crashed losing runners "
                "(prepared statements), left an advisory lock on an idle pooled server "
                "connection, and let two runners both report `applied: [004]`.",
            ],
        )


if __name__ == "__main__":
    main()
