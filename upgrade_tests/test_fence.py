"""The protocol fence: old workers fail fast and change nothing.

Part 1, the runtime side (protocol 4, psycopg): every host announces `queueguard/4 host=<id>`,
checks `runtime_protocol` at startup and in the transaction of every queue load, and refuses
an older schema with "run queueguard upgrade".

Parts 2–3, released hosts replayed from `fixtures/legacy_workers/` by
`queueguard.queue_schema.legacy` through pg8000 (and, to show the fence does not depend on
the driver, through psycopg): each test proves with per-table checksums that the refused
calls changed nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from queueguard.core.keys import PhysicalQueue
from queueguard.core.protocol import PROTOCOL
from queueguard.engine.checksums import table_checksums
from queueguard.errors import (
    OlderHostsConnected,
    ProtocolMismatch,
    SchemaTooOld,
    StaleRangeError,
    UserDataConflict,
)
from queueguard.pg.connect import connection
from queueguard.pg.dsn import application_name
from queueguard.queue_schema.legacy import (
    DRIVERS,
    Driver,
    LegacyQueue,
    LegacyStatementFailed,
    V02Worker,
    V03Worker,
)
from queueguard.queue_schema.runner import upgrade
from queueguard.runtime.matching import Matching
from queueguard.stores import postgres
from queueguard.stores.memory import MemoryDatabase, MemoryStore
from queueguard.stores.postgres import PostgresStore

from .conftest import rows

Db = Callable[..., str]

ORDERS = PhysicalQueue("default", "orders", "workflow", 0)
ORDERS_AUTO = LegacyQueue("default", "orders", version="auto")
ORDERS_DEFAULT = LegacyQueue("default", "orders")
#: a new task of auto-upgrade run order-1: a v0.3 producer spools it into the `@auto` queue
NEW_TASK: dict[str, Any] = {
    "task": {
        "namespace": "default",
        "workflowId": "order-1",
        "runId": "461c053b-15f2-5db3-9e45-37262dd925e0",
        "kind": "workflow",
        "scheduledEventId": 130,
        "attempt": 1,
    },
    "enqueuedAt": "2026-02-01T00:00:00Z",
}
ONE_SECOND_MS = 1000.0


def checksums(dsn: str) -> dict[str, str]:
    with connection(dsn) as conn:
        return table_checksums(conn)


def execute(dsn: str, *statements: str) -> None:
    with connection(dsn) as conn, conn.transaction():
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def head_db(queueguard_database: Db) -> str:
    return queueguard_database(revision="004")


@pytest.fixture
def v03_db(queueguard_database: Db) -> str:
    return queueguard_database(fixture="v0.3")


@pytest.fixture
def upgraded_v03_db(v03_db: str) -> str:
    upgrade(v03_db, progress=False)
    return v03_db


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> Driver:
    value: Driver = request.param
    return value


@pytest.fixture
def workers() -> Iterator[Callable[..., Any]]:
    """Factory of legacy workers, all closed after the test."""
    opened: list[V02Worker | V03Worker] = []

    def make(cls: type[V02Worker] | type[V03Worker], dsn: str, **kw: Any) -> Any:
        worker = cls(dsn, **kw)
        opened.append(worker)
        return worker

    yield make
    for worker in opened:
        worker.close()


# part 1: the runtime side -------------------------------------------------------------------
def test_every_runtime_connection_announces_protocol_4(head_db: str) -> None:
    store = PostgresStore(head_db, host_id="fence-host-1", pool_size=2)
    try:
        Matching(store, host_id="fence-host-1").manager(ORDERS)
        with connection(head_db) as conn:
            names = {
                r[0]
                for r in conn.execute(
                    "SELECT application_name FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            }
    finally:
        store.close()
    assert names == {f"queueguard/{PROTOCOL} host=fence-host-1"}


def test_application_name_is_cut_at_63_bytes_on_a_character_boundary() -> None:
    name = application_name(4, "ü" * 40)
    assert len(name.encode()) <= 63 and name.startswith("queueguard/4 host=üü")
    assert name.encode().decode("utf-8") == name


@pytest.mark.parametrize(
    ("low", "high", "remedy"),
    [(5, 5, "upgrade this worker"), (3, 3, "run queueguard upgrade"), (5, 9, "upgrade this")],
)
def test_startup_refuses_a_protocol_range_without_4(
    head_db: str, low: int, high: int, remedy: str
) -> None:
    execute(head_db, f"UPDATE runtime_protocol SET min_protocol = {low}, max_protocol = {high}")
    before = checksums(head_db)
    with pytest.raises(ProtocolMismatch) as refused:
        PostgresStore(head_db, host_id="h")
    error = refused.value
    assert (error.worker, error.schema_min, error.schema_max) == (PROTOCOL, low, high)
    assert f"protocol {PROTOCOL}" in str(error) and f"[{low}, {high}]" in str(error)
    assert remedy in str(error)
    assert checksums(head_db) == before


@pytest.mark.parametrize(
    "breakage",
    [
        ["DELETE FROM runtime_protocol"],
        [
            "DROP INDEX runtime_protocol_single_row",
            "INSERT INTO runtime_protocol VALUES (4, 4)",
        ],
        ["DROP TABLE runtime_protocol"],
    ],
    ids=["no-row", "two-rows", "no-table"],
)
def test_startup_refuses_unless_exactly_one_protocol_row(head_db: str, breakage: list[str]) -> None:
    execute(head_db, *breakage)
    before = checksums(head_db)
    with pytest.raises(ProtocolMismatch) as refused:
        PostgresStore(head_db, host_id="h")
    assert (refused.value.schema_min, refused.value.schema_max) == (None, None)
    assert checksums(head_db) == before


def test_every_load_rechecks_the_protocol(head_db: str) -> None:
    store = PostgresStore(head_db, host_id="h")
    try:
        matching = Matching(store, host_id="h")
        execute(head_db, "UPDATE runtime_protocol SET min_protocol = 5, max_protocol = 5")
        before = checksums(head_db)
        with pytest.raises(ProtocolMismatch, match=r"\[5, 5\]"):
            matching.manager(ORDERS)
        assert checksums(head_db) == before, "the refused load changed nothing"
        assert matching.loaded() == []
    finally:
        store.close()


def test_the_memory_store_rechecks_the_protocol_on_every_load() -> None:
    db = MemoryDatabase()
    matching = Matching(MemoryStore(db), host_id="m")
    db.protocol = (5, 5)  # a newer schema was restored under the running host
    with pytest.raises(ProtocolMismatch, match=r"\[5, 5\].*upgrade this worker"):
        matching.manager(ORDERS)
    assert db.queues == {}
    with pytest.raises(ProtocolMismatch):
        Matching(MemoryStore(db), host_id="m2")  # and at startup


def test_the_load_check_runs_in_the_loads_own_transaction(
    head_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row the load writes carries the xid of the transaction that checked the protocol,
    so no upgrade can commit between the check and the load."""
    seen: list[int] = []
    original = postgres.check_protocol

    def spy(conn: Any, protocol: int = PROTOCOL) -> tuple[int, int]:
        window = original(conn, protocol)
        row = conn.execute("SELECT txid_current() % 4294967296").fetchone()
        seen.append(int(row[0]))
        return window

    store = PostgresStore(head_db, host_id="h")
    try:
        monkeypatch.setattr(postgres, "check_protocol", spy)
        store.load_queue(ORDERS)
        store.load_queue(ORDERS)  # the reload too
    finally:
        store.close()
    xmin = rows(
        head_db, f"SELECT xmin::text::bigint FROM task_queues WHERE physical_queue = '{ORDERS.key}'"
    )
    assert len(seen) == 2 and xmin == [(seen[-1],)]


