"""Chaos scenario 3: the upgrade killed at random points.

A 003 database of `--rows` task rows (half in legacy `@auto` queues, so 004 relocates,
stamps directives, repairs counters and fences) is built once and cloned for every attempt.
One uninterrupted `queueguard upgrade` of a clone gives the golden 004 state and the run's
duration T. Then, `--kills` times: clone, start `queueguard upgrade`, SIGKILL it at a moment
drawn uniformly from [0.7 t0, T], t0 being when the uninterrupted run reported 004's first
step (so: late start-up, the runner lock, each step of 004, the commit, the exit), wait
until its server backend is gone, and check:

- the database is wholly at 003 (every table byte-identical to before) or wholly at 004
  (identical to the golden state) — never in between;
- a rerun exits 0 and reaches the golden state.

    python -m bench.chaos.upgrade_kill              # 20 kills, 100k rows
    python -m bench.chaos.upgrade_kill --kills 3 --rows 5000 --no-docs
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.common.commands import QUEUEGUARD
from bench.common.databases import query, scratch_databases
from bench.common.fingerprints import revision, upgrade_state
from bench.common.report import record, say, seconds
from bench.common.v3_database import build_template, first_step_at
from bench.common.workload import rng
from queueguard.pg.scratch import dbname_of

CI_TEST = (
    "`tests/upgrade/migrations/test_crashes.py::test_sigkill_mid_004_leaves_003_or_004_wholly_and_a_rerun_"
    "completes` (one kill, 200k rows; existing)"
)


def wait_backend_gone(dsn: str, timeout: float = 60.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        left = query(
            dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'queueguard-upgrade'",
        )
        if left == [(0,)]:
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"the killed upgrade's backend lingered {timeout}s")


def timed_upgrade(dsn: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    done = subprocess.run(
        [QUEUEGUARD, "upgrade", "--dsn", dsn], capture_output=True, text=True, timeout=600
    )
    return time.monotonic() - started, done


@dataclass
class Attempt:
    delay: float
    phase: str
    state: str
    backend_gone_s: float
    rerun_s: float


@dataclass
class Result:
    rows: int
    full_run_s: float
    attempts: list[Attempt] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "full_run_s": round(self.full_run_s, 2),
            "kills": len(self.attempts),
            "states": dict(Counter(a.state for a in self.attempts)),
            "phases": dict(Counter(a.phase for a in self.attempts)),
            "violations": self.violations[:10],
        }


def kill_once(dsn: str, delay: float) -> tuple[str, float]:
    proc = subprocess.Popen(
        [QUEUEGUARD, "upgrade", "--dsn", dsn],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    progress: list[str] = []

    def follow() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            progress.append(line.strip())

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    reader.join(5)
    steps = [p.split(":")[0] for p in progress if p[:4] in ("003 ", "004 ")]
    if proc.returncode == 0:
        phase = "after exit"
    elif not steps:
        phase = "before 004's first step"
    else:
        phase = f"after {steps[-1]}"
    return phase, wait_backend_gone(dsn)


def run(*, kills: int = 20, rows: int = 100_000, seed: int | None = None, log: Any = say) -> Result:
    rnd = rng(seed)
    with scratch_databases() as databases:
        template = build_template(databases, rows)
        name = dbname_of(template)
        before = upgrade_state(template)
        total = before["tasks"][0]
        reference = databases.create(template=name)
        try:
            locked_s, full_s = first_step_at(reference)
            golden = upgrade_state(reference)
        finally:
            databases.drop(reference)
        assert golden["tasks"][0] == total
        result = Result(total, full_s)
        log(
            f"  {total:,} rows; an uninterrupted upgrade takes {full_s:.2f} s, 004 holds its "
            f"locks from {locked_s:.2f} s"
        )
        # Moments from a little before 004 takes its locks to the process exit: the start-up
        # (imports, connect, runner lock) is covered by the first part of the window.
        window = (locked_s * 0.7, full_s)
        for i in range(kills):
            dsn = databases.create(template=name)
            try:
                delay = rnd.uniform(*window)
                phase, gone = kill_once(dsn, delay)
                found = upgrade_state(dsn)
                state = revision(dsn) if "queueguard_version" in found["tables"] else None
                if state == "003" and found != before:
                    result.violations.append(f"kill {i + 1} ({phase}): at 003 but changed")
                elif state == "004" and found != golden:
                    result.violations.append(f"kill {i + 1} ({phase}): at 004 but not golden")
                elif state not in ("003", "004"):
                    result.violations.append(f"kill {i + 1} ({phase}): revision {state}")
                rerun_s, done = timed_upgrade(dsn)
                if done.returncode != 0 or upgrade_state(dsn) != golden:
                    result.violations.append(
                        f"kill {i + 1}: rerun rc {done.returncode}, not golden"
                    )
                result.attempts.append(Attempt(delay, phase, str(state), gone, rerun_s))
                log(
                    f"  kill {i + 1}/{kills} at {delay:.2f} s ({phase}): {state}; backend gone "
                    f"in {gone:.2f} s; rerun {rerun_s:.2f} s"
                )
            finally:
                databases.drop(dsn)
    return result


def check(result: Result) -> None:
    assert not result.violations, result.violations


def report(result: Result) -> None:
    states = Counter(a.state for a in result.attempts)
    row = {
        "Scenario": "Upgrade killed at random points",
        "Scale": f"003→004 on {result.rows:,} task rows (half relocated), "
        f"uninterrupted run {result.full_run_s:.1f} s",
        "Faults injected": f"{len(result.attempts)} SIGKILLs of `queueguard upgrade` at uniform "
        f"random moments of its run ({states['003']} left it at 003, {states['004']} at 004)",
        "Tasks produced": f"{result.rows:,} rows carried (each kill, each rerun)",
        "Lost": len(result.violations),
        "Duplicated-and-rejected": "0 (row-for-row golden state)",
        "Worst stall": seconds(max(a.backend_gone_s for a in result.attempts))
        + " until the killed run's backend was gone (locks released)",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        "| kill at | phase reached | state after kill | backend gone | rerun |",
        "|---|---|---|---|---|",
    ]
    for a in sorted(result.attempts, key=lambda a: a.delay):
        details.append(
            f"| {a.delay:.2f} s | {a.phase} | {a.state} | {seconds(a.backend_gone_s)} "
            f"| {seconds(a.rerun_s)} |"
        )
    record(3, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 3: {args.kills} SIGKILLs of queueguard upgrade on {args.rows:,} rows")
    result = run(kills=args.kills, rows=args.rows, seed=args.seed)
    say(f"  {result.as_json()}")
    check(result)
    if not args.no_docs:
        report(result)
    say("every kill left the database wholly at 003 or 004; every rerun reached the golden state")


if __name__ == "__main__":
    main()
