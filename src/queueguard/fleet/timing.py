"""What a target's upgrade costs beyond its statements, and what running many at once costs —
measured, not assumed: `fleet plan` applies a group's pending revisions to copies of its
representative's sample exactly as `fleet upgrade` applies them to a target (the same
runner, runner lock, timeouts and ledger; an Alembic set in a worker process whose imports
are already paid), once alone and then on `k` copies at once.

- The *overhead* of a target is the time alone less what its statements took in the trace
  (connections, the runner lock, each revision's transaction and ledger row): on a fleet
  of small targets it is most of each target's time.
- The *capacity* is how many such upgrades the server runs at once before each slows down:
  `k` at once taking s× the time alone means a capacity of k/s. A wave of `parallel` c
  then stretches each of its targets by max(1, c / capacity) — the server's cores, disk
  and locks, whatever binds, as this set's own upgrade meets them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from queueguard.engine.apply.session import Limits
from queueguard.fleet import apply
from queueguard.fleet.alembic_worker import Worker
from queueguard.fleet.targets import Target
from queueguard.pg.connect import connect
from queueguard.sets import MigrationSet


@dataclass(frozen=True)
class Timing:
    #: a target's time beyond its statements' (ms)
    overhead_ms: float
    #: upgrades the server runs at once before each slows down (≥ 1)
    capacity: float

    def stretch(self, at_once: int) -> float:
        """How much longer each target takes when `at_once` run together."""
        return max(1.0, at_once / self.capacity)


def _apply_one(mset: MigrationSet, target: Target, to: str | None, worker: Worker | None) -> float:
    """One copy upgraded as `fleet upgrade` upgrades a target; its time in ms."""
    began = time.perf_counter()
    outcome = apply.upgrade(mset, apply.Flight(target), to, Limits(), worker=worker)
    took = (time.perf_counter() - began) * 1000
    if mset.pending(outcome.after, to):  # (a branch's head leaves the other branch's heads)
        raise RuntimeError(f"the timed copy ended at {outcome.after}, not {mset.resolve(to)}")
    return took


def measure(
    mset: MigrationSet,
    warm: Sequence[Target],
    alone: Target,
    together: Sequence[Target],
    to: str | None,
    statements_ms: float,
    worker_for: Callable[[], Worker | None],
) -> Timing:
    """Timing from copies of one sample at one revision: each worker warmed on a copy of
    `warm` (an Alembic worker's imports paid, as a runner's are after its first target; the
    server's caches filled), `alone` upgraded by itself, then `together` all at once."""
    for copy in [*warm, alone, *together]:  # a new database's first session builds its
        with connect(apply.session_dsn(copy)) as conn:  # caches: a target in use has them
            conn.execute("SELECT count(*) FROM pg_class, pg_attribute WHERE attrelid = oid")
    workers = [worker_for() for _ in warm]
    try:
        with ThreadPoolExecutor(len(warm)) as pool:
            list(pool.map(lambda i: _apply_one(mset, warm[i], to, workers[i]), range(len(warm))))
        with ThreadPoolExecutor(1) as pool:  # in a thread of its own, as a fleet's targets run
            took = pool.submit(_apply_one, mset, alone, to, workers[0]).result()
        overhead = max(0.0, took - statements_ms)
        if len(together) < 2:
            return Timing(overhead, 1.0)
        with ThreadPoolExecutor(len(together)) as pool:
            times = list(pool.map(
                lambda i: _apply_one(mset, together[i], to, workers[i % len(workers)]),
                range(len(together)),
            ))  # fmt: skip
        slower = max(1.0, (sum(times) / len(times)) / max(took, 1e-3))
        return Timing(overhead, max(1.0, len(together) / slower))
    finally:
        for w in workers:
            if w is not None:
                w.close()
