"""The static compatibility matrix (queueguard.queue_schema.compat): legacy statements ×
revisions."""

from __future__ import annotations

from pathlib import Path

import pytest

from queueguard import revisions
from queueguard.errors import ConnectionFailed, UsageError
from queueguard.pg.dsn import params as connect_params
from queueguard.queue_schema import compat, verify
from queueguard.queue_schema.legacy import (
    DRIVERS,
    WORKERS,
    Driver,
    V03Worker,
    all_catalogs,
    load_catalog,
    parse_catalog,
)
from queueguard.queue_schema.verify import report as verify_report

MATCHING_WRITES = {"load", "append", "checkpoint", "delete", "spool"}

#: The matrix as it must stay (worker, statement) -> verdicts on 001, 002, 003, 004.
EXPECTED = {
    ("v0.2", "spool"): ("runs", "runs", "unresolvable", "unresolvable"),
    ("v0.2", "read"): ("runs", "runs", "unresolvable", "unresolvable"),
    ("v0.2", "delete"): ("runs", "runs", "unresolvable", "unresolvable"),
    ("v0.2", "get_user_data"): ("unresolvable", "runs", "runs", "runs"),
    ("v0.2", "insert_user_data"): ("unresolvable", "runs", "runs", "runs"),
    ("v0.2", "update_user_data"): ("unresolvable", "runs", "runs", "runs"),
    ("v0.3", "handshake"): ("unresolvable", "unresolvable", "runs", "fenced"),
    ("v0.3", "load"): ("unresolvable", "unresolvable", "runs", "fenced"),
    ("v0.3", "append"): ("unresolvable", "unresolvable", "runs", "fenced"),
    ("v0.3", "current_range"): ("unresolvable", "unresolvable", "runs", "runs"),
    ("v0.3", "read"): ("unresolvable", "unresolvable", "runs", "runs"),
    ("v0.3", "checkpoint"): ("unresolvable", "unresolvable", "runs", "fenced"),
    ("v0.3", "record_start"): ("runs", "runs", "runs", "runs"),
}


@pytest.fixture(scope="module")
def matrix(queueguard_server: str) -> compat.Matrix:
    return compat.matrix_on_server(queueguard_server)


@pytest.fixture(scope="module")
def views(queueguard_server: str) -> dict[str, compat.SchemaView]:
    from queueguard.pg import scratch
    from queueguard.queue_schema.runner import upgrade

    found = {}
    for revision in revisions.packaged().ids:
        dsn = scratch.create_database(queueguard_server)
        try:
            upgrade(dsn, to=revision, progress=False)
            found[revision] = compat.schema_view(dsn)
        finally:
            scratch.drop_database(queueguard_server, scratch.dbname_of(dsn))
    return found


# the property ------------------------------------------------------------------------------
def test_no_older_worker_can_write_matching_state_on_head(matrix: compat.Matrix) -> None:
    assert matrix.violations() == []
    head = matrix.head
    for row in matrix.rows:
        at_head = matrix.cell(row.worker, row.statement, head)
        if set(row.writes) & compat.MATCHING_TABLES:
            assert at_head.verdict in {"unresolvable", "fenced"}, at_head
        if row.role == "handshake":
            assert at_head.verdict == "fenced", at_head
            assert "refuses protocol 3" in at_head.reason and "[4, 4]" in at_head.reason


def test_every_statement_resolves_and_runs_on_its_own_revision(matrix: compat.Matrix) -> None:
    for row in matrix.rows:
        own = matrix.cell(row.worker, row.statement, row.own_revision)
        assert own.verdict == "runs", own


def test_every_matching_write_of_the_catalogs_is_classified_as_one(matrix: compat.Matrix) -> None:
    writers = {r.statement for r in matrix.rows if set(r.writes) & compat.MATCHING_TABLES}
    assert writers == MATCHING_WRITES
    v03_handshakes = [r for r in matrix.rows if r.worker == "v0.3" and r.role == "handshake"]
    assert [r.statement for r in v03_handshakes] == ["handshake"]


