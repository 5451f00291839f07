"""The runtime through PgBouncer (transaction pooling): host processes killed at random while
they spool and dispatch through the pooler lose nothing and commit nothing stale (the crash
chaos scenario, judged on the database directly)."""

from __future__ import annotations

from bench.chaos import crash
from bench.topology.pgbouncer import PgBouncer


def test_crash_under_load_through_the_pooler(pgbouncer: PgBouncer) -> None:
    result = crash.run(kills=2, pause=(0.5, 1.2), mode="one-by-one", pooler=pgbouncer)
    print(result.as_json())
    crash.check(result)
    assert result.outcome.produced > 0
