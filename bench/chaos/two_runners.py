"""Chaos scenario 8: several upgrade runners at once against one database.

`--rounds` times, a clone of a 003 database of `--rows` rows gets `--runners` concurrent
`queueguard upgrade --json` processes (two operators, or a deploy job retried), started a
random 0–300 ms apart. Exactly one must migrate; the others wait on the runner lock (a
session advisory lock) and then report the database already at head (exit 0, nothing
applied) — never two migrating, never a half-applied revision; the database ends
row-for-row in the golden state of an uninterrupted upgrade.

Then the bounded wait: while one runner holds the lock, a runner whose wait is shorter than
the migration fails cleanly (LockTimeout "another queueguard upgrade held the runner lock",
exit 1) and changes nothing.

    python -m bench.chaos.two_runners              # 10 rounds x 3 runners
    python -m bench.chaos.two_runners --rounds 2 --rows 5000 --no-docs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.common.commands import QUEUEGUARD
from bench.common.databases import scratch_databases
from bench.common.fingerprints import revision, upgrade_state
from bench.common.report import record, say, seconds
from bench.common.v3_database import build_template
from bench.common.workload import rng
from queueguard.errors import LockTimeout
from queueguard.pg.scratch import dbname_of
from queueguard.queue_schema.runner import upgrade

CI_TEST = (
    "`tests/upgrade/migrations/test_concurrent_runners.py::"
    "test_two_runners_at_once_exactly_one_migrates` (existing, empty database); "
    "`tests/test_reliability_upgrade.py::test_a_runner_that_waits_too_long_fails_cleanly`"
)


@dataclass
class Result:
    rows: int
    runners: int
    rounds: int = 0
    applied: Counter[str] = field(default_factory=Counter)
    exit_codes: Counter[int] = field(default_factory=Counter)
    worst_wait_s: float = 0.0
    bounded_wait: str = ""
    violations: list[str] = field(default_factory=list)


def run(
    *,
    rounds: int = 10,
    runners: int = 3,
    rows: int = 100_000,
    seed: int | None = None,
    log: Any = say,
) -> Result:
    rnd = rng(seed)
    result = Result(rows, runners)
    with scratch_databases() as databases:
        name = dbname_of(build_template(databases, rows))
        reference = databases.create(template=name)
        upgrade(reference, progress=False)
        golden = upgrade_state(reference)
        databases.drop(reference)
        for i in range(rounds):
            dsn = databases.create(template=name)
            try:
                procs = []
                for _ in range(runners):
                    procs.append(
                        (
                            time.monotonic(),
                            subprocess.Popen(
                                [QUEUEGUARD, "upgrade", "--dsn", dsn, "--json"],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                text=True,
                            ),
                        )
                    )
                    time.sleep(rnd.uniform(0, 0.3))
                reports = []
                for began, proc in procs:
                    out, err = proc.communicate(timeout=300)
                    took = time.monotonic() - began
                    result.exit_codes[proc.returncode] += 1
                    if proc.returncode != 0 or "Traceback" in err:
                        result.violations.append(
                            f"round {i + 1}: rc {proc.returncode}: {err[-500:]}"
                        )
                        continue
                    doc = json.loads(out)
                    reports.append(doc)
                    result.applied[",".join(doc["applied"]) or "nothing (already at head)"] += 1
                    if not doc["applied"]:
                        result.worst_wait_s = max(result.worst_wait_s, took)
                migrated = [r for r in reports if r["applied"]]
                if len(migrated) != 1 or migrated[0]["applied"] != ["004"]:
                    result.violations.append(f"round {i + 1}: {len(migrated)} runners migrated")
                if any(r["after"] != "004" for r in reports):
                    result.violations.append(f"round {i + 1}: a runner reported {reports}")
                if upgrade_state(dsn) != golden:
                    result.violations.append(f"round {i + 1}: not the golden state")
                result.rounds += 1
                log(f"  round {i + 1}/{rounds}: {[r['applied'] for r in reports]}")
            finally:
                databases.drop(dsn)
        # The bounded wait: the lock is held (as by a long upgrade); a short-waiting runner fails.
        dsn = databases.create(template=name)
        try:
            result.bounded_wait = bounded_wait(dsn)
        except AssertionError as exc:
            result.violations.append(f"bounded wait: {exc}")
    return result


def bounded_wait(dsn: str, wait_s: float = 1.0) -> str:
    """Hold the runner lock from another session; an upgrade that may wait `wait_s` fails
    with LockTimeout after about that long and changes nothing; then it goes through."""
    from queueguard.engine.apply import runner_lock
    from queueguard.pg.connect import connect

    # Another runner in the middle of a revision: the transaction-scoped runner lock, held
    # in an open transaction.
    holder = connect(dsn, application_name="queueguard-upgrade")
    try:
        runner_lock.take(holder, 1.0)
        before = upgrade_state(dsn)
        started = time.monotonic()
        try:
            upgrade(dsn, progress=False, runner_wait_s=wait_s)
            raise AssertionError("a second runner migrated while the lock was held")
        except LockTimeout as exc:
            message = str(exc)
        waited = time.monotonic() - started
        assert "another queueguard upgrade held the runner lock" in message, message
        assert wait_s <= waited < wait_s + 5, waited
        assert upgrade_state(dsn) == before and revision(dsn) == "003"
    finally:
        holder.close()
    report = upgrade(dsn, progress=False, runner_wait_s=wait_s)
    assert report.applied == ["004"], report
    return f"LockTimeout after {waited:.1f} s (wait {wait_s:.0f} s), nothing changed; then applied"


def check(result: Result) -> None:
    assert not result.violations, result.violations


def report(result: Result) -> None:
    row = {
        "Scenario": "Two (or more) upgrade runners at once",
        "Scale": f"{result.rounds} rounds x {result.runners} concurrent `queueguard upgrade` on "
        f"{result.rows:,} rows",
        "Faults injected": f"{result.rounds * (result.runners - 1)} redundant runners + 1 runner "
        "held past its bounded wait",
        "Tasks produced": f"{result.rows:,} rows carried per round",
        "Lost": len(result.violations),
        "Duplicated-and-rejected": "0 (row-for-row golden state every round)",
        "Worst stall": f"{seconds(result.worst_wait_s)} (a redundant runner's wait, then "
        "'already at head')",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        f"- what the runners applied: {dict(result.applied)}",
        f"- exit codes: {dict(result.exit_codes)}",
        f"- bounded wait: {result.bounded_wait}",
    ]
    record(8, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runners", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 8: {args.rounds} rounds of {args.runners} concurrent upgrade runners")
    result = run(rounds=args.rounds, runners=args.runners, rows=args.rows, seed=args.seed)
    say(
        f"  applied {dict(result.applied)}; exit codes {dict(result.exit_codes)}; "
        f"{result.bounded_wait}; violations {result.violations}"
    )
    check(result)
    if not args.no_docs:
        report(result)
    say("exactly one runner migrated each time; the others reported head or failed cleanly")


if __name__ == "__main__":
    main()
