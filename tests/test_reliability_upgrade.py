"""Reliability, CI scale: upgrade runners (docs/reliability.md 3, 4 and 8).

Killing the upgrade (3), lock contention (4) and two runners on an empty database (8) are
covered at CI scale by tests/test_migrations.py; this adds the runner whose bounded wait
runs out. The full scale is bench/chaos/upgrade_kill.py, lock_contention.py and
two_runners.py.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.chaos import two_runners
from queueguard.queue_schema import golden


def test_a_runner_that_waits_too_long_fails_cleanly(make_db: Callable[..., str]) -> None:
    """Another runner holds the lock: LockTimeout after the bounded wait, nothing changed;
    once the lock is free the same upgrade goes through."""
    dsn = make_db()
    golden.load(golden.get("v0.3"), dsn)
    outcome = two_runners.bounded_wait(dsn, wait_s=0.5)
    # the wait itself is bounded inside bounded_wait (wait_s ≤ waited < wait_s + 5 s)
    assert outcome.startswith("LockTimeout after ") and "nothing changed; then applied" in outcome