@pytest.mark.parametrize("fixture_name", ["v0.1", "v0.2", "v0.3"])
def test_v04_worker_refuses_an_older_schema(queueguard_database: Db, fixture_name: str) -> None:
    dsn = queueguard_database(fixture=fixture_name)
    before = checksums(dsn)
    with pytest.raises(SchemaTooOld, match="run queueguard upgrade"):
        PostgresStore(dsn, host_id="v04")
    assert checksums(dsn) == before


def test_only_an_empty_database_gets_the_head_schema(queueguard_database: Db) -> None:
    with pytest.raises(SchemaTooOld, match="run queueguard upgrade"):
        PostgresStore(queueguard_database(), host_id="h", create_schema=False)
    dsn = queueguard_database()
    PostgresStore(dsn, host_id="h").close()
    assert rows(dsn, "SELECT version_num FROM queueguard_version") == [("004",)]
    assert rows(dsn, "SELECT min_protocol, max_protocol FROM runtime_protocol") == [(4, 4)]


# the legacy workers work on their own schema (so their failures below are the fence's) -------
def test_v03_worker_runs_on_v03(v03_db: str, driver: Driver, workers: Any) -> None:
    worker: V03Worker = workers(V03Worker, v03_db, host_id="own", driver=driver)
    worker.start()
    assert worker.load(ORDERS_AUTO).range_id == 8
    task_id = worker.append(ORDERS_AUTO, NEW_TASK)
    assert task_id == 5
    assert [r[0] for r in worker.read(ORDERS_AUTO, above=2)] == [3, 4, 5]
    assert worker.checkpoint(ORDERS_AUTO, 4) == 2  # rows 3 and 4
    assert worker.record_start(NEW_TASK["task"]["runId"], 112) == "started"
    assert worker.record_start(NEW_TASK["task"]["runId"], 112) == "already-started"
    assert rows(
        v03_db, f"SELECT count(*) FROM tasks WHERE physical_queue = '{ORDERS_AUTO.key}'"
    ) == [(1,)]


