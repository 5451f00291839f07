"""bench.engine.repack at a small size: pg_repack and queueguard's shadow rebuild each
rewrite their own clone of one table under a writer, on the system PostgreSQL 15 (the only
major Debian ships pg_repack for). Skips with its reason where postgresql-15-repack is
missing; `.ci/run` installs it, and there the skip is a failure."""

from __future__ import annotations

import os

import pytest

from bench.engine import repack


@pytest.mark.slow
def test_pg_repack_and_the_rebuild_side_by_side() -> None:
    why = repack.missing()
    if why:
        if os.environ.get("QUEUEGUARD_REQUIRE_TOPOLOGY"):
            pytest.fail(why)
        pytest.skip(why)
    results = {r["case"]: r for r in repack.run(rows=5_000, writers=1)}
    assert set(results) == {"pg_repack", "queueguard"}
    for r in results.values():  # each rewrote its table (run() checks the new file)
        assert r["total_s"] > 0 and r["wal_mb"] > 0 and r["writer_ops"] > 0
        assert r["longest_lock_ms"] < 5_000, r  # both swap under a brief lock
