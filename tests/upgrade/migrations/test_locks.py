"""Bounded locks: the lock-timeout ladder under contention, never stalling runtime writers."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from queueguard.engine import catalog
from queueguard.errors import LockTimeout

from .seeds import PINNED, seed_v3
from .support import MakeDb, assert_same_catalog, protocol, revision, run_cli, up


def _small_v3(make_db: MakeDb) -> tuple[str, str]:
    dsn = make_db()
    up(dsn, to="003")
    seed_v3(dsn)
    return dsn, PINNED[0]


class RuntimeWriter(threading.Thread):
    """A v0.3-style writer: small range-checked transactions (task_queues, then tasks)."""

    def __init__(self, dsn: str, queue: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.queue = dsn, queue
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn, application_name="test-writer") as conn:
                found = conn.execute(
                    "SELECT range_id FROM task_queues WHERE physical_queue = %s", (self.queue,)
                ).fetchone()
                assert found is not None
                conn.commit()
                while not self.stop.is_set():
                    started = time.monotonic()
                    cur = conn.execute(
                        "UPDATE task_queues SET ack_level = ack_level "
                        "WHERE physical_queue = %s AND range_id = %s",
                        (self.queue, found[0]),
                    )
                    assert cur.rowcount == 1, "range check failed"
                    conn.execute(
                        "SELECT count(*) FROM tasks WHERE physical_queue = %s", (self.queue,)
                    )
                    conn.commit()
                    self.latencies.append(time.monotonic() - started)
                    time.sleep(0.005)
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_lock_contention_times_out_retries_fails_cleanly_and_never_stalls_writers(
    make_db: MakeDb,
) -> None:
    dsn, queue = _small_v3(make_db)
    schema_before, data_before = catalog.introspect(dsn), catalog.contents(dsn)
    blocker = psycopg.connect(dsn, application_name="test-blocker")
    writer = RuntimeWriter(dsn, queue)
    try:
        blocker.execute("LOCK TABLE tasks IN ACCESS SHARE MODE")  # held until rollback
        writer.start()
        time.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="after 3 attempts"):
            up(dsn, lock_timeout_ms=200, retries=2)
        elapsed = time.monotonic() - started
        cli = run_cli("upgrade", "--dsn", dsn, "--lock-timeout", "200ms", "--retries", "2")
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join(10)
        blocker.rollback()
        blocker.close()
    assert writer.error is None, writer.error
    assert cli.returncode == 1, cli.stderr
    assert "could not get its locks after 3 attempts" in cli.stderr
    # 3 attempts of 200, 300 and 450 ms with jittered pauses in between.
    assert 0.9 < elapsed < 5.0
    # The runtime writer queued behind the migration's lock request, never longer than the
    # largest lock_timeout of the ladder (450 ms), plus slack for a loaded CI machine.
    worst = max(writer.latencies)
    print(f"writer: {len(writer.latencies)} transactions, worst {worst * 1000:.0f} ms")
    assert len(writer.latencies) > 20
    assert worst < 0.45 + 0.5, f"writer blocked for {worst:.3f}s"
    assert revision(dsn) == "003" and protocol(dsn) == [(3, 3)]
    assert_same_catalog(schema_before, catalog.introspect(dsn), "after a lock timeout")
    assert catalog.contents(dsn) == data_before


def test_lock_timeout_then_success_counts_lock_waits(make_db: MakeDb) -> None:
    dsn, _ = _small_v3(make_db)
    blocker = psycopg.connect(dsn, application_name="test-blocker")
    blocker.execute("LOCK TABLE task_queues IN ROW EXCLUSIVE MODE")
    release = threading.Timer(0.6, blocker.rollback)
    release.start()
    try:
        report = up(dsn, lock_timeout_ms=200, retries=3)
    finally:
        release.join()
        blocker.close()
    assert report.applied == ["004"] and report.lock_waits >= 1