def test_the_matrix_is_as_expected(matrix: compat.Matrix) -> None:
    assert matrix.revisions == list(revisions.packaged().ids)
    actual = {
        (r.worker, r.statement): tuple(
            matrix.cell(r.worker, r.statement, rev).verdict for rev in matrix.revisions
        )
        for r in matrix.rows
    }
    assert actual == EXPECTED


def test_fenced_cells_say_why(matrix: compat.Matrix) -> None:
    assert "04 (05_fence.sql) bumped every range_id" in matrix.cell("v0.3", "append", "004").reason
    assert "handshake" in matrix.cell("v0.3", "load", "004").reason
    assert "tasks.namespace" in matrix.cell("v0.2", "spool", "004").reason
    assert "delivery_id" in matrix.cell("v0.2", "delete", "003").reason


def test_render_and_json(matrix: compat.Matrix) -> None:
    text = matrix.render()
    assert "worker statement" in text.splitlines()[1]
    assert "v0.3   append" in text and "fenced" in text
    assert text.rstrip().endswith("no released worker can write Matching state on head")
    doc = matrix.as_json()
    assert doc["safe"] is True and doc["violations"] == []
    cells = {(s["worker"], s["statement"]): s["cells"] for s in doc["statements"]}
    assert cells[("v0.3", "handshake")]["004"]["verdict"] == "fenced"


# the schema views the matrix is built from -----------------------------------------------------
def test_schema_views_come_from_migrated_databases(views: dict[str, compat.SchemaView]) -> None:
    assert [v.revision for v in views.values()] == list(revisions.packaged().ids)
    assert "delivery_id" in views["002"].columns["tasks"]
    assert "delivery_id" not in views["003"].columns["tasks"]
    assert views["002"].protocol is None
    assert views["003"].protocol == (3, 3)
    assert views["004"].protocol == (4, 4)


def test_range_bumps_are_read_from_the_migration_sql(tmp_path: Path) -> None:
    assert compat.range_bumps() == {"004": "05_fence.sql"}
    (tmp_path / "009").mkdir()
    (tmp_path / "009" / "01.sql").write_text(
        "UPDATE task_queues SET range_id = range_id + 1 WHERE version = 'auto';\n"
        "UPDATE task_queues SET ack_level = 0;\n"
    )
    assert compat.range_bumps(tmp_path) == {}  # a partial bump fences nobody for sure
    (tmp_path / "009" / "02.sql").write_text("UPDATE task_queues SET range_id = range_id + 2;")
    assert compat.range_bumps(tmp_path) == {"009": "02.sql"}


# the resolver and the shape analysis, on synthetic statements -------------------------------
COLUMNS = {
    "tasks": frozenset({"physical_queue", "task_id", "data", "created_at"}),
    "task_queues": frozenset({"physical_queue", "range_id", "ack_level", "last_task_id"}),
    "executions": frozenset({"run_id", "status"}),
    "scheduled_tasks": frozenset({"run_id", "scheduled_event_id", "started_at"}),
}


@pytest.mark.parametrize(
    ("sql", "missing"),
    [
        ("SELECT task_id FROM tasks", []),
        ("SELECT delivery_id FROM tasks", ["column tasks.delivery_id"]),
        ("SELECT t.nope FROM tasks t", ["column tasks.nope"]),
        ("SELECT x.task_id FROM tasks t", ["relation x"]),
        ("SELECT 1 FROM runtime_protocol", ["table runtime_protocol"]),
        ("INSERT INTO tasks (namespace, data) VALUES (:a, :b)", ["column tasks.namespace"]),
        ("UPDATE task_queues SET version = :v WHERE range_id = :r", ["column task_queues.version"]),
        ("DELETE FROM tasks WHERE delivery_id = :d", ["column tasks.delivery_id"]),
        ("SELECT 1 FROM scheduled_tasks s JOIN executions e USING (run_id)", []),
        (
            "SELECT 1 FROM scheduled_tasks s JOIN executions e USING (workflow_id)",
            ["column executions.workflow_id"],
        ),
        ("WITH c AS (SELECT task_id AS x FROM tasks) SELECT x FROM c", []),
        ("WITH c AS (SELECT task_id AS x FROM tasks) SELECT c.y FROM c", ["column c.y"]),
        (
            "WITH u AS (UPDATE task_queues SET ack_level = 1 RETURNING physical_queue) "
            "DELETE FROM tasks t USING u WHERE t.physical_queue = u.physical_queue",
            [],
        ),
        ("SELECT task_id AS n FROM tasks ORDER BY n", []),
        ("SELECT s.started_at FROM scheduled_tasks s FOR UPDATE OF s", []),
    ],
)
def test_unresolved(sql: str, missing: list[str]) -> None:
    assert compat.unresolved(sql, COLUMNS) == missing


