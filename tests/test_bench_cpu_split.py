"""The benches' CPU split (bench/common/cpu_split.py): each kind of server process is told
apart, and a session's busy second lands on its kind, on the embedded server."""

from __future__ import annotations

import time
import uuid

import psycopg

from bench.common.cpu_split import (
    AUTOVACUUM,
    IO,
    OTHER,
    UPGRADE,
    WRITERS,
    CpuSplit,
    kind_of,
)


def test_each_process_has_its_kind() -> None:
    assert kind_of("bench-writer", "client backend", "", "bench-writer") == WRITERS
    assert kind_of("", "parallel worker", "bench-writer", "bench-writer") == WRITERS
    assert kind_of("queueguard-upgrade", "client backend", "", "bench-writer") == UPGRADE
    assert kind_of("pg_dump", "client backend", "", "bench-writer") == UPGRADE
    assert kind_of("", "parallel worker", "queueguard", "bench-writer") == UPGRADE
    assert kind_of("bench-sampler", "client backend", "", "bench-writer") == OTHER
    assert kind_of("", "io worker", "", "bench-writer") == IO
    assert kind_of("", "autovacuum worker", "", "bench-writer") == AUTOVACUUM
    assert kind_of("", "checkpointer", "", "bench-writer") == OTHER


def test_a_busy_session_is_counted_as_its_kind(empty_db: str) -> None:
    """A busy second of a session named as the split's writers lands on them (the name is
    this test's own: other tests' sessions on the shared server are not counted there)."""
    name = f"qg-split-{uuid.uuid4().hex[:8]}"
    split = CpuSplit(empty_db, writers=name, interval_s=0.2)
    split.start()
    began = time.perf_counter()
    with psycopg.connect(empty_db, application_name=name) as conn:
        conn.execute("SELECT count(*) FROM generate_series(1, 4000000)").fetchone()
        time.sleep(0.5)  # a read after the statement: its CPU is seen
    ended = time.perf_counter()
    split.stop()
    spent = split.between(began, ended)
    assert spent[WRITERS] > 0.1, spent
