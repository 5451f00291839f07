"""Preflight checks on hand-built databases: each code, its severity, objects and samples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.pg.connect import connection
from queueguard.queue_schema import audit
from queueguard.queue_schema.preflight import preflight, render_text

from .preflight_support import (
    AUTO_QUEUE,
    DEFAULT_QUEUE,
    PINNED_QUEUE,
    RUN_AUTO,
    blocking,
    by_code,
    checksums,
    execute,
    payload,
)

ROOT = Path(__file__).resolve().parents[2]


# clean databases -------------------------------------------------------------------------------
def test_clean_v03_has_no_blocking_and_no_warning(v03_db: str) -> None:
    before = checksums(v03_db)
    report = preflight(v03_db)
    assert report.ok and report.revision == "003" and report.target == "004"
    assert report.codes("blocking") == [] and report.codes("warning") == []
    found = by_code(report)
    assert found["schema.pending"].samples == ["004"]
    assert {
        "estimate.rows_rewritten",
        "estimate.rows_relocated",
        "estimate.extra_disk",
        "estimate.wal",
        "estimate.lock_hold",
        "estimate.vacuum_analyze",
    } <= set(found)
    assert found["estimate.rows_rewritten"].count == 6
    assert found["estimate.rows_relocated"].count == 2
    assert found["estimate.rows_relocated"].samples == [
        {"queue": AUTO_QUEUE, "destination": DEFAULT_QUEUE, "rows": 2}
    ]
    assert report.exit_code("warning") == 0
    assert checksums(v03_db) == before


def test_head_database_reports_nothing_to_do(
    head_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = preflight(head_db)
    assert report.ok and report.revision == "004"
    assert report.codes() == ["schema.at_head"]
    assert main(["preflight", "--dsn", head_db]) == 0
    out = capsys.readouterr().out
    assert "schema.at_head" in out and "nothing to do" in out


def test_empty_database_is_not_touched(empty_db: str) -> None:
    report = preflight(empty_db)
    assert report.ok and report.revision is None and report.codes() == ["schema.empty"]
    assert checksums(empty_db) == {"<catalog>": "None"}  # no version table was created


def test_target_at_or_below_the_revision_is_nothing_to_do(v03_db: str) -> None:
    report = preflight(v03_db, target="003")
    assert report.ok and report.codes() == ["schema.at_target"]


def test_clean_v01_checks_its_own_revision(v01_db: str) -> None:
    report = preflight(v01_db)
    assert report.ok and report.revision == "001"
    assert by_code(report)["schema.pending"].samples == ["002", "003", "004"]


def test_v01_legacy_components_block(v01_db: str) -> None:
    execute(
        v01_db,
        "INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data) "
        "VALUES ('', 'orders', 'workflow', 0, '', '{}'), ('ns', 'o', 'workflow', 0, 'v1', '{}')",
    )
    report = preflight(v01_db)
    finding = by_code(report)["data.legacy_components_invalid"]
    assert finding.blocking and finding.count == 2 and len(finding.samples) == 2
    assert {s["version"] for s in finding.samples} == {"", "v1"}


# revision ----------------------------------------------------------------------------------
def test_unknown_revision_blocks(v03_db: str) -> None:
    execute(v03_db, "UPDATE queueguard_version SET version_num = '007'")
    report = preflight(v03_db)
    assert blocking(report) == {"schema.revision_unknown"} and report.revision is None
    assert by_code(report)["schema.revision_unknown"].samples == ["007"]


def test_two_version_rows_block(v03_db: str) -> None:
    execute(v03_db, "INSERT INTO queueguard_version VALUES ('002')")
    assert blocking(preflight(v03_db)) == {"schema.revision_unknown"}


def test_our_tables_without_version_table_block(v03_db: str) -> None:
    execute(v03_db, "DROP TABLE queueguard_version")
    report = preflight(v03_db)
    finding = by_code(report)["schema.unversioned"]
    assert finding.blocking and "tasks" in finding.samples and "task_queues" in finding.samples


# the physical contract -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("defect", "code", "obj", "sample"),
    [
        (
            "ALTER TABLE executions DROP COLUMN deployment_version",
            "schema.column_missing",
            "executions",
            {"column": "deployment_version", "expected": "text", "found": None},
        ),
        (
            "ALTER TABLE task_queues ALTER COLUMN partition TYPE bigint",
            "schema.column_type",
            "task_queues",
            {"column": "partition", "expected": "integer", "found": "bigint"},
        ),
        (
            "ALTER TABLE task_queues DROP CONSTRAINT task_queues_pkey",
            "schema.key_missing",
            "task_queues",
            {"uniqueKey": ["physical_queue"]},
        ),
        (
            "DROP TABLE runtime_protocol",
            "schema.table_missing",
            "runtime_protocol",
            {"table": "runtime_protocol"},
        ),
        (
            "CREATE TABLE queueguard_migrations (revision text)",
            "schema.name_taken",
            "queueguard_migrations",
            {"name": "queueguard_migrations"},
        ),
    ],
)
def test_schema_contract_defects_block_and_skip_data_checks(
    v03_db: str, defect: str, code: str, obj: str, sample: dict[str, object]
) -> None:
    execute(v03_db, defect)
    report = preflight(v03_db)
    assert blocking(report) == {code}
    finding = by_code(report)[code]
    assert finding.object == obj and finding.samples == [sample]
    skipped = by_code(report)["preflight.checks_skipped"]
    assert "003_task_rows.sql" in skipped.samples and "003_estimate_cost.sql" in skipped.samples


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE tasks ADD COLUMN note text",  # extra column
        "CREATE INDEX tasks_created ON tasks (created_at)",  # extra index
        "ALTER TABLE task_queues RENAME CONSTRAINT task_queues_pkey TO tq_key",  # names
        "ALTER TABLE tasks ALTER COLUMN created_at DROP DEFAULT",  # defaults
        "ALTER TABLE task_queues DROP CONSTRAINT task_queues_task_type_check",  # checks
        "CREATE SEQUENCE tasks_id_seq; ALTER SEQUENCE tasks_id_seq OWNED BY tasks.task_id",
        "ALTER TABLE tasks SET (fillfactor = 90)",  # storage
    ],
)
def test_nothing_beyond_the_contract_is_checked(v03_db: str, change: str) -> None:
    """Preflight validates the contract 004 relies on, not a dependency's internals."""
    execute(v03_db, change)
    report = preflight(v03_db)
    assert report.ok, render_text(report)
    assert [c for c in report.codes() if c.startswith("schema.")] == ["schema.pending"]