@pytest.mark.parametrize(
    ("sql", "role"),
    [
        ("SELECT min_protocol, max_protocol FROM runtime_protocol", "handshake"),
        ("SELECT task_id FROM tasks", "read"),
        (
            "UPDATE task_queues SET ack_level = :a WHERE physical_queue = :k AND range_id = :r",
            "range-checked write",
        ),
        ("UPDATE task_queues SET ack_level = :a WHERE physical_queue = :k", "unchecked write"),
        ("UPDATE task_queues SET ack_level = :a WHERE range_id > :r", "unchecked write"),
        ("UPDATE task_queues SET ack_level = :a WHERE range_id = :r OR true", "unchecked write"),
        ("INSERT INTO tasks (physical_queue, task_id, data) VALUES (:k, 1, :d)", "unchecked write"),
        (
            "WITH a AS (UPDATE task_queues SET last_task_id = last_task_id + 1 "
            "WHERE physical_queue = :k AND range_id = :r RETURNING last_task_id) "
            "INSERT INTO tasks (physical_queue, task_id, data) SELECT :k, last_task_id, :d FROM a",
            "range-checked write",
        ),
        (
            "WITH a AS (SELECT last_task_id FROM task_queues WHERE range_id = :r) "
            "INSERT INTO tasks (physical_queue, task_id, data) SELECT :k, last_task_id, :d FROM a",
            "unchecked write",  # a read does not lock out a concurrent takeover
        ),
        (
            "WITH s AS (UPDATE task_queues SET ack_level = 1 WHERE range_id = :r "
            "RETURNING physical_queue) DELETE FROM tasks t USING s "
            "WHERE t.physical_queue = s.physical_queue",
            "range-checked write",
        ),
        ("UPDATE scheduled_tasks SET started_at = now()", "History write"),
        ("UPDATE task_queue_user_data SET version = 2 WHERE version = :e", "user data (CAS)"),
    ],
)
def test_shape_roles(sql: str, role: str) -> None:
    assert compat.shape(sql).role == role


def _catalog(body: str, protocol: str = "3", revision: str = "003") -> str:
    return f"-- worker: v0.9\n-- protocol: {protocol}\n-- revision: {revision}\n\n{body}"


HANDSHAKE = "-- name: handshake\nSELECT min_protocol, max_protocol FROM runtime_protocol;\n"


def test_an_unfenced_matching_write_is_a_violation(views: dict[str, compat.SchemaView]) -> None:
    unsafe = parse_catalog(
        _catalog(
            HANDSHAKE + "-- name: sneaky_ack\n"
            "UPDATE task_queues SET ack_level = :a WHERE physical_queue = :key;\n"
        )
    )
    matrix = compat.build_matrix(views.values(), [unsafe])
    assert matrix.cell("v0.9", "sneaky_ack", "004").verdict == "runs"
    assert matrix.violations() == [
        "v0.9 sneaky_ack writes Matching state on 004: UNFENCED write to task_queues"
    ]


def test_the_same_write_after_the_handshake_is_fenced(views: dict[str, compat.SchemaView]) -> None:
    guarded = parse_catalog(
        _catalog(
            HANDSHAKE + "-- name: ack\n-- requires: handshake\n"
            "UPDATE task_queues SET ack_level = :a WHERE physical_queue = :key;\n"
        )
    )
    matrix = compat.build_matrix(views.values(), [guarded])
    assert matrix.cell("v0.9", "ack", "004").verdict == "fenced"
    assert matrix.violations() == []


