"""How much WAL an upgrade really writes, next to preflight's `estimate.wal` (a rule: 16 × heap
and index) and `plan`'s (004's statements observed on a sample, scaled to the table)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from queueguard.pg.connect import connection
from queueguard.queue_schema.preflight import preflight
from queueguard.queue_schema.runner import upgrade


@dataclass(frozen=True)
class WalRun:
    rows: int
    estimated_bytes: int
    written_bytes: int
    #: plan's walBytes for the run (None: not asked)
    planned_bytes: int | None = None

    @property
    def ratio(self) -> float:
        """written / estimated (1.0: the estimate was exact; < 1: it overestimated)."""
        return self.written_bytes / self.estimated_bytes


def _lsn(dsn: str) -> str:
    with connection(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def measure(dsn: str, *, planned: bool = False) -> WalRun:
    """Preflight's estimate (and `planned`: plan's, made on a scratch sample), then the
    upgrade with the server's WAL position around it (the server's other traffic counts too:
    run it on a quiet server)."""
    bill = None
    if planned:
        from queueguard import sets
        from queueguard.engine.plan.planner import plan
        from queueguard.resources import migrations_dir

        bill = plan(sets.load(Path(str(migrations_dir())), "queueguard"), dsn).document()
    report = preflight(dsn)
    wal = next(f for f in report.findings if f.code == "estimate.wal")
    before = _lsn(dsn)
    upgrade(dsn, progress=False)
    after = _lsn(dsn)
    with connection(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)::bigint", (after, before)).fetchone()
    assert row is not None
    return WalRun(
        wal.count,
        int(wal.samples[0]["bytes"]),
        int(row[0]),
        None if bill is None else int(bill["walBytes"]),
    )