def test_v01_contract_follows_the_target(v01_db: str) -> None:
    execute(v01_db, "ALTER TABLE executions DROP COLUMN deployment_version")
    assert blocking(preflight(v01_db)) == {"schema.column_missing"}  # 004 needs it
    assert preflight(v01_db, target="003").ok  # 003 does not


# data ----------------------------------------------------------------------------------------
DATA_DEFECTS = [
    (
        "payload not an object",
        f"UPDATE tasks SET data = '[1, 2]' WHERE physical_queue = '{PINNED_QUEUE}'",
        "data.payload_shape",
        "blocking",
        {"queue": PINNED_QUEUE, "taskId": 1},
    ),
    (
        "payload without runId",
        f"UPDATE tasks SET data = data #- '{{task,runId}}' WHERE physical_queue = '{PINNED_QUEUE}'",
        "data.payload_shape",
        "blocking",
        {"queue": PINNED_QUEUE, "taskId": 1},
    ),
    (
        "task without metadata row",
        f"INSERT INTO tasks VALUES ('ns/ghost/workflow/0', 1, '{payload(RUN_AUTO)}')",
        "data.task_without_queue",
        "blocking",
        {"queue": "ns/ghost/workflow/0", "taskId": 1},
    ),
    (
        "non-canonical key",
        "INSERT INTO task_queues VALUES ('ns/%6Frders/workflow/1', 'ns', 'orders', 'workflow', "
        "1, '', 1, 0, 0)",
        "data.queue_key_invalid",
        "blocking",
        "ns/%6Frders/workflow/1",
    ),
    (
        "key disagrees with components",
        "INSERT INTO task_queues VALUES ('ns/orders/workflow/7', 'ns', 'orders', 'activity', "
        "7, '', 1, 0, 0)",
        "data.queue_key_invalid",
        "blocking",
        "ns/orders/workflow/7",
    ),
    (
        "stale last_task_id",
        f"UPDATE task_queues SET last_task_id = 0 WHERE physical_queue = '{PINNED_QUEUE}'",
        "data.stale_last_task_id",
        "warning",
        {"queue": PINNED_QUEUE, "taskId": 1},
    ),
    (
        "rows at or below ack",
        f"UPDATE task_queues SET ack_level = 1 WHERE physical_queue = '{PINNED_QUEUE}'",
        "data.rows_at_or_below_ack",
        "warning",
        {"queue": PINNED_QUEUE, "taskId": 1},
    ),
    (
        "run unknown to History",
        f"DELETE FROM executions WHERE run_id = '{RUN_AUTO}'",
        "data.unknown_run",
        "warning",
        {"queue": AUTO_QUEUE, "taskId": 1},
    ),
]


