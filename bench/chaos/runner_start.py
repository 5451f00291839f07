"""Chaos scenario 13: two upgrade runners start at once on an empty database, many times.

`--rounds` times, a fresh empty database gets two `queueguard upgrade --json` processes
started together (a deploy job retried while the first still runs). The runner lock is taken
per revision, so the two may take turns; what must hold every round: both exit 0 with no
traceback, every revision is applied by exactly one of them and the other reports it skipped,
both end at head, and the database is row-for-row (catalog and ledger included) what one
runner alone makes of an empty database.

This is the stress behind a rare CI failure of
`tests/upgrade/migrations/test_concurrent_runners.py::test_two_runners_at_once_exactly_one_migrates`:
a runner read 004's relocation backlog before the revision, locking `tasks` then
`task_queues` (the reverse of 004's order) and deadlocking with the other runner's
`LOCK TABLE`s. The runner now reads no table outside a revision.

    python -m bench.chaos.runner_start               # 200 rounds
    python -m bench.chaos.runner_start --rounds 20 --no-docs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.common.commands import QUEUEGUARD
from bench.common.databases import scratch_databases
from bench.common.fingerprints import revision, upgrade_state
from bench.common.report import record, say, seconds
from queueguard import revisions
from queueguard.queue_schema.runner import upgrade

CI_TEST = (
    "`tests/upgrade/migrations/test_concurrent_runners.py` (two runners on an empty database; "
    "a runner starting while another is between 004's LOCK TABLEs cannot deadlock)"
)


@dataclass
class Result:
    rounds: int = 0
    #: how the revisions were shared, e.g. "001,002,003,004 | -" (one did all) or turns
    shares: Counter[str] = field(default_factory=Counter)
    exit_codes: Counter[int] = field(default_factory=Counter)
    slowest_s: float = 0.0
    violations: list[str] = field(default_factory=list)


def run(*, rounds: int = 200, log: Callable[[str], None] = say) -> Result:
    every = list(revisions.packaged().ids)
    head = every[-1]
    result = Result()
    with scratch_databases() as databases:
        reference = databases.create()
        upgrade(reference, progress=False)
        golden = upgrade_state(reference)
        databases.drop(reference)
        for i in range(rounds):
            dsn = databases.create()
            try:
                problems = _round(dsn, every, head, result)
                if not problems and upgrade_state(dsn) != golden:
                    problems.append("not what one runner makes of an empty database")
                result.violations += [f"round {i + 1}: {p}" for p in problems]
                result.rounds += 1
                if (i + 1) % 20 == 0:
                    log(f"  {i + 1}/{rounds} rounds, {len(result.violations)} violations")
            finally:
                databases.drop(dsn)
    return result


def _round(dsn: str, every: list[str], head: str, result: Result) -> list[str]:
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [QUEUEGUARD, "upgrade", "--dsn", dsn, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    result.slowest_s = max(result.slowest_s, time.monotonic() - started)
    problems = []
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        result.exit_codes[proc.returncode] += 1
        if proc.returncode != 0 or "Traceback" in err:
            problems.append(f"rc {proc.returncode}: {err.strip()}")  # the whole stderr
        else:
            reports.append(json.loads(out))
    if problems:
        return problems
    applied = sorted(r for report in reports for r in report["applied"])
    if applied != every:
        problems.append(f"revisions applied {applied}, expected each of {every} once")
    for mine, other in (reports, reports[::-1]):
        if not set(mine["skipped"]) <= set(other["applied"]):
            problems.append(f"skipped {mine['skipped']} but the other applied {other['applied']}")
    if [r["after"] for r in reports] != [head, head] or revision(dsn) != head:
        problems.append(f"not at {head}: {[r['after'] for r in reports]}")
    shares = sorted(",".join(r["applied"]) or "-" for r in reports)
    result.shares[" | ".join(reversed(shares))] += 1
    return problems


def check(result: Result) -> None:
    assert not result.violations, result.violations


def report(result: Result) -> None:
    row = {
        "Scenario": "Two upgrade runners start at once on an empty database",
        "Scale": f"{result.rounds} rounds x 2 concurrent `queueguard upgrade`, empty database",
        "Faults injected": f"{result.rounds} redundant runners started together",
        "Tasks produced": "0 (schema and ledger only)",
        "Lost": len(result.violations),
        "Duplicated-and-rejected": "0 (each revision applied once; the catalog equals one "
        "runner's every round)",
        "Worst stall": f"{seconds(result.slowest_s)} (a round, both runners)",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        f"- command: `python -m bench.chaos.runner_start --rounds {result.rounds}`",
        "- how the two runners shared the revisions (applied by one | by the other): "
        + ", ".join(f"{share}: {n}" for share, n in result.shares.most_common()),
        f"- exit codes: {dict(result.exit_codes)}",
        f"- violations: {len(result.violations)}"
        + (f" (first: {result.violations[0]})" if result.violations else ""),
    ]
    record(13, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 13: {args.rounds} rounds of two runners starting on an empty database")
    result = run(rounds=args.rounds)
    say(
        f"  shares {dict(result.shares)}; exit codes {dict(result.exit_codes)}; "
        f"violations {result.violations}"
    )
    if not args.no_docs:
        report(result)
    check(result)
    say("every round: both exited 0, each revision applied once, one runner's end state")


if __name__ == "__main__":
    main()
