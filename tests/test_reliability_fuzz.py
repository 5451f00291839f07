"""Reliability, CI scale: hostile input (docs/reliability.md scenario 7).

Strategies and properties live in `bench/chaos/fuzz/` (the full-scale run,
`python -m bench.chaos.hostile_input`, uses them too): every input is accepted correctly or
rejected with a typed error, and nothing is partially written. 1,000 examples per pure target; 100
where each example touches a database or runs the CLI in-process; the spawned-CLI target
runs 20 here and 200 in the bench.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.chaos.fuzz.cli_inputs import command_lines, fixture_names
from bench.chaos.fuzz.cli_targets import CliTarget, FixtureTarget, run_main
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
from queueguard import snapshot
from queueguard.errors import SnapshotError, UsageError
from queueguard.pg.targets import parse_duration_ms
from queueguard.queue_schema.preflight import preflight
from queueguard.queue_schema.runner import upgrade

PURE = settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
DB = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=list(HealthCheck),  # one database per test, shared by its examples
)


@PURE
@given(key_inputs)
@pytest.mark.slow
def test_queue_key_decoder(key: str) -> None:
    check_key(key)


@PURE
@given(snapshot_inputs)
@pytest.mark.slow
def test_snapshot_validation(raw: str | bytes) -> None:
    check_snapshot(raw)


@pytest.mark.slow
def test_snapshot_importer_on_postgresql(head_db: str) -> None:
    # an empty head database, as `snapshot import` leaves it before loading
    target = Importer(head_db)
    try:

        @DB
        @given(st.one_of(documents().map(dump), mutated_documents().map(dump)))
        def prop(raw: str) -> None:
            target.check(raw)

        prop()
    finally:
        target.close()


@pytest.mark.slow
def test_sql_injection_round_trips_as_data(head_db: str) -> None:
    target = Injection(head_db)
    try:

        @DB
        @given(components, names, storable_json)
        def prop(comp: Any, workflow: str, data: Any) -> None:
            target.check(comp, workflow, data)

        prop()
    finally:
        target.close()


@pytest.mark.slow
def test_fixture_loading_from_the_cli(pg_admin_dsn: str) -> None:
    target = FixtureTarget(pg_admin_dsn)
    try:

        @DB
        @given(fixture_names, st.sampled_from(["empty", "empty", "loaded", "foreign"]))
        def prop(name: str, kind: str) -> None:
            target.check(name, kind)

        prop()
    finally:
        target.close()


@pytest.mark.parametrize(("spawn", "examples"), [(False, 100), (True, 20)])
@pytest.mark.slow
def test_cli_arguments(pg_admin_dsn: str, tmp_path: Path, spawn: bool, examples: int) -> None:
    target = CliTarget(pg_admin_dsn, tmp_path / "files", spawn)
    try:

        @settings(DB, max_examples=examples)
        @given(command_lines(target.dsn, target.files))
        def prop(argv: list[str]) -> None:
            target.check(argv)

        prop()
    finally:
        target.close()


# --- regressions: what the fuzz found (fixed) ----------------------------------------------------
def _golden4() -> dict[str, Any]:
    raw = json.loads(snapshot_path().read_text())
    return snapshot.upgrade_document(raw)


def snapshot_path() -> Path:
    from queueguard.resources import fixtures_dir

    return fixtures_dir() / "snapshots" / "v3_golden.json"


def _task_queue(doc: dict[str, Any]) -> dict[str, Any]:
    return next(q for q in doc["queues"] if q["tasks"])


UNSTORABLE = {
    "NUL in task data": lambda d: _task_queue(d)["tasks"][0]["data"].__setitem__("x", "a\x00b"),
    "NUL in a data key": lambda d: _task_queue(d)["tasks"][0]["data"].__setitem__("k\x00", 1),
    "lone surrogate": lambda d: d["history"]["executions"][0].__setitem__("workflowId", "\ud800"),
    "rangeId beyond bigint": lambda d: d["queues"][0].__setitem__("rangeId", 2**63),
    "event id beyond bigint": lambda d: d["history"]["scheduledTasks"][0].__setitem__(
        "scheduledEventId", -(2**63) - 1
    ),
    "protocol beyond int": lambda d: d["protocol"].__setitem__("max", 2**31),
    "startedAt not a timestamp": lambda d: d["history"]["scheduledTasks"][0].__setitem__(
        "startedAt", "not a date"
    ),
    "startedAt without a zone": lambda d: d["history"]["scheduledTasks"][0].__setitem__(
        "startedAt", "2026-01-01T00:00:00"
    ),
    "runId a list": lambda d: d["history"]["scheduledTasks"][0].__setitem__("runId", []),
    "user data version beyond bigint": lambda d: d["userData"].append(
        {"namespace": "a", "taskQueue": "b", "version": 2**63, "data": {}}
    ),
}


@pytest.mark.parametrize("case", sorted(UNSTORABLE))
def test_snapshot_values_postgresql_cannot_hold_are_rejected(case: str) -> None:
    doc = _golden4()
    UNSTORABLE[case](doc)
    with pytest.raises(SnapshotError):
        snapshot.parse(json.dumps(doc))


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"formatVersion": NaN}',
        '{"formatVersion": 4, "x": Infinity}',
    ],
)
def test_snapshot_parse_rejects_deep_or_non_json_numbers(text: str) -> None:
    with pytest.raises(SnapshotError):
        snapshot.parse(text)


def test_negative_retries_and_huge_durations_are_usage_errors(empty_db: str) -> None:
    with pytest.raises(UsageError, match="retries"):
        upgrade(empty_db, retries=-1, progress=False)
    with pytest.raises(UsageError, match="too long"):
        parse_duration_ms("99999999999s")
    assert parse_duration_ms("2147483647ms") == 2**31 - 1
    code, _, err = run_main(["preflight", "--dsn", empty_db, "--lock-timeout", "9999999999s"])
    assert code == 2 and "too long" in err
    # each fits, but preflight's idle timeout is their sum (found by the CLI fuzz)
    argv = ["preflight", "--dsn", empty_db, "--statement-timeout", "2147483647ms"]
    code, _, err = run_main(argv)
    assert code == 2 and "together may not exceed" in err
    with pytest.raises(UsageError):
        preflight(empty_db, lock_timeout_ms=2**40)


@pytest.mark.slow
def test_lint_survives_a_deeply_nested_file(tmp_path: Path) -> None:
    """Found by the CLI fuzz (RecursionError in sqlglot); fixed in lint/model.py."""
    deep = tmp_path / "deep.sql"
    deep.write_text("[" * 50_000 + "]" * 50_000 + "\n")  # not SQL at all, deeply nested
    code, _, err = run_main(["lint", str(deep)])
    assert code in (1, 2) and "Traceback" not in err