def test_v02_worker_runs_on_v02(queueguard_database: Db, driver: Driver, workers: Any) -> None:
    dsn = queueguard_database(fixture="v0.2")
    worker: V02Worker = workers(V02Worker, dsn, driver=driver)
    worker.start()
    delivery = worker.spool(ORDERS_DEFAULT, NEW_TASK)
    assert delivery in [r[0] for r in worker.read(ORDERS_DEFAULT)]
    worker.delete(delivery)
    assert delivery not in [r[0] for r in worker.read(ORDERS_DEFAULT)]
    assert worker.put_user_data("default", "orders", 3, {"v": 4}) == 4
    with pytest.raises(UserDataConflict):
        worker.put_user_data("default", "orders", 3, {"v": "lost"})
    assert worker.put_user_data("default", "fresh", 0, {"v": 1}) == 1


# a v0.3 host started after the upgrade --------------------------------------------------------
def test_v03_worker_started_after_upgrade_fails_at_handshake(
    upgraded_v03_db: str,
    driver: Driver,
    workers: Any,
    record_property: Callable[[str, object], None],
) -> None:
    before = checksums(upgraded_v03_db)
    worker: V03Worker = workers(V03Worker, upgraded_v03_db, host_id="late", driver=driver)
    started = time.perf_counter()
    with pytest.raises(ProtocolMismatch) as refused:
        worker.start()  # connect + handshake
    elapsed_ms = (time.perf_counter() - started) * 1000
    record_property(f"time_to_error_ms_{driver}", round(elapsed_ms, 1))
    print(f"\nv0.3 host ({driver}) refused {elapsed_ms:.1f} ms after starting")
    error = refused.value
    assert (error.worker, error.schema_min, error.schema_max) == (3, 4, 4)
    message = str(error)
    assert "protocol 3" in message and "[4, 4]" in message and "upgrade this worker" in message
    assert [e.name for e in worker.executed] == ["handshake"], "nothing after the handshake"
    assert elapsed_ms < ONE_SECOND_MS
    assert checksums(upgraded_v03_db) == before


def test_operator_sees_one_error_line_within_a_second(upgraded_v03_db: str) -> None:
    """A v0.3 host started as a process against head: one line, both versions, the remedy."""
    before = checksums(upgraded_v03_db)
    command = [sys.executable, "-m", "queueguard.queue_schema.legacy", "--worker", "v0.3"]
    command += ["--dsn", upgraded_v03_db, "--host-id", "ops-1"]
    # what starting the interpreter and importing the worker costs on this machine now: the
    # bound is on what the worker does after that (a loaded machine slows both alike)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import queueguard.queue_schema.legacy.__main__"], check=False
    )
    start_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=30,
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    print(f"\nv0.3 host process exited {elapsed_ms:.0f} ms after it was started")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "queueguard/3 host=ops-1: error: protocol mismatch: worker speaks protocol 3, "
        "schema accepts [4, 4]: upgrade this worker (the schema is newer)"
    ]
    assert elapsed_ms - start_ms < 3 * ONE_SECOND_MS  # typically ~150 ms in all
    assert checksums(upgraded_v03_db) == before


