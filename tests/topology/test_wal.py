"""preflight's `estimate.wal` is an upper bound of the WAL 004 writes (sizing archives and
replicas from it is safe); the full-scale ratio is in docs/benchmarks.md."""

from __future__ import annotations

from bench.migration.databases import build_v3
from bench.topology.wal import measure
from queueguard.pg.scratch import ScratchDatabases


def test_the_wal_estimate_is_an_upper_bound(pg_admin_dsn: str) -> None:
    with ScratchDatabases(pg_admin_dsn, prefix="qg_wal") as databases:
        run = measure(build_v3(databases, rows=20_000, queues=20))
    assert run.rows >= 20_000
    assert 0 < run.written_bytes <= run.estimated_bytes, run