def test_a_protocol_without_a_handshake_is_a_violation(
    views: dict[str, compat.SchemaView],
) -> None:
    silent = parse_catalog(_catalog("-- name: peek\nSELECT task_id FROM tasks;\n"))
    assert compat.build_matrix(views.values(), [silent]).violations() == [
        "v0.9 speaks protocol 3 but has no handshake"
    ]


def test_a_handshake_accepted_on_head_is_a_violation(views: dict[str, compat.SchemaView]) -> None:
    lenient = parse_catalog(_catalog(HANDSHAKE, protocol="2"))
    head = views["004"]
    wide = compat.SchemaView(head.revision, head.columns, (2, 4))
    assert compat.build_matrix([views["003"], wide], [lenient]).violations() == [
        "v0.9 handshake is not refused on 004"
    ]


def test_a_statement_broken_on_its_own_revision_is_a_violation(
    views: dict[str, compat.SchemaView],
) -> None:
    broken = parse_catalog(
        _catalog(HANDSHAKE + "-- name: typo\nSELECT tsak_id FROM tasks;\n"),
    )
    problems = compat.build_matrix(views.values(), [broken]).violations()
    assert problems == [
        "v0.9 typo does not resolve on its own revision 003: missing column tasks.tsak_id"
    ]


# the catalogs and the runner's DSN parsing ------------------------------------------------------
def test_catalogs_ship_in_the_package() -> None:
    assert [c.worker for c in all_catalogs()] == list(WORKERS)
    v03 = load_catalog("v0.3")
    assert (v03.protocol, v03.revision) == (3, "003")
    assert v03["load"].requires == ("handshake",)
    assert load_catalog("v0.2").protocol is None


def test_a_catalog_requiring_an_unknown_statement_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown statement 'nope'"):
        parse_catalog(_catalog("-- name: a\n-- requires: nope\nSELECT 1;\n"))


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (
            "host=/tmp/qg port=5432 user=postgres dbname=qg_1",
            {"host": "/tmp/qg", "port": "5432", "user": "postgres", "dbname": "qg_1"},
        ),
        (
            "host='/tmp/a b' port=5433 user=postgres dbname=x password='it\\'s'",
            {
                "host": "/tmp/a b",
                "port": "5433",
                "user": "postgres",
                "dbname": "x",
                "password": "it's",
            },
        ),
        (
            "postgresql://postgres@/postgres?host=/tmp/queueguard-1&port=5432",
            {"host": "/tmp/queueguard-1", "port": "5432", "user": "postgres", "dbname": "postgres"},
        ),
        (
            "postgresql://u:p%40ss@db.example:6543/app",
            {
                "host": "db.example",
                "port": "6543",
                "user": "u",
                "password": "p@ss",
                "dbname": "app",
            },
        ),
    ],
)
def test_connect_params(dsn: str, expected: dict[str, str]) -> None:
    assert connect_params(dsn) == expected


def test_connect_params_rejects_a_bare_word() -> None:
    with pytest.raises(UsageError, match="malformed DSN"):
        connect_params("nonsense")


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_unreachable_server_is_a_connection_failure(driver: Driver) -> None:
    worker = V03Worker(
        "host=/tmp/queueguard-nowhere port=5432 user=postgres dbname=x password=hunter2",
        driver=driver,
    )
    with pytest.raises(ConnectionFailed) as failed:
        worker.start()
    assert failed.value.exit_code == 2 and "hunter2" not in str(failed.value)


# queueguard verify carries the fence and the matrix -------------------------------------------
@pytest.mark.slow
def test_verify_runs_the_fence_and_prints_the_matrix(queueguard_server: str) -> None:
    report = verify.verify(queueguard_server, ["v0.3"], preflight=None)
    assert report.ok, verify_report.render(report)
    fence = next(c for c in report.results[0].checks if c.name == "fence")
    assert fence.ok and "old v0.3 append: StaleRangeError" in fence.detail
    assert "new v0.3 start: ProtocolMismatch" in fence.detail and "nothing changed" in fence.detail
    text = verify_report.render(report)
    assert "protocol fence (legacy workers around a forced upgrade)" in text
    assert "v0.3   handshake" in text
    doc = report.as_json()
    assert doc["compatibility"]["safe"] is True