# a v0.3 host that loaded its queues before the upgrade ------------------------------------
def test_upgrade_refuses_while_a_v03_host_is_connected(v03_db: str, workers: Any) -> None:
    worker: V03Worker = workers(V03Worker, v03_db, host_id="still-running")
    worker.start()
    before = checksums(v03_db)
    with pytest.raises(OlderHostsConnected, match=r"queueguard/3 host=still-running"):
        upgrade(v03_db, progress=False)
    assert checksums(v03_db) == before
    assert rows(v03_db, "SELECT version_num FROM queueguard_version") == [("003",)]


def test_v03_worker_loaded_before_upgrade_is_fenced(
    v03_db: str, driver: Driver, workers: Any
) -> None:
    worker: V03Worker = workers(V03Worker, v03_db, host_id="early", driver=driver)
    worker.start()
    worker.load(ORDERS_AUTO)
    worker.load(ORDERS_DEFAULT)
    auto_queue = LegacyQueue.route("default", "orders", "auto_upgrade")
    assert auto_queue == ORDERS_AUTO
    spooled_before = worker.append(auto_queue, {**NEW_TASK, "enqueuedAt": "before"})

    upgrade(v03_db, force=True, progress=False)  # the host stays connected: forced
    before = checksums(v03_db)

    # next append: the range fence (the producer's call fails, its transaction rolls back)
    with pytest.raises(StaleRangeError) as stale:
        worker.append(auto_queue, NEW_TASK)
    assert (stale.value.queue, stale.value.held, stale.value.current) == (ORDERS_AUTO.key, 8, 9)
    # next checkpoint: the range fence
    with pytest.raises(StaleRangeError) as stale:
        worker.checkpoint(ORDERS_DEFAULT, 3)
    assert (stale.value.held, stale.value.current) == (8, 9)
    # reload: the protocol, checked in the load's own transaction, before the load runs
    with pytest.raises(ProtocolMismatch, match=r"protocol 3.*\[4, 4\].*upgrade this worker"):
        worker.load(ORDERS_AUTO)
    assert worker.executed[-1].name == "handshake"
    assert worker.ranges == {}, "the host unloaded everything"
    assert checksums(v03_db) == before, "the fenced calls changed nothing"

    # the task is not lost: the caller saw the error, and a v0.4 host accepts it
    store = PostgresStore(v03_db, host_id="v04")
    try:
        accepted = Matching(store, host_id="v04").add_task(ORDERS, NEW_TASK)
    finally:
        store.close()
    assert accepted.task_id is not None and not accepted.sync_matched
    stored = rows(
        v03_db,
        "SELECT physical_queue, task_id, data->>'enqueuedAt' FROM tasks "
        "WHERE data->'task'->>'scheduledEventId' = '130' ORDER BY task_id",
    )
    # the task spooled before the upgrade was relocated by 004; the new one went to the default
    assert [r[0] for r in stored] == [ORDERS.key, ORDERS.key]
    assert [r[2] for r in stored] == ["before", NEW_TASK["enqueuedAt"]]
    assert stored[1][1] == accepted.task_id
    assert spooled_before == 5


# v0.2 hosts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("revision", ["003", "004"])
@pytest.mark.parametrize("first", ["read", "spool", "delete"])
def test_v02_worker_fails_at_its_first_statement(
    queueguard_database: Db, driver: Driver, workers: Any, revision: str, first: str
) -> None:
    dsn = queueguard_database(fixture="v0.3")
    if revision == "004":
        upgrade(dsn, progress=False)
    before = checksums(dsn)
    worker: V02Worker = workers(V02Worker, dsn, driver=driver)
    worker.start()
    calls: dict[str, Callable[[], object]] = {
        "read": lambda: worker.read(ORDERS_DEFAULT),
        "spool": lambda: worker.spool(ORDERS_DEFAULT, NEW_TASK),
        "delete": lambda: worker.delete(1),
    }
    with pytest.raises(LegacyStatementFailed) as failed:
        calls[first]()
    assert failed.value.unresolved and failed.value.statement == first
    assert [e.name for e in worker.executed] == [first], "its very first statement"
    assert checksums(dsn) == before