@pytest.mark.parametrize(
    ("defect", "code", "severity", "sample"),
    [d[1:] for d in DATA_DEFECTS],
    ids=[d[0] for d in DATA_DEFECTS],
)
def test_data_defects(v03_db: str, defect: str, code: str, severity: str, sample: object) -> None:
    execute(v03_db, defect)
    report = preflight(v03_db)
    finding = by_code(report)[code]
    assert finding.severity == severity and sample in finding.samples
    assert report.exit_code() == (1 if severity == "blocking" else 0)
    assert report.exit_code("warning") == 1
    assert finding.message == audit.MESSAGES[code]


def test_samples_are_bounded_but_counts_are_not(v03_db: str) -> None:
    execute(
        v03_db,
        "INSERT INTO tasks SELECT 'ns/ghost/workflow/0', g, '1' FROM generate_series(1, 40) g",
    )
    report = preflight(v03_db, samples=3)
    for code in ("data.payload_shape", "data.task_without_queue"):
        assert by_code(report)[code].count == 40 and len(by_code(report)[code].samples) == 3
    assert all(f.samples == [] for f in preflight(v03_db, samples=0).findings if f.blocking)


# runtime and locks -----------------------------------------------------------------------------
@pytest.fixture
def v03_host(v03_db: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A connected v0.3 runtime host (it announces protocol 3)."""
    conn = psycopg.connect(v03_db, application_name="queueguard/3 host=old-worker-1")
    yield conn
    conn.close()


def test_older_protocol_hosts_warn(
    v03_db: str, v03_host: psycopg.Connection[tuple[object, ...]]
) -> None:
    current = psycopg.connect(v03_db, application_name="queueguard/4 host=new-worker")
    try:
        report = preflight(v03_db)
    finally:
        current.close()
    finding = by_code(report)["runtime.older_hosts"]
    assert finding.severity == "warning" and finding.count == 1
    (sample,) = finding.samples
    assert sample["applicationName"] == "queueguard/3 host=old-worker-1"
    assert sample["protocol"] == 3 and sample["backendStart"] is not None
    assert report.ok and report.exit_code() == 0 and report.exit_code("warning") == 1
    assert main(["preflight", "--dsn", v03_db, "--fail-on", "warning"]) == 1


def test_conflicting_lock_warns_with_its_holder(
    v03_db: str, v03_host: psycopg.Connection[tuple[object, ...]]
) -> None:
    v03_host.execute("LOCK TABLE task_queues IN ROW EXCLUSIVE MODE")  # a write in flight
    report = preflight(v03_db)
    finding = by_code(report)["locks.conflicting_lock"]
    assert finding.severity == "warning" and finding.object == "task_queues"
    (sample,) = finding.samples
    assert sample["mode"] == "RowExclusiveLock" and sample["granted"] is True
    assert sample["applicationName"] == "queueguard/3 host=old-worker-1"
    assert sample["pid"] == v03_host.info.backend_pid
    assert report.ok


def test_long_transaction_file_as_a_dba_runs_it(
    v03_db: str, v03_host: psycopg.Connection[tuple[object, ...]]
) -> None:
    """The audit file pasted into a session, with the threshold lowered to 0 s."""
    v03_host.execute("SELECT count(*) FROM tasks")  # ACCESS SHARE held until it ends
    (query,) = [q for q in audit.audit_queries() if q.name == "001_locks_long_transactions.sql"]
    with connection(v03_db) as conn, conn.cursor() as cur:
        cur.execute("BEGIN READ ONLY")
        cur.execute("SET LOCAL queueguard.long_transaction_s = '0'")
        cur.execute("SELECT pg_sleep(0.05)")
        (finding,) = audit.run(cur, query)
        cur.execute("ROLLBACK")
    assert finding.code == "locks.long_transaction" and finding.object == "tasks"
    assert finding.samples[0]["pid"] == v03_host.info.backend_pid
    assert finding.samples[0]["ageSeconds"] >= 0
