"""preflight's `estimate.wal` against the WAL 004 actually writes (docs/benchmarks.md).

    python -m bench.migration.wal_estimate --rows 100000

Builds the migration benchmark's v0.3 database, reads preflight's estimate and plan's (004
observed on a scratch sample and scaled), upgrades, and measures pg_current_wal_lsn() around
the upgrade on the shared scratch server.
"""

from __future__ import annotations

import argparse

from bench.migration.databases import build_v3
from bench.topology.wal import measure
from queueguard.pg.scratch import ScratchDatabases, server_dsn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=100)
    args = parser.parse_args()
    with ScratchDatabases(server_dsn(), prefix="qg_wal") as databases:
        dsn = build_v3(databases, args.rows, args.queues)
        run = measure(dsn, planned=True)
    planned = run.planned_bytes or 0
    print(
        f"rows {run.rows:,}: preflight estimated {run.estimated_bytes / 2**20:.1f} MiB, plan "
        f"{planned / 2**20:.1f} MiB, written {run.written_bytes / 2**20:.1f} MiB; written / "
        f"preflight {run.ratio:.2f}, written / plan "
        f"{run.written_bytes / planned if planned else float('nan'):.2f}"
    )


if __name__ == "__main__":
    main()
