"""Chaos scenario 7: hostile input (hypothesis).

Targets and their property — every input is either accepted correctly or rejected with a
typed error (a `QueueguardError`), and a rejection writes nothing:

- queue-key decoder (pure): any text, and mutations of valid keys (lowercase or needless
  escapes, leading zeros, empty `@`, stray separators…): decode either returns components
  that encode back to the very same key, or raises InvalidQueueKey;
- snapshot validation (pure): arbitrary JSON, raw bytes, valid format-3/4 documents built
  from hostile names, and mutations of them and of the golden snapshot: `snapshot.parse`
  either returns a document that imports into the memory store and re-exports to itself, or
  raises SnapshotError;
- snapshot importer (database): every document the validator accepts loads into an empty
  head database (the CLI's `snapshot import` path) and exports back equal; the load runs in a
  transaction that is rolled back, so a failure would leave nothing behind (checked);
- SQL injection (database): namespaces, task queue names, versions, workflow ids and user
  data built from injection strings round-trip as data through the runtime (load, append,
  read, checkpoint, user data CAS) and `inspect`; the schema is intact afterwards;
- fixture loading (CLI, database): `fixtures load NAME` with hostile names against empty,
  loaded and foreign databases: loads a shipped fixture into an empty database, or refuses
  (exit 1/2) and changes nothing;
- CLI arguments: random command lines (hostile durations, revisions, counts, DSNs, paths):
  exit 0, 1 or 2, never a traceback, and a database that a failed command touched is unchanged.

    python -m bench.chaos.hostile_input  # 2,000 / 200 examples, writes docs
    python -m bench.chaos.hostile_input --pure 200 --db 50 --cli 20 --no-docs
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from bench.chaos.fuzz.cli_inputs import command_lines, fixture_names
from bench.chaos.fuzz.cli_targets import CliTarget, FixtureTarget
from bench.chaos.fuzz.explore import Result, TargetResult, explore
from bench.chaos.fuzz.hostile_names import components, names
from bench.chaos.fuzz.injection_target import Injection
from bench.chaos.fuzz.queue_keys import check_key, key_inputs
from bench.chaos.fuzz.snapshot_documents import (
    documents,
    dump,
    mutated_documents,
    snapshot_inputs,
    storable_json,
)
from bench.chaos.fuzz.snapshot_targets import Importer, check_snapshot
from bench.common.databases import admin_dsn, scratch_database
from bench.common.report import record, say

CI_TEST = (
    "`tests/test_reliability_fuzz.py` (1,000 examples per pure target, 100 per database and "
    "in-process CLI target, 20 spawned CLI runs) + regressions of what it found"
)


def run(*, pure: int = 2000, db: int = 200, cli_spawned: int = 200, log: Any = say) -> Result:
    result = Result()

    def add(target: TargetResult) -> None:
        result.targets.append(target)
        log(
            f"  {target.name}: {target.examples} examples in {target.seconds:.0f} s "
            f"{dict(target.outcomes)}"
            + (f" FAILED {target.failure[:300]}" if target.failure else "")
        )

    add(explore("queue-key decoder", key_inputs, check_key, pure))
    add(explore("snapshot validation", snapshot_inputs, check_snapshot, pure))
    admin = admin_dsn()
    with scratch_database(admin) as dsn:
        importer = Importer(dsn)
        try:
            importer_inputs = st.one_of(documents().map(dump), mutated_documents().map(dump))
            add(explore("snapshot importer (PostgreSQL)", importer_inputs, importer.check, db))
        finally:
            importer.close()
    with scratch_database(admin) as dsn:
        injection = Injection(dsn)
        try:
            add(
                explore(
                    "SQL injection round trip",
                    st.tuples(components, names, storable_json),
                    injection.check,
                    db,
                    star=True,
                    shrink=False,
                )
            )
        finally:
            injection.close()
    fixtures = FixtureTarget(admin)
    try:
        kinds = st.sampled_from(["empty", "empty", "loaded", "foreign"])
        add(
            explore(
                "fixture loading (CLI)",
                st.tuples(fixture_names, kinds),
                fixtures.check,
                db,
                star=True,
                shrink=False,
            )
        )
    finally:
        fixtures.close()
    folder = Path(tempfile.mkdtemp(prefix="qg-chaos-fuzz-"))
    for spawn, count in ((False, db), (True, cli_spawned)):
        target = CliTarget(admin, folder, spawn)
        try:
            label = "CLI arguments (spawned)" if spawn else "CLI arguments (in-process main)"
            add(
                explore(
                    label,
                    command_lines(target.dsn, target.files),
                    target.check,
                    count,
                    shrink=False,
                )
            )
        finally:
            target.close()
    shutil.rmtree(folder, ignore_errors=True)
    return result


def report(result: Result, scale: str) -> None:
    total = sum(t.examples for t in result.targets)
    refusals = ("rejected", "rejected-by-database", "refused", "exit 1", "exit 2")
    rejected = sum(n for t in result.targets for o, n in t.outcomes.items() if o in refusals)
    row = {
        "Scenario": "Hostile input (fuzz)",
        "Scale": scale,
        "Faults injected": f"{total:,} hostile inputs over {len(result.targets)} targets",
        "Tasks produced": "n/a (inputs, not tasks)",
        "Lost": "0 partial writes",
        "Duplicated-and-rejected": "n/a",
        "Worst stall": "n/a",
        "CI test (small scale)": CI_TEST,
    }
    details = ["| target | examples | outcomes | time |", "|---|---|---|---|"]
    for t in result.targets:
        outcomes = ", ".join(f"{k} {v:,}" for k, v in t.outcomes.most_common())
        details.append(f"| {t.name} | {t.examples:,} | {outcomes} | {t.seconds:.0f} s |")
    details.append("")
    details.append(
        f"Untyped errors, tracebacks or partial writes: {len(result.failures)}; inputs "
        f"rejected or refused with a typed error / exit 1 or 2: {rejected:,}. `unpassable`: "
        "a NUL in a command-line argument, which no process can receive."
    )
    record(7, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pure", type=int, default=2000, help="examples per pure target")
    parser.add_argument("--db", type=int, default=200, help="examples per database target")
    parser.add_argument("--cli", type=int, default=200, help="spawned CLI examples")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 7: fuzz, {args.pure} / {args.db} / {args.cli} examples")
    result = run(pure=args.pure, db=args.db, cli_spawned=args.cli)
    assert not result.failures, "\n".join(result.failures)
    if not args.no_docs:
        report(
            result,
            f"{args.pure:,} examples per pure target, {args.db} per database target, "
            f"{args.cli} spawned CLI runs",
        )
    say("every input accepted correctly or rejected with a typed error; nothing partially written")


if __name__ == "__main__":
    main()
